"""The index manager: index, refresh and remove on request, one build per index at a time, and the
registered folders kept fresh (the sync actor's logic; Ray jobs and the index actor are injected).

A request submits the real reindex job (`python -m jobs.reindex ... --build-id <id>`) and answers at
once with its ticket: the job id and the build id the job will create. While `limits.max_jobs_per_index`
builds of an index run (1), another request for it joins the latest and gets its ticket; a build beyond
`limits.max_jobs_total` is refused (a sync pass's waits for a later pass), and so is a registration
beyond `limits.max_registrations`. Every index asked for is registered in the durable config with the
folder (and ref) it follows, who registered it, and the change signature its build saw; a sync pass
reindexes those whose signature moved and settled (`SyncWatch`). Who may take, refresh or remove a
name (the folder rules, and the owner of an index an OAuth caller registered over MCP): `claims.py`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from cluster.config import ConfigStore, IndexOrigin, IndexOwner, IndexRegistration
from cluster.errors import IndexNotFound, IndexRefused, LimitExceeded, SamespaceError
from cluster.index import BuildState, IndexAcl, IndexRecord, new_build_id, validate_index_name
from cluster.ingest import change_signature, resolve_commit
from cluster.settings import LimitsSettings
from cluster.sync.claims import (
    CLUSTER_CALLER,
    Confinement,
    Followed,
    IndexCaller,
    check_job_cap,
    check_owner,
    check_registration_cap,
    claim,
    followed,
    registered_origin,
)
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


def reindex_entrypoint(
    folder: str, name: str, build: str, ref: str | None, full: bool, confined: bool = False
) -> list[str]:
    """The job's arguments after `python -m jobs.reindex`; `--confined`: the job confines the folder to
    the allowed roots again before it reads anything (a build an MCP client caused)."""
    argv = ["--repo", folder, "--name", name, "--build-id", build]
    return argv + (["--ref", ref] if ref else []) + (["--full"] if full else []) + (["--confined"] if confined else [])


def folder_signature(folder: str, ref: str | None) -> str:
    """What changes when a reindex could find something new: the ref's commit, or the folder's
    change signature (HEAD, status, file stamps; file stamps alone for a plain folder)."""
    return resolve_commit(Path(folder), ref) if ref else change_signature(Path(folder))


class IndexManager:
    """Thread-safe: the sync pass and requests may run at once. `roots` and `home` confine what an MCP
    client registered (`cluster.sync.confine`, checked again before each of its builds)."""

    def __init__(
        self,
        jobs: JobRunner,
        index: IndexReader,
        store: ConfigStore,
        debounce_s: float,
        clock: Callable[[], float],
        *,
        roots: Sequence[Path],
        home: Path,
        limits: LimitsSettings | None = None,
        acl: IndexAcl | None = None,
        signature: Callable[[str, str | None], str] = folder_signature,
    ) -> None:
        self._jobs = jobs
        self._index = index
        self._store = store
        self._clock = clock
        self._signature = signature
        self._confinement = Confinement(roots, home)
        self._limits = limits or LimitsSettings()
        self._acl = acl or IndexAcl({}, self._limits)
        self._watch = SyncWatch(debounce_s)
        self._tickets: dict[str, list[BuildTicket]] = {}  # per index, oldest first: the last is the latest asked
        self._finished: set[str] = set()  # builds known to be over (their jobs are not asked again)
        self._lock = threading.RLock()

    # ---- requests ------------------------------------------------------------------------------
    def request(
        self,
        folder: str,
        name: str,
        ref: str | None = None,
        full: bool = False,
        *,
        origin: IndexOrigin,
        caller: IndexCaller = CLUSTER_CALLER,
        reason: str = "asked",
    ) -> BuildReport:
        """Submit a build of `folder` (at `ref`) as `name`, or join the one running; register it. From an
        MCP client, only a name that is free or already follows this folder and ref (an owned name: its
        owner's or an admin's, who may re-point it), inside the roots; a new name is the caller's."""
        validate_index_name(name)
        wanted = Followed(folder, ref)
        with self._lock:
            registered = self.registrations()
            previous = registered.get(name)
            if origin is IndexOrigin.MCP:
                check_owner(name, previous, caller)
                if previous is None or previous.owner is None:
                    records = self._index.records() if previous is None else []
                    claim(name, wanted, followed(name, registered, records))
                self._confinement.require(name, folder)
            kept = registered_origin(origin, previous)
            owner = previous.owner if previous is not None else caller.owner if origin is IndexOrigin.MCP else None
            return self._start(name, wanted, full, reason, kept, owner, confined=origin is IndexOrigin.MCP)

    def refresh(
        self,
        name: str,
        full: bool = False,
        *,
        origin: IndexOrigin,
        caller: IndexCaller = CLUSTER_CALLER,
        reason: str = "asked",
    ) -> BuildReport:
        """Reindex a registered (or already indexed) index from the folder and ref it follows. An MCP
        client's request (its owner's or an admin's, when it has one), or any build of an index an MCP
        client registered, is confined first."""
        with self._lock, self._seen_by(caller, name):
            registered = self.registrations()
            target = self._followed(name, registered)
            previous = registered.get(name)
            if origin is IndexOrigin.MCP:
                check_owner(name, previous, caller)
            kept = previous.origin if previous is not None else origin
            confined = IndexOrigin.MCP in (origin, kept)
            if confined:
                self._confinement.require(name, target.folder)
            owner = previous.owner if previous is not None else None
            return self._start(name, target, full, reason, kept, owner, confined=confined)

    def remove(self, name: str, *, origin: IndexOrigin, caller: IndexCaller = CLUSTER_CALLER) -> list[str]:
        """Stop its running builds, forget its registration, drop the index; returns the dropped builds.
        An MCP client removes only an index whose folder lies inside the roots (and, when it has an
        owner, only its owner or an admin)."""
        with self._lock, self._seen_by(caller, name):
            registered = self.registrations()
            if origin is IndexOrigin.MCP:
                target = self._followed(name, registered)
                check_owner(name, registered.get(name), caller)
                self._confinement.require_removable(name, target.folder)
            for report in self._running(name, self._index.builds()):
                self._jobs.stop(report.ticket.job_id)
            self._tickets.pop(name, None)
            self._watch.forget(name)
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
        return [self._report(ticket, builds) for tickets in list(self._tickets.values()) for ticket in tickets]

    # ---- sync ----------------------------------------------------------------------------------
    def sync_once(self) -> list[BuildReport]:
        """One pass over the registered indexes: reindex those whose folder changed and settled. One an
        MCP client registered whose folder left the roots is skipped; one over the job cap waits."""
        started = []
        builds = self._index.builds()
        for registration in self.registrations().values():
            name = registration.name
            if not registration.sync or self._running(name, builds):
                continue
            if registration.origin is IndexOrigin.MCP and not self._confinement.admits(registration.folder):
                log.warning("sync: %s follows a folder no longer inside the allowed roots: not synced", name)
                continue
            try:
                signature = self._signature(registration.folder, registration.ref)
            except (SamespaceError, OSError) as exc:  # a folder gone or unreadable for now: next pass
                log.warning("sync: cannot read %s: %s", registration.folder, exc)
                continue
            if self._watch.due(registration, signature, self._clock()):
                try:
                    started.append(self.refresh(name, origin=registration.origin, reason="sync"))
                except (LimitExceeded, IndexRefused) as exc:  # still due: a later pass tries again
                    log.info("sync: %s waits: %s", name, exc)
        return started

    def hook(self, folder_matches: Callable[[IndexRegistration], bool]) -> list[BuildReport]:
        """A push was announced: refresh every registered index it concerns, now (no debounce); one over
        the job cap is left to the sync pass (its signature moved)."""
        reports = []
        for registration in self.registrations().values():
            if not folder_matches(registration):
                continue
            try:
                reports.append(self.refresh(registration.name, origin=registration.origin, reason="hook"))
            except (LimitExceeded, IndexRefused) as exc:
                log.warning("hook: %s not refreshed: %s", registration.name, exc)
        return reports

    # ---- internals -----------------------------------------------------------------------------
    def _start(
        self,
        name: str,
        target: Followed,
        full: bool,
        reason: str,
        origin: IndexOrigin,
        owner: IndexOwner | None,
        *,
        confined: bool,
    ) -> BuildReport:
        """Join a running build of the index (at `limits.max_jobs_per_index`), or submit one within the
        caps and register the index as `origin`'s, owned by `owner`. Called under the lock."""
        builds = self._index.builds()
        running = self._running(name, builds)
        if len(running) >= self._limits.max_jobs_per_index:
            return running[-1].model_copy(update={"joined": True})
        check_registration_cap(name, self.registrations(), self._limits.max_registrations)
        check_job_cap(sum(len(self._running(n, builds)) for n in list(self._tickets)), self._limits.max_jobs_total)
        folder, ref = target.folder, target.ref
        try:
            signature: str | None = self._signature(folder, ref)
        except (SamespaceError, OSError) as exc:
            if ref is not None:
                raise  # an unknown ref: refused now, not by a failed job
            log.warning("no change signature for %s: %s", folder, exc)
            signature = None
        now = self._clock()
        build = new_build_id(name, now)
        argv = reindex_entrypoint(folder, name, build, ref, full, confined=confined)
        job_id = self._jobs.submit(argv, f"samespace-{build}")
        ticket = BuildTicket(
            index=name, build=build, job_id=job_id, folder=folder, ref=ref, full=full, reason=reason, submitted_at=now
        )
        self._track(name, ticket)
        self._watch.submitted(name)
        self._register(name, target, origin, owner, signature, now)
        return self._report(ticket)

    @contextmanager
    def _seen_by(self, caller: IndexCaller, name: str) -> Iterator[None]:
        """Run a change of `name` as `caller` sees the indexes (index.acl): an index it may not read is
        answered as an unknown one, and an unknown one names only the indexes it may read."""
        reader = caller.reader
        if reader is None:
            yield
            return
        with self._acl.hiding(reader):
            if not self._acl.may_read(reader, name):
                known = set(self.registrations()) | {record.name for record in self._index.records()}
                raise IndexNotFound(name, sorted(known))
            yield

    def _followed(self, name: str, registered: dict[str, IndexRegistration]) -> Followed:
        """What the index follows; IndexNotFound (naming the known ones) when it is neither registered nor built."""
        records = self._index.records() if name not in registered else []
        found = followed(name, registered, records)
        if found is None:
            raise IndexNotFound(name, sorted(set(registered) | {r.name for r in records}))
        return found

    def _running(self, name: str, builds: dict[str, BuildState]) -> list[BuildReport]:
        """The reports of the index's builds in progress, oldest first."""
        running = []
        for ticket in self._tickets.get(name, []):
            if ticket.build in self._finished:
                continue
            report = self._report(ticket, builds)
            if report.done:
                self._finished.add(ticket.build)
            else:
                running.append(report)
        return running

    def _track(self, name: str, ticket: BuildTicket) -> None:
        """Keep the index's builds in progress and the new latest; forget the rest (lists are replaced,
        never changed, so a reader without the lock sees a whole one)."""
        kept = [t for t in self._tickets.get(name, []) if t.build not in self._finished]
        self._tickets[name] = [*kept, ticket]
        self._finished &= {t.build for tickets in self._tickets.values() for t in tickets}

    def _current(self, name: str, builds: dict[str, BuildState] | None = None) -> BuildReport | None:
        """The report of the index's latest build asked for; it is in progress while not `done` (a job
        lingers a moment after its commit: the build's own state says it is over)."""
        tickets = self._tickets.get(name)
        return self._report(tickets[-1], builds) if tickets else None

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

    def _register(
        self,
        name: str,
        target: Followed,
        origin: IndexOrigin,
        owner: IndexOwner | None,
        signature: str | None,
        now: float,
    ) -> None:
        registered = self.registrations()
        previous = registered.get(name)
        registered[name] = IndexRegistration(
            name=name,
            folder=target.folder,
            ref=target.ref,
            sync=previous.sync if previous is not None else True,
            registered_at=previous.registered_at if previous is not None else now,
            signature=signature,
            submitted_at=now,
            origin=origin,
            owner=owner,
        )
        self._store.save_indexes(registered)
