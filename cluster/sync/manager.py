"""The index manager: index, refresh and remove on request, one build per index at a time, and the
registered folders kept fresh (the sync actor's logic; Ray jobs and the index actor are injected).

A request submits the real reindex job (`python -m jobs.reindex ... --build-id <id>`) and answers at
once with its ticket: the job id and the build id the job will create. While a build of an index runs,
another request for it joins that build and gets its ticket. Every index asked for is registered in
the durable config with the folder (and ref) it follows and the change signature its build saw; a
sync pass reindexes those whose signature moved and settled (`SyncWatch`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from cluster.config import ConfigStore, IndexRegistration
from cluster.errors import IndexNotFound, SamespaceError
from cluster.index import BuildState, IndexRecord, new_build_id, validate_index_name
from cluster.ingest import change_signature, resolve_commit
from cluster.sync.tickets import BuildPhase, BuildReport, BuildTicket, phase_of
from cluster.sync.watch import SyncWatch

__all__ = ["IndexManager", "IndexReader", "JobRunner", "folder_signature", "reindex_entrypoint"]

log = logging.getLogger("samespace.sync")


class JobRunner(Protocol):
    """Ray's job API, as the manager uses it."""

    def submit(self, argv: list[str], submission_id: str) -> str: ...
    def status(self, job_id: str) -> str: ...
    def stop(self, job_id: str) -> None: ...


class IndexReader(Protocol):
    """The index actor, as the manager uses it."""

    def builds(self) -> dict[str, BuildState]: ...
    def records(self) -> list[IndexRecord]: ...
    def remove(self, name: str) -> list[str]: ...


def reindex_entrypoint(folder: str, name: str, build: str, ref: str | None, full: bool) -> list[str]:
    """The job's arguments after `python -m jobs.reindex`."""
    argv = ["--repo", folder, "--name", name, "--build-id", build]
    return argv + (["--ref", ref] if ref else []) + (["--full"] if full else [])


def folder_signature(folder: str, ref: str | None) -> str:
    """What changes when a reindex could find something new: the ref's commit, or the folder's
    change signature (HEAD, status, file stamps; file stamps alone for a plain folder)."""
    return resolve_commit(Path(folder), ref) if ref else change_signature(Path(folder))


class IndexManager:
    """Thread-safe: the sync pass and requests may run at once."""

    def __init__(
        self,
        jobs: JobRunner,
        index: IndexReader,
        store: ConfigStore,
        debounce_s: float,
        clock: Callable[[], float],
        signature: Callable[[str, str | None], str] = folder_signature,
    ) -> None:
        self._jobs = jobs
        self._index = index
        self._store = store
        self._clock = clock
        self._signature = signature
        self._watch = SyncWatch(debounce_s)
        self._tickets: dict[str, BuildTicket] = {}  # the latest build asked for, per index
        self._lock = threading.RLock()

    # ---- requests ------------------------------------------------------------------------------
    def request(
        self, folder: str, name: str, ref: str | None = None, full: bool = False, reason: str = "asked"
    ) -> BuildReport:
        """Submit a build of `folder` (at `ref`) as `name`, or join the one running; register it."""
        validate_index_name(name)
        with self._lock:
            current = self._current(name)
            if current is not None and not current.done:
                return current.model_copy(update={"joined": True})
            try:
                signature: str | None = self._signature(folder, ref)
            except (SamespaceError, OSError) as exc:
                if ref is not None:
                    raise  # an unknown ref: refused now, not by a failed job
                log.warning("no change signature for %s: %s", folder, exc)
                signature = None
            now = self._clock()
            build = new_build_id(name, now)
            job_id = self._jobs.submit(reindex_entrypoint(folder, name, build, ref, full), f"samespace-{build}")
            ticket = BuildTicket(
                index=name,
                build=build,
                job_id=job_id,
                folder=folder,
                ref=ref,
                full=full,
                reason=reason,
                submitted_at=now,
            )
            self._tickets[name] = ticket
            self._watch.submitted(name)
            self._register(name, folder, ref, signature, now)
            return self._report(ticket)

    def refresh(self, name: str, full: bool = False, reason: str = "asked") -> BuildReport:
        """Reindex a registered (or already indexed) index from the folder and ref it follows."""
        registration = self.registrations().get(name)
        if registration is not None:
            return self.request(registration.folder, name, registration.ref, full, reason)
        record = next((r for r in self._index.records() if r.name == name), None)
        if record is None:
            raise IndexNotFound(name, sorted(self.registrations()))
        ref = record.source.ref if record.source is not None else None
        return self.request(record.followed_folder, name, ref, full, reason)

    def remove(self, name: str) -> list[str]:
        """Stop its running build, forget its registration, drop the index; returns the dropped builds."""
        with self._lock:
            current = self._current(name)
            if current is not None and not current.done:
                self._jobs.stop(current.ticket.job_id)
            self._tickets.pop(name, None)
            self._watch.forget(name)
            registered = self.registrations()
            if name in registered:
                self._store.save_indexes({k: v for k, v in registered.items() if k != name})
        try:
            return self._index.remove(name)
        except IndexNotFound:
            if name in registered:
                return []  # registered, never built: forgetting it was the whole removal
            raise

    # ---- reads ---------------------------------------------------------------------------------
    def registrations(self) -> dict[str, IndexRegistration]:
        return self._store.read_indexes()

    def report(self, name: str) -> BuildReport | None:
        return self._current(name)

    def reports(self) -> list[BuildReport]:
        builds = self._index.builds()
        return [self._report(ticket, builds) for ticket in list(self._tickets.values())]

    # ---- sync ----------------------------------------------------------------------------------
    def sync_once(self) -> list[BuildReport]:
        """One pass over the registered indexes: reindex those whose folder changed and settled."""
        started = []
        builds = self._index.builds()
        for registration in self.registrations().values():
            current = self._current(registration.name, builds)
            if not registration.sync or (current is not None and not current.done):
                continue
            try:
                signature = self._signature(registration.folder, registration.ref)
            except (SamespaceError, OSError) as exc:  # a folder gone or unreadable for now: next pass
                log.warning("sync: cannot read %s: %s", registration.folder, exc)
                continue
            if self._watch.due(registration, signature, self._clock()):
                started.append(self.refresh(registration.name, reason="sync"))
        return started

    def hook(self, folder_matches: Callable[[IndexRegistration], bool]) -> list[BuildReport]:
        """A push was announced: refresh every registered index it concerns, now (no debounce)."""
        return [
            self.refresh(registration.name, reason="hook")
            for registration in self.registrations().values()
            if folder_matches(registration)
        ]

    # ---- internals -----------------------------------------------------------------------------
    def _current(self, name: str, builds: dict[str, BuildState] | None = None) -> BuildReport | None:
        """The report of the index's latest build asked for; it is in progress while not `done` (a job
        lingers a moment after its commit: the build's own state says it is over)."""
        ticket = self._tickets.get(name)
        return self._report(ticket, builds) if ticket is not None else None

    def _report(self, ticket: BuildTicket, builds: dict[str, BuildState] | None = None) -> BuildReport:
        status = self._jobs.status(ticket.job_id)
        state = (self._index.builds() if builds is None else builds).get(ticket.index)
        phase = phase_of(status, state, ticket.build)
        mine = state if state is not None and state.build == ticket.build else None
        error = mine.error if mine is not None else None
        if phase is BuildPhase.FAILED and error is None:
            error = f"job {ticket.job_id} {status.lower()} (see `ray job logs {ticket.job_id}`)"
        return BuildReport(
            ticket=ticket,
            phase=phase,
            done=phase in (BuildPhase.COMMITTED, BuildPhase.UP_TO_DATE, BuildPhase.FAILED),
            progress=mine.progress if mine is not None else None,
            error=error,
        )

    def _register(self, name: str, folder: str, ref: str | None, signature: str | None, now: float) -> None:
        registered = self.registrations()
        previous = registered.get(name)
        registered[name] = IndexRegistration(
            name=name,
            folder=folder,
            ref=ref,
            sync=previous.sync if previous is not None else True,
            registered_at=previous.registered_at if previous is not None else now,
            signature=signature,
            submitted_at=now,
        )
        self._store.save_indexes(registered)
