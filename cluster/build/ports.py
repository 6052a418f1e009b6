"""What a build needs from the cluster, as Protocols: the index it writes into, the encoders that
embed its chunks, and the cloud key check.

The reindex job wires them to the index actor and the role's dispatcher (`actors/build_ports.py`);
a unit test passes fakes. Every method is one call of the actor behind it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from cluster.build.request import BuildTarget
from cluster.cloud import Priority
from cluster.gate import GateReport
from cluster.history import CommitRecord
from cluster.index import BuildProgress, CarriedRow, CarryResult, HistoryState, IndexRecord, PointKey
from cluster.ingest import SkipSummary, SourceState
from cluster.roles import Role
from cluster.routing import LandedBatch
from cluster.space import EncoderIdentity
from cluster.types import StoredPoint

BUILD_ROLE = Role.CODE_EMBEDDING  # one index space per repo; prose shares it while one local model serves both

Emit = Callable[[str], None]  # one line of the job's log


class LandedStream(Protocol):
    """The batches of one embed call, as they land (a generator is one); `close` gives up on the
    rest: the encoders stop on them when they can."""

    def __iter__(self) -> Iterator[LandedBatch]: ...

    def __next__(self) -> LandedBatch: ...

    def close(self) -> None: ...


class BuildIndex(Protocol):
    """The index as a build sees it (`actors.index_actor.IndexActor`)."""

    def record(self, name: str) -> IndexRecord | None:
        """The serving record of an index, or None when there is none yet."""
        ...

    def records(self) -> list[IndexRecord]:
        """The serving record of every index."""
        ...

    def point_keys(self, build: str, offset: str | None, limit: int) -> tuple[list[PointKey | None], str | None]:
        """One page of a build's row keys and the offset of the next page (None: the last one)."""
        ...

    def cleanup_partial(self, name: str) -> list[str]:
        """Drop the leftover builds of an index (killed runs); returns them."""
        ...

    def update_source(self, name: str, source: SourceState) -> IndexRecord:
        """Record that the serving build's files are those of `source`."""
        ...

    def begin_build(self, target: BuildTarget, probe_vectors: list[list[float]], source: SourceState, rows: int) -> str:
        """Create the build's empty collection, recording its space, its folders and the source state;
        `rows`: how many rows it will hold (a small build may share a collection with others)."""
        ...

    def carry_rows(self, base: str, build: str, rows: Sequence[CarriedRow]) -> CarryResult:
        """Write `rows` with the vectors of their source rows in `base` (they stay in the index)."""
        ...

    def write(self, build: str, points: Sequence[StoredPoint]) -> object:
        """Start writing `points`; returns a handle for `wait` (the write may still be in flight)."""
        ...

    def wait(self, writes: Sequence[object]) -> None:
        """Until these writes landed; a failed write raises its error here."""
        ...

    def report_progress(self, build: str, progress: BuildProgress) -> None:
        """Publish a build's progress (to `index_status`); never waits."""
        ...

    def index_vectors(self, build: str) -> bool:
        """Build the finished build's vector indexes before it serves; True when it was large enough to."""
        ...

    def commit_build(
        self, build: str, files: int, providers: list[str], skipped: SkipSummary, *, embedded: int, reused: int
    ) -> IndexRecord:
        """Switch the index to the build in one step; returns its record."""
        ...

    def fail_build(self, build: str, error: str) -> None:
        """Drop a partial build and record why; the previous build keeps serving."""
        ...

    def history_state(self, name: str) -> HistoryState | None:
        """What the index's history holds (None: nothing mined yet)."""
        ...

    def write_history(
        self,
        state: HistoryState,
        commits: Sequence[CommitRecord],
        vectors: Sequence[Sequence[float]],
        writers: Sequence[dict[str, Any]],
        replace: bool = False,
    ) -> HistoryState:
        """Add mined commits (their vectors and writers) to the index's history and record `state`;
        `replace`: instead of what it held (a history mined again from the top)."""
        ...


class BuildEncoders(Protocol):
    """The encoders of the build's role as a build sees them (`actors.dispatcher.DispatcherActor`)."""

    def reference(self) -> EncoderIdentity:
        """The identity of the reference encoder: the space a new build lives in."""
        ...

    def reference_probe(self) -> list[list[float]]:
        """The reference's vectors of the gate's probe texts, stored with the build."""
        ...

    def sentinel(self, stored: np.ndarray) -> list[GateReport]:
        """One drift-sentinel round against an index's stored probe vectors (DESIGN §12)."""
        ...

    def embed_stream(self, texts: list[str], project: str, priority: Priority) -> LandedStream:
        """Start embedding `texts` at once; the batches come as they land, from any admitted provider."""
        ...


@dataclass(frozen=True)
class BuildPorts:
    """Everything a reindex reaches outside its own process."""

    index: BuildIndex
    encoders: BuildEncoders
    key_problem: Callable[[], str | None]  # why the build's role lacks the OpenRouter key, or None
