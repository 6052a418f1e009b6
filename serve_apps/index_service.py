"""Index management behind the MCP tools and the admin routes: index, refresh, remove, follow a build.

The sync actor (actors/sync.py) does the work and decides (cluster/sync/claims.py) what each origin may
ask: an MCP client (`confined=True`) indexes only folders inside `index.allowed_roots`
(`cluster.sync.confine`), under a name that is free or already its folder's, and refreshes or removes
only indexes whose folder lies inside them; the admin API (`confined=False`, its own token) any
indexable folder, under any name. A caller that wants to watch a build gets its progress until it is
done; otherwise the ticket comes back at once.

An MCP client's index, refresh and remove need the samespace:index scope of the request's caller
(`cluster.auth.current_principal()`, set by the HTTP guard; outside a request nobody has it), and the
caller goes to the sync actor with each request: an index an OAuth caller registered is refreshed,
removed or re-pointed over MCP only by it or an admin. The admin API manages every index.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from ray.actor import ActorHandle

from cluster.auth import AccessScope, current_principal
from cluster.config import IndexOrigin, IndexRegistration
from cluster.errors import AccessDenied
from cluster.settings import SamespaceSettings
from cluster.sync import CLUSTER_CALLER, BuildPhase, BuildReport, IndexCaller, admit_folder

FOLLOW_POLL_S = 0.5
FOLLOW_TIMEOUT_S = 3600.0
Progress = Callable[[float, float | None, str], Awaitable[None]]


def origin_of(confined: bool) -> IndexOrigin:
    """Who asks: an MCP client is confined, the admin API is not."""
    return IndexOrigin.MCP if confined else IndexOrigin.ADMIN


def caller_of(confined: bool) -> IndexCaller:
    """Who asks: an MCP client is the request's caller, which needs the samespace:index scope
    (AccessDenied naming it); the admin API (its own token) manages every index."""
    if not confined:
        return CLUSTER_CALLER
    principal = current_principal()
    if not principal.has(AccessScope.INDEX):
        raise AccessDenied("this caller may not index, refresh or remove indexes", AccessScope.INDEX.value)
    return IndexCaller.of(principal)


def default_index_name(folder: Path, ref: str | None) -> str:
    """The folder's name, with the ref after a dot ('api.feature-login'), in the index-name alphabet."""
    name = folder.name + (f".{ref}" if ref else "")
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "repo"
    return cleaned[:63]


class IndexService:
    def __init__(self, settings: SamespaceSettings, sync: Callable[[], ActorHandle], home: Path | None = None) -> None:
        self._roots = settings.index.allowed_roots
        self._sync = sync
        self._home = home or Path.home()

    async def index_repository(
        self, path: str, name: str | None, ref: str | None, full: bool, *, confined: bool
    ) -> BuildReport:
        """Submit a build of the folder (confined: only inside the allowed roots), or join the running one."""
        caller = caller_of(confined)  # before the folder is looked at or the sync actor reached (or started)
        folder = admit_folder(path, self._roots, self._home, confined=confined)
        report: BuildReport = await self._sync().request.remote(
            str(folder), name or default_index_name(folder, ref), ref, full, origin_of(confined), caller
        )
        return report

    async def refresh(self, name: str, full: bool, *, confined: bool) -> BuildReport:
        """Reindex an index now (confined: only one whose folder lies inside the allowed roots, and its
        owner's or an admin's when it has one)."""
        caller = caller_of(confined)
        report: BuildReport = await self._sync().refresh.remote(name, full, origin_of(confined), caller)
        return report

    async def remove(self, name: str, *, confined: bool) -> list[str]:
        """Drop an index and its registration (confined: only one whose folder lies inside the allowed
        roots, and its owner's or an admin's when it has one)."""
        caller = caller_of(confined)
        dropped: list[str] = await self._sync().remove.remote(name, origin_of(confined), caller)
        return dropped

    async def registrations(self) -> dict[str, IndexRegistration]:
        found: dict[str, IndexRegistration] = await self._sync().registrations.remote()
        return found

    async def hook(self, folders: list[str], names: list[str]) -> list[BuildReport]:
        reports: list[BuildReport] = await self._sync().hook.remote(folders, names)
        return reports

    async def reports(self) -> list[BuildReport]:
        found: list[BuildReport] = await self._sync().reports.remote()
        return found

    async def follow(self, report: BuildReport, progress: Progress, timeout_s: float = FOLLOW_TIMEOUT_S) -> BuildReport:
        """Poll the build until it is done, reporting each change (chunks done of the total; the phase,
        files, rate and ETA in the message)."""
        deadline = time.monotonic() + timeout_s
        last = ""
        while True:
            message = progress_message(report)
            if message != last:
                done = report.progress.chunks_done if report.progress else 0
                total = report.progress.chunks_total if report.progress and report.progress.chunks_total else None
                await progress(float(done), float(total) if total is not None else None, message)
                last = message
            if report.done or time.monotonic() >= deadline:
                return report
            await asyncio.sleep(FOLLOW_POLL_S)
            current: BuildReport | None = await self._sync().report.remote(report.ticket.index)
            if current is None or current.ticket.build != report.ticket.build:
                return report  # superseded (removed, or a newer build of the index)
            report = current.model_copy(update={"joined": report.joined})


def progress_message(report: BuildReport) -> str:
    """e.g. 'building api: 12/40 files, 300/1200 chunks, 85.0 chunks/s, ETA 11 s'."""
    head = f"{report.phase.value} {report.ticket.index}"
    p = report.progress
    if report.phase is BuildPhase.FAILED:
        return f"{head}: {report.error or 'failed'}"
    if p is None or report.phase is not BuildPhase.BUILDING:
        return head
    eta = f", ETA {p.eta_s:.0f} s" if p.eta_s is not None else ""
    return (
        f"{head}: {p.files_done}/{p.files_total} files, {p.chunks_done}/{p.chunks_total} chunks, "
        f"{p.chunks_per_s:.1f} chunks/s{eta}"
    )
