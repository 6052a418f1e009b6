"""Who a cloud call is for: the project (repository) and its priority, carried implicitly.

A dispatcher sets the tag for the duration of one request; every task it starts inherits it
(contextvars), so the virtual container's permit request names the right project and priority
without threading them through every scheduler signature.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from cluster.cloud.budget import Priority

__all__ = ["DEFAULT_PROJECT", "UNTAGGED", "RequestTag", "current_request_tag", "set_request_tag"]

DEFAULT_PROJECT = "default"


@dataclass(frozen=True)
class RequestTag:
    project: str = DEFAULT_PROJECT
    priority: Priority = Priority.BULK


UNTAGGED = RequestTag()  # frozen, so one shared default is safe
_CURRENT: ContextVar[RequestTag] = ContextVar("samespace_request_tag", default=UNTAGGED)


# Functions, not the ContextVar itself, are what actor code references: Ray pickles an actor
# class by value, with the globals its methods use, and a ContextVar cannot be pickled.
def set_request_tag(tag: RequestTag) -> None:
    """Tag the current request (and every task it starts from here on)."""
    _CURRENT.set(tag)


def current_request_tag() -> RequestTag:
    """The tag of the request this code runs for (`UNTAGGED` outside any)."""
    return _CURRENT.get()
