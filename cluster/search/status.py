"""`index_status` and `GET /admin/indexes`: every index, its commit and how stale it is, and the builds.

The answer comes from the index actor's recorded state (`ports.IndexStatusSource`); git is asked
about an index's build at most once per `limits.status_git_period_s`.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field

from cluster.auth import Reader
from cluster.errors import SamespaceError
from cluster.history import HistoryReach
from cluster.index.globs import Glob, compile_glob
from cluster.index.records import IndexRecord
from cluster.ingest.git_state import SourceState, Staleness, staleness
from cluster.ingest.skips import SkipSummary
from cluster.search.ports import IndexStatusSource
from cluster.search.query_cache import QueryVectorCache
from cluster.settings import LimitsSettings
from cluster.types import Clock, Strict

__all__ = ["BuildInfo", "IndexInfo", "IndexStatus", "IndexStatusReader"]

STATUS_CHECKS_KEPT = 1024  # indexes whose last git check index_status remembers (least recent go first)


class IndexInfo(Strict):
    repo: str
    space: str
    encoder: dict[str, Any]
    points: int
    files: int
    built_at: float | None
    build: str
    repo_root: str
    folder: str = Field(description="The folder the index follows (for a ref build, the repository it came from).")
    source: SourceState | None = Field(description="Commit, branch or ref, and dirtiness of the build's files.")
    staleness: Staleness | None = Field(
        description="Files changed and commits made in the folder since the build (None: the folder cannot be read)."
    )
    staleness_checked_at: float | None = Field(
        default=None,
        description="When git was last asked about the folder (Unix time): at most once per "
        "limits.status_git_period_s; None: never (no recorded source).",
    )
    embedded: int = Field(description="Rows the last build embedded.")
    reused: int = Field(description="Rows whose vectors the last build reused.")
    providers: list[str]
    skipped: SkipSummary = Field(description="What the last build left out, per reason: counts and paths.")
    history: HistoryReach | None = Field(
        default=None,
        description="The commits mined for the history tools; `more`: older ones were left out "
        "(index.history_commits; with index.history_backfill the reindex job goes on mining them after the "
        "index is served). None: not mined.",
    )


class BuildInfo(Strict):
    repo: str
    build: str
    state: str
    job_id: str | None
    started_at: float
    files_done: int
    files_total: int
    chunks_done: int
    chunks_total: int
    chunks_per_s: float
    eta_s: float | None
    error: str | None


class IndexStatus(Strict):
    indexes: list[IndexInfo]
    builds: list[BuildInfo]


def _staleness_of(record: IndexRecord) -> Staleness | None:
    """How far the folder moved on since the build (None: unknown, e.g. the folder is gone)."""
    if record.source is None or record.built_at is None:
        return None
    try:
        return staleness(Path(record.followed_folder), record.source, record.built_at)
    except (SamespaceError, OSError, subprocess.SubprocessError):
        return None


class IndexStatusReader:
    """`index_status` and `GET /admin/indexes`: every index of an index actor (or those whose
    name matches `repo`, a name or a glob, checked against the `limits` caps before any matching), its
    commit and how stale it is, and the builds. The answer comes from the recorded state; git is asked
    about an index's build at most once per `limits.status_git_period_s` (concurrent reads share one
    check; 0: every read asks), and each index says when it last was (`staleness_checked_at`)."""

    def __init__(
        self,
        limits: LimitsSettings,
        clock: Clock = time.time,
        staleness_of: Callable[[IndexRecord], Staleness | None] = _staleness_of,
    ) -> None:
        self._limits = limits
        self._clock = clock
        self._staleness_of = staleness_of
        period_s = limits.status_git_period_s
        self._checks: QueryVectorCache[tuple[Staleness | None, float]] | None = (
            QueryVectorCache(ttl_s=period_s, max_entries=STATUS_CHECKS_KEPT, clock=clock) if period_s > 0 else None
        )

    async def read(self, index: IndexStatusSource, repo: str | None = None, *, reader: Reader) -> IndexStatus:
        """The status of the index actor `index`, filtered by `repo`: the indexes `reader` may read."""
        wanted: Glob | None = None if repo is None else compile_glob(repo, self._limits)
        status = await index.status(reader=reader)
        records: list[IndexRecord] = [
            entry["record"] for entry in status["indexes"] if wanted is None or wanted.matches(entry["record"].name)
        ]
        checked = await asyncio.gather(*(self._freshness(record) for record in records))
        reach: dict[str, HistoryReach] = status.get("history", {})
        indexes = [
            _index_info(record, staleness_now, checked_at).model_copy(update={"history": reach.get(record.name)})
            for record, (staleness_now, checked_at) in zip(records, checked, strict=True)
        ]
        builds = [
            BuildInfo(
                repo=state.index,
                build=state.build,
                state=state.state,
                job_id=state.job_id,
                started_at=state.started_at,
                error=state.error,
                **state.progress.model_dump(),
            )
            for state in status["builds"].values()
            if wanted is None or wanted.matches(state.index)
        ]
        return IndexStatus(indexes=indexes, builds=builds)

    async def _freshness(self, record: IndexRecord) -> tuple[Staleness | None, float | None]:
        """(staleness, when git was asked): from the cache while the build's last check is recent."""
        if record.source is None or record.built_at is None:
            return None, None  # nothing recorded to compare with: git is not asked

        async def check() -> tuple[Staleness | None, float]:
            asked_at = self._clock()
            return await asyncio.to_thread(self._staleness_of, record), asked_at

        if self._checks is None:
            return await check()
        return await self._checks.get_or_compute((record.name, record.build), check)


def _index_info(record: IndexRecord, staleness_now: Staleness | None, checked_at: float | None) -> IndexInfo:
    return IndexInfo(
        repo=record.name,
        space=record.identity.space_id,
        encoder=record.identity.model_dump(),
        points=record.chunks,
        files=record.files,
        built_at=record.built_at,
        build=record.build,
        repo_root=record.repo_root,
        folder=record.followed_folder,
        source=record.source,
        staleness=staleness_now,
        staleness_checked_at=checked_at,
        embedded=record.embedded,
        reused=record.reused,
        providers=record.providers,
        skipped=record.skipped,
    )
