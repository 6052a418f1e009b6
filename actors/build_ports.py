"""The reindex pipeline's ports on Ray: the index actor and the build role's dispatcher.

`cluster.build` is the pipeline, plain Python; this module is each port method as one actor call
(`ray.get` of it), and `run_reindex`, which wires them and runs one reindex from a Ray driver (the
job, a bench, a test that has called `ray.init`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import ray
from ray.actor import ActorHandle

from actors.config_push import key_problem
from actors.dispatcher import get_dispatcher
from actors.index_actor import get_index_actor
from cluster.build import BUILD_ROLE, BuildPorts, BuildRequest, BuildTarget, Reindex
from cluster.cloud import Priority
from cluster.gate import GateReport
from cluster.history import CommitRecord
from cluster.index import BuildProgress, CarriedRow, CarryResult, HistoryState, IndexRecord, PointKey
from cluster.ingest import SkipSummary, SourceState
from cluster.routing import LandedBatch
from cluster.settings import SamespaceSettings
from cluster.space import EncoderIdentity
from cluster.types import StoredPoint


def _get(ref: Any) -> Any:
    """`ray.get` of one actor call. The actor handles are untyped, and Ray's stubs read `ray.get`
    of an untyped call as `list[Never]`: this says "whatever the actor returned"."""
    return ray.get(ref)


class ActorIndex:
    """`cluster.build.BuildIndex` over the index actor (found or started at the first call)."""

    def __init__(self, settings: SamespaceSettings) -> None:
        self._settings = settings

    @cached_property
    def _handle(self) -> ActorHandle:
        return get_index_actor(self._settings)

    def record(self, name: str) -> IndexRecord | None:
        return _get(self._handle.record.remote(name))

    def records(self) -> list[IndexRecord]:
        return _get(self._handle.records.remote())

    def point_keys(self, build: str, offset: str | None, limit: int) -> tuple[list[PointKey | None], str | None]:
        return _get(self._handle.point_keys.remote(build, offset, limit))

    def cleanup_partial(self, name: str) -> list[str]:
        return _get(self._handle.cleanup_partial.remote(name))

    def update_source(self, name: str, source: SourceState) -> IndexRecord:
        return _get(self._handle.update_source.remote(name, source))

    def begin_build(self, target: BuildTarget, probe_vectors: list[list[float]], source: SourceState, rows: int) -> str:
        job_id = ray.get_runtime_context().get_job_id()
        call: Any = self._handle.begin_build.remote(
            target.name,
            target.reference,
            str(target.files_root),
            job_id,
            probe_vectors,
            build=target.build,
            origin=str(target.folder),
            source=source,
            rows=rows,
        )
        return _get(call)

    def carry_rows(self, base: str, build: str, rows: Sequence[CarriedRow]) -> CarryResult:
        return _get(self._handle.carry_rows.remote(base, build, rows))

    def write(self, build: str, points: Sequence[StoredPoint]) -> object:
        return self._handle.write.remote(build, points)

    def wait(self, writes: Sequence[object]) -> None:
        _get(list(writes))

    def report_progress(self, build: str, progress: BuildProgress) -> None:
        self._handle.report_progress.remote(build, progress)

    def index_vectors(self, build: str) -> bool:
        built: bool = _get(self._handle.index_vectors.remote(build))
        return built

    def commit_build(
        self, build: str, files: int, providers: list[str], skipped: SkipSummary, *, embedded: int, reused: int
    ) -> IndexRecord:
        return _get(
            self._handle.commit_build.remote(build, files, providers, skipped, embedded=embedded, reused=reused)
        )

    def fail_build(self, build: str, error: str) -> None:
        _get(self._handle.fail_build.remote(build, error))

    def history_state(self, name: str) -> HistoryState | None:
        return _get(self._handle.history_state.remote(name))

    def write_history(
        self,
        state: HistoryState,
        commits: Sequence[CommitRecord],
        vectors: Sequence[Sequence[float]],
        writers: Sequence[dict[str, Any]],
        replace: bool = False,
    ) -> HistoryState:
        return _get(self._handle.write_history.remote(state, commits, vectors, writers, replace))


class DispatcherEncoders:
    """`cluster.build.BuildEncoders` over the build role's dispatcher (found or started at the first call)."""

    def __init__(self, settings: SamespaceSettings) -> None:
        self._settings = settings

    @cached_property
    def _handle(self) -> ActorHandle:
        return get_dispatcher(self._settings, BUILD_ROLE)

    def reference(self) -> EncoderIdentity:
        return _get(self._handle.reference.remote())

    def reference_probe(self) -> list[list[float]]:
        return _get(self._handle.reference_probe.remote()).tolist()

    def sentinel(self, stored: np.ndarray) -> list[GateReport]:
        return _get(self._handle.sentinel.remote(stored))

    def embed_stream(self, texts: list[str], project: str, priority: Priority) -> _RemoteStream:
        # Started here, not at the first `next`: the encoders work while the caller does other things.
        return _RemoteStream(
            self._handle.embed_stream.options(num_returns="streaming").remote(texts, project, priority)
        )


class _RemoteStream:
    """`cluster.build.ports.LandedStream` over the dispatcher's streaming call; `close` cancels it
    (the dispatcher's generator stops and cancels its fan-out)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._refs: Iterator[Any] = iter(stream)
        self._closed = False

    def __iter__(self) -> Iterator[LandedBatch]:
        return self

    def __next__(self) -> LandedBatch:
        if self._closed:
            raise StopIteration
        return _get(next(self._refs))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            ray.cancel(self._stream)


def build_ports(settings: SamespaceSettings) -> BuildPorts:
    """The pipeline's ports for this cluster: the index actor and the dispatcher, each found or started
    at its first call (a job that fails before it needs one starts none)."""
    return BuildPorts(
        index=ActorIndex(settings),
        encoders=DispatcherEncoders(settings),
        key_problem=lambda: key_problem(settings, (BUILD_ROLE,)),
    )


def run_reindex(
    settings: SamespaceSettings,
    repo: Path,
    name: str,
    *,
    emit: Callable[[str], None],
    full: bool = False,
    allow_shrink: bool = False,
    ref: str | None = None,
    build_id: str | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> IndexRecord:
    """Reindex `repo` as `name` from this Ray driver (`cluster.build.Reindex.run` says how)."""
    request = BuildRequest(repo=repo, name=name, full=full, allow_shrink=allow_shrink, ref=ref, build_id=build_id)
    return Reindex(build_ports(settings), settings, emit, clock=clock).run(request)
