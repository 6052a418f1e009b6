"""The reindex pipeline's ports without Ray: the index is a real `IndexCatalog` on an in-memory
store, called in-process as the index actor calls it; the encoders hash each text into a vector.

Both record what the pipeline asked of them, in order, so a test can check the write loop's
batching and its commit order.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cluster.build import BuildPorts, BuildRequest, BuildTarget, Reindex
from cluster.cloud import Priority
from cluster.errors import IndexNotFound, NoProviderLeft, StoreError
from cluster.gate import GateReport
from cluster.history import CommitRecord
from cluster.index import (
    BuildProgress,
    CarriedRow,
    CarryResult,
    HistoryState,
    IndexCatalog,
    IndexRecord,
    PointKey,
    carry_rows,
    open_vector_store,
)
from cluster.ingest import SkipSummary, SourceState
from cluster.routing import LandedBatch
from cluster.settings import SamespaceSettings
from cluster.space import EncoderIdentity
from cluster.types import StoredPoint

WIDTH = 8
IDENTITY = EncoderIdentity(model="m", weights_sha256="a" * 64, width=WIDTH, max_seq_length=256)


def text_vector(text: str, salt: str = "") -> np.ndarray:
    """A unit vector that depends on the text alone (and `salt`: another encoder's)."""
    raw = np.frombuffer(hashlib.sha256((salt + text).encode()).digest()[: WIDTH * 4], dtype=np.uint32)
    vector = raw.astype(np.float32) / np.float32(2**32) - np.float32(0.5)
    return vector / np.linalg.norm(vector)


class CatalogIndex:
    """`BuildIndex` over a catalogue in this process. Writes apply at once; `wait` settles them, and
    `fail_wait_at` makes the n-th wait raise, as a failed write surfaces at `ray.get`."""

    def __init__(self, fail_wait_at: int | None = None) -> None:
        ticks = itertools.count(1_700_000_000)
        self.catalog = IndexCatalog(
            open_vector_store("server", data_dir=None, url=":memory:"), clock=lambda: float(next(ticks))
        )
        self.calls: list[tuple[str, int]] = []  # (method, rows or writes)
        self.outstanding = 0  # writes started and not waited for
        self.progress: list[BuildProgress] = []
        self._fail_wait_at = fail_wait_at

    def record(self, name: str) -> IndexRecord | None:
        try:
            return self.catalog.record(name)
        except IndexNotFound:
            return None

    def records(self) -> list[IndexRecord]:
        return [self.catalog.record(name) for name in self.catalog.names()]

    def point_keys(self, build: str, offset: str | None, limit: int) -> tuple[list[PointKey | None], str | None]:
        self.calls.append(("point_keys", limit))
        return self.catalog.point_keys(build, offset, limit)

    def cleanup_partial(self, name: str) -> list[str]:
        return self.catalog.cleanup_partial(name)

    def update_source(self, name: str, source: SourceState) -> IndexRecord:
        return self.catalog.update_source(name, source)

    def begin_build(self, target: BuildTarget, probe_vectors: list[list[float]], source: SourceState, rows: int) -> str:
        self.calls.append(("begin_build", rows))
        root, folder = str(target.files_root), str(target.folder)
        return self.catalog.begin_build(
            target.name,
            target.reference,
            root,
            None,
            probe_vectors,
            build=target.build,
            origin=folder,
            source=source,
            rows=rows,
        )

    def carry_rows(self, base: str, build: str, rows: Sequence[CarriedRow]) -> CarryResult:
        self.calls.append(("carry_rows", len(rows)))
        return carry_rows(self.catalog, base, build, rows)

    def write(self, build: str, points: Sequence[StoredPoint]) -> object:
        self.calls.append(("write", len(points)))
        self.catalog.write(build, points)
        self.outstanding += 1
        return len(self.calls)

    def wait(self, writes: Sequence[object]) -> None:
        self.calls.append(("wait", len(writes)))
        self.outstanding -= len(writes)
        if self._fail_wait_at is not None and sum(call == "wait" for call, _ in self.calls) == self._fail_wait_at:
            raise StoreError("write", "the disk is full")

    def report_progress(self, build: str, progress: BuildProgress) -> None:
        self.progress.append(progress)

    def index_vectors(self, build: str) -> bool:
        assert self.outstanding == 0, "indexed with writes still in flight"
        self.calls.append(("index_vectors", 0))
        return self.catalog.index_vectors(build)

    def commit_build(
        self, build: str, files: int, providers: list[str], skipped: SkipSummary, *, embedded: int, reused: int
    ) -> IndexRecord:
        assert self.outstanding == 0, "committed with writes still in flight"
        self.calls.append(("commit_build", embedded + reused))
        return self.catalog.commit_build(
            build, files=files, providers=providers, skipped=skipped, embedded=embedded, reused=reused
        )

    def fail_build(self, build: str, error: str) -> None:
        self.calls.append(("fail_build", 0))
        self.catalog.fail_build(build, error)

    def history_state(self, name: str) -> HistoryState | None:
        return self.catalog.history.state(name)

    def write_history(
        self,
        state: HistoryState,
        commits: Sequence[CommitRecord],
        vectors: Sequence[Sequence[float]],
        writers: Sequence[dict[str, Any]],
        replace: bool = False,
    ) -> HistoryState:
        self.calls.append(("write_history", len(commits)))
        return self.catalog.history.write(state, commits, vectors, writers, replace=replace)


@dataclass
class HashEncoders:
    """`BuildEncoders` whose vectors hash the text. Batches of `batch` texts land in turn from each
    of `providers`; `fail_after` batches, the stream raises NoProviderLeft."""

    identity: EncoderIdentity = IDENTITY
    providers: tuple[str, ...] = ("p0",)
    batch: int = 5
    fail_after: int | None = None
    reports: list[GateReport] = field(default_factory=list)
    embedded: list[str] = field(default_factory=list)  # every text sent, in order
    streams: int = 0

    def reference(self) -> EncoderIdentity:
        return self.identity

    def reference_probe(self) -> list[list[float]]:
        return [text_vector("probe").tolist()]

    def sentinel(self, stored: np.ndarray) -> list[GateReport]:
        return self.reports

    def embed_stream(self, texts: list[str], project: str, priority: Priority) -> Generator[LandedBatch, None, None]:
        self.streams += 1
        self.embedded += texts  # started at once, as the dispatcher's stream is
        return self._land(list(texts))

    def _land(self, texts: list[str]) -> Generator[LandedBatch, None, None]:
        starts = range(0, len(texts), self.batch)
        for n, start in enumerate(starts):
            if self.fail_after is not None and n >= self.fail_after:
                raise NoProviderLeft("code-embedding", ["p0: failed"])
            indices = list(range(start, min(start + self.batch, len(texts))))
            vectors = np.stack([text_vector(texts[i]) for i in indices])
            yield LandedBatch(indices, vectors, self.providers[n % len(self.providers)], self.identity)


def fake_ports(index: CatalogIndex | None = None, encoders: HashEncoders | None = None) -> BuildPorts:
    return BuildPorts(index=index or CatalogIndex(), encoders=encoders or HashEncoders(), key_problem=lambda: None)


class Run:
    """One `Reindex` over fake ports (a clock that moves half a second a reading), its log lines kept."""

    def __init__(self, tmp_path: Path, ports: BuildPorts | None = None) -> None:
        self.ports = ports or fake_ports()
        self.settings = SamespaceSettings(store={"data_dir": tmp_path / "data"})
        self.lines: list[str] = []
        now = [0.0]

        def clock() -> float:
            now[0] += 0.5
            return now[0]

        self.reindex = Reindex(self.ports, self.settings, self.lines.append, clock=clock)

    @property
    def index(self) -> CatalogIndex:
        assert isinstance(self.ports.index, CatalogIndex)
        return self.ports.index

    @property
    def encoders(self) -> HashEncoders:
        assert isinstance(self.ports.encoders, HashEncoders)
        return self.ports.encoders

    def __call__(self, repo: Path, name: str = "shop", **options: object) -> IndexRecord:
        self.lines.clear()
        self.encoders.embedded.clear()
        self.index.calls.clear()
        return self.reindex.run(BuildRequest(repo=repo, name=name, **options))  # type: ignore[arg-type]

    def methods(self) -> list[str]:
        return [method for method, _ in self.index.calls]
