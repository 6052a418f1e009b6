"""A build asked for through the management API: the ticket its caller gets at once, and its phase,
read from the Ray job that runs it and the index actor's build state."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from cluster.index import BuildProgress, BuildState
from cluster.types import Strict

__all__ = ["TERMINAL_JOB_STATES", "BuildPhase", "BuildReport", "BuildTicket", "phase_of"]

TERMINAL_JOB_STATES = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})


class BuildTicket(Strict):
    """What an index, refresh or sync request started: a Ray job building one announced build."""

    index: str
    build: str = Field(description="The build id the job will create (a collection name).")
    job_id: str = Field(description="The Ray job (`ray job status <id>`, the dashboard's Jobs page).")
    folder: str
    ref: str | None = None
    full: bool = False
    reason: str = Field(default="asked", description="asked (a client), sync (a change was seen), hook (a push).")
    submitted_at: float


class BuildPhase(StrEnum):
    STARTING = "starting"  # the job is queued, walking the folder or planning
    BUILDING = "building"  # rows are being embedded and written
    COMMITTED = "committed"  # the build serves
    UP_TO_DATE = "up-to-date"  # nothing changed: no build was made
    FAILED = "failed"


class BuildReport(Strict):
    ticket: BuildTicket
    joined: bool = Field(default=False, description="True: a build of this index was already running; this is it.")
    phase: BuildPhase
    done: bool
    progress: BuildProgress | None = None
    error: str | None = None


def phase_of(job_status: str, state: BuildState | None, build: str) -> BuildPhase:
    """The phase of a ticket's build from its job's status and the index actor's state of the index."""
    mine = state if state is not None and state.build == build else None
    if mine is not None and mine.state == "committed":
        return BuildPhase.COMMITTED
    if mine is not None and mine.state == "failed":
        return BuildPhase.FAILED
    if job_status == "SUCCEEDED":
        return BuildPhase.UP_TO_DATE if mine is None else BuildPhase.COMMITTED
    if job_status in TERMINAL_JOB_STATES:
        return BuildPhase.FAILED
    return BuildPhase.BUILDING if mine is not None else BuildPhase.STARTING
