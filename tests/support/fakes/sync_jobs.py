"""Stand-ins for what the index manager (cluster/sync/manager.py) drives: Ray's job API and the index
actor. Jobs are PENDING when submitted; a test moves them on by setting `states`."""

from __future__ import annotations

from cluster.errors import IndexNotFound
from cluster.index import BuildState, IndexRecord


class FakeJobs:
    def __init__(self) -> None:
        self.submitted: list[tuple[list[str], str]] = []
        self.states: dict[str, str] = {}
        self.stopped: list[str] = []

    def submit(self, argv: list[str], submission_id: str) -> str:
        self.submitted.append((argv, submission_id))
        self.states[submission_id] = "PENDING"
        return submission_id

    def status(self, job_id: str) -> str:
        return self.states[job_id]

    def stop(self, job_id: str) -> None:
        self.stopped.append(job_id)
        self.states[job_id] = "STOPPED"

    def finish_all(self) -> None:
        for job_id in self.states:
            self.states[job_id] = "SUCCEEDED"


class FakeIndex:
    def __init__(self) -> None:
        self.states: dict[str, BuildState] = {}
        self.indexed: list[IndexRecord] = []
        self.removed: list[str] = []

    def builds(self) -> dict[str, BuildState]:
        return dict(self.states)

    def records(self) -> list[IndexRecord]:
        return list(self.indexed)

    def remove(self, name: str) -> list[str]:
        if name not in [r.name for r in self.indexed]:
            raise IndexNotFound(name, [])
        self.removed.append(name)
        self.indexed = [r for r in self.indexed if r.name != name]
        return [f"{name}__b1"]
