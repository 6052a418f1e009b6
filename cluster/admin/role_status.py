"""What a status route says of a role whose actor did not answer: restarting, or unavailable.

A dispatcher or a virtual container that Ray is restarting (`max_restarts`) fails the calls made
meanwhile. A status route (`GET /admin/providers`, `/health`, `/gate`, `/sidecars`) must still
answer: it reports that role as `restarting` (ask again shortly) or `unavailable` (dead for good,
or alive but not answering), and the other roles as usual. The admin API catches Ray's errors
and names them as a `CallFailure`, reads the actor's lifecycle state when it can, and this module
decides. Pure: no Ray.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from cluster.types import Strict

__all__ = [
    "ALIVE",
    "DEAD",
    "STARTING_STATES",
    "CallFailure",
    "RoleAnswer",
    "RoleStatus",
    "role_answer",
    "role_status",
]

# Ray's actor lifecycle states, as its state API spells them.
ALIVE = "ALIVE"
DEAD = "DEAD"
STARTING_STATES = frozenset({"DEPENDENCIES_UNREADY", "PENDING_CREATION", "RESTARTING"})


class CallFailure(StrEnum):
    """How an actor call failed, in Ray's terms."""

    DIED = "died"  # the actor's process died before it answered (ActorDiedError, RayActorError)
    UNREACHABLE = "unreachable"  # Ray cannot reach it for now, it may come back (ActorUnavailableError)
    TIMED_OUT = "timed-out"  # no answer before the status deadline (GetTimeoutError, TimeoutError)


class RoleStatus(StrEnum):
    OK = "ok"  # the actor answered
    RESTARTING = "restarting"  # Ray is (re)starting the actor: ask again shortly
    UNAVAILABLE = "unavailable"  # dead for good, or alive but not answering


class RoleAnswer(Strict):
    """A role's status as a route reports it, with the reason in words when it is not ok."""

    status: RoleStatus
    detail: str | None = Field(default=None, description="What failed and Ray's error type; None when ok.")


def role_status(failure: CallFailure | None, actor_state: str | None, *, restartable: bool) -> RoleStatus:
    """The status a failed (or successful, `failure` None) call means.

    `actor_state` is the actor's lifecycle state read after the failure (None: unknown). It decides
    when known: dead is unavailable, starting or restarting is restarting, and an actor alive again
    after dying or being unreachable has just restarted, while one alive that let the deadline pass
    is not answering. With the state unknown, the error decides: an unreachable actor may come back,
    and a dead one comes back only if Ray restarts it (`restartable`: its `max_restarts` allows it).
    """
    if failure is None:
        return RoleStatus.OK
    if actor_state == DEAD:
        return RoleStatus.UNAVAILABLE
    if actor_state in STARTING_STATES:
        return RoleStatus.RESTARTING
    if failure is CallFailure.TIMED_OUT:
        return RoleStatus.UNAVAILABLE
    if actor_state == ALIVE or failure is CallFailure.UNREACHABLE:
        return RoleStatus.RESTARTING
    return RoleStatus.RESTARTING if restartable else RoleStatus.UNAVAILABLE


def role_answer(
    actor: str, failure: CallFailure | None, actor_state: str | None, *, error: str | None, restartable: bool
) -> RoleAnswer:
    """`role_status` with its reason: which actor, what Ray said (`error`: the exception's type
    name, never its message) and the lifecycle state when known."""
    status = role_status(failure, actor_state, restartable=restartable)
    if status is RoleStatus.OK or failure is None:
        return RoleAnswer(status=status)
    seen = f"{failure.value}, {error}" if error else failure.value
    state = f", state {actor_state}" if actor_state else ""
    return RoleAnswer(status=status, detail=f"{actor} did not answer ({seen}{state})")
