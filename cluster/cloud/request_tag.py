"""Who a cloud call is for: the project (repository), its priority, the caller (an OAuth subject, whose
daily credits `quotas.daily_credits` bounds) and the tool call it serves (whose credits its audit line
records), carried implicitly; and the responses' usage of the call running in this task.

A dispatcher sets the tag for the duration of one request; every task it starts inherits it
(contextvars), so the virtual container's permit request names the right project, priority, subject
and call without threading them through every scheduler signature. Across actors they travel as
arguments: a replica's `QueryPath` and `LazyDispatcher` pass the tag's `caller_kwargs` to the
dispatcher, the dispatcher's cloud transport passes them to the virtual container.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

from cluster.cloud.budget import Priority
from cluster.cloud.spend import CallUsage

__all__ = [
    "DEFAULT_PROJECT",
    "UNTAGGED",
    "RequestTag",
    "caller_kwargs",
    "collecting_usage",
    "current_request_tag",
    "hear_usage",
    "set_request_tag",
    "tagged",
]

DEFAULT_PROJECT = "default"


@dataclass(frozen=True)
class RequestTag:
    project: str = DEFAULT_PROJECT
    priority: Priority = Priority.BULK
    subject: str | None = None  # an OAuth caller's subject: its daily credits are counted and capped
    call_id: str | None = None  # the MCP tool call this serves: its credits go to the call's audit line


UNTAGGED = RequestTag()  # frozen, so one shared default is safe
_CURRENT: ContextVar[RequestTag] = ContextVar("samespace_request_tag", default=UNTAGGED)
_USAGE: ContextVar[list[CallUsage] | None] = ContextVar("samespace_call_usage", default=None)


# Functions, not the ContextVar itself, are what actor code references: Ray pickles an actor
# class by value, with the globals its methods use, and a ContextVar cannot be pickled.
def set_request_tag(tag: RequestTag) -> None:
    """Tag the current request (and every task it starts from here on)."""
    _CURRENT.set(tag)


def current_request_tag() -> RequestTag:
    """The tag of the request this code runs for (`UNTAGGED` outside any)."""
    return _CURRENT.get()


@contextmanager
def tagged(subject: str | None, call_id: str | None) -> Iterator[RequestTag]:
    """Run the block (and every task it starts) for this caller and call; the tag is restored after."""
    token = _CURRENT.set(replace(_CURRENT.get(), subject=subject, call_id=call_id))
    try:
        yield _CURRENT.get()
    finally:
        _CURRENT.reset(token)


def caller_kwargs() -> dict[str, str]:
    """The current tag's subject and call id as keyword arguments of an actor call (none when unset)."""
    tag = _CURRENT.get()
    found = {"subject": tag.subject, "call_id": tag.call_id}
    return {name: value for name, value in found.items() if value is not None}


@contextmanager
def collecting_usage() -> Iterator[list[CallUsage]]:
    """The usage `hear_usage` hears in this task (and the tasks it starts) while the block runs: one
    call's responses, apart from the calls running beside it in the same actor."""
    heard: list[CallUsage] = []
    token = _USAGE.set(heard)
    try:
        yield heard
    finally:
        _USAGE.reset(token)


def hear_usage(usage: CallUsage, otherwise: list[CallUsage]) -> None:
    """A response's usage, to the call collecting it in this task, else to `otherwise`."""
    heard = _USAGE.get()
    (heard if heard is not None else otherwise).append(usage)
