"""The caller of the request this code runs for, carried implicitly inside one process.

The HTTP guard sets it for the duration of a request (`acting_as`); every task the request starts
inherits it (contextvars), so the MCP tools, the ask loop's gathering rounds and the search service
read the same caller without threading it through every signature. It never crosses an actor:
what an actor needs of the caller (a `Reader`, a subject) is passed as an argument.

Outside any request the caller is `ANONYMOUS`: no scope, no group, not unrestricted, so code that
forgot to set it reads only the indexes open to every reader and may change nothing (fail closed).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from cluster.auth.principal import Principal, Reader

__all__ = ["ANONYMOUS", "acting_as", "current_principal", "current_reader"]

ANONYMOUS = Principal(kind="anonymous", subject="anonymous")
_CURRENT: ContextVar[Principal | None] = ContextVar("samespace_principal", default=None)


@contextmanager
def acting_as(principal: Principal) -> Iterator[Principal]:
    """Run the block (and every task it starts) as `principal`."""
    token = _CURRENT.set(principal)
    try:
        yield principal
    finally:
        _CURRENT.reset(token)


# Functions, not the ContextVar itself, are what other modules reference: Ray pickles an actor class
# by value with the globals its methods use, and a ContextVar cannot be pickled.
def current_principal() -> Principal:
    """The caller of the current request (`ANONYMOUS` outside any)."""
    return _CURRENT.get() or ANONYMOUS


def current_reader() -> Reader:
    """What per-index access needs of the current caller."""
    return current_principal().reader()
