"""Write: one build's rows, reused and embedded, with the job's progress lines.

The encoders start first (rows may have gone during the walk, `cluster.build.feed`) and work while
the reused rows are carried inside the index (`cluster.index.carry_rows`, a page per call). Each
chunk whose two vectors have landed is written with its provenance; at most `WRITES_IN_FLIGHT`
writes are outstanding. A reused row whose source vanished since the plan read its key (another
build replaced its base) is embedded after the rest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from cluster.build.collect import RepoChunks
from cluster.build.feed import Segment, close_all, send_segment
from cluster.build.pairing import PairedRow
from cluster.build.planning import BuildPlan
from cluster.build.ports import BuildEncoders, BuildIndex, Emit
from cluster.build.request import BuildTarget
from cluster.build.stages import Stage, StageTimes
from cluster.index import CarriedRow, ProgressMeter, chunk_point
from cluster.types import Clock

WRITES_IN_FLIGHT = 4
PROGRESS_INTERVAL_S = 2.0
REUSE_BATCH = 256  # reused rows per carry call, like a landed batch


@dataclass
class WriteTally:
    """Rows written per provider that wrote their vectors: embedded now, and reused."""

    embedded: Counter[str] = field(default_factory=Counter)
    kept: Counter[str] = field(default_factory=Counter)


class BuildWriter:
    """Writes one build's rows through the index port, reporting progress as they land."""

    def __init__(
        self,
        index: BuildIndex,
        encoders: BuildEncoders,
        target: BuildTarget,
        found: RepoChunks,
        plan: BuildPlan,
        emit: Emit,
        clock: Clock,
        stages: StageTimes,
        early: Sequence[Segment] = (),
    ) -> None:
        self._index = index
        self._encoders = encoders
        self._target = target
        self._found = found
        self._plan = plan
        self._emit = emit
        self._clock = clock
        self._stages = stages
        self._segments = list(early)  # sent before the plan (`cluster.build.feed`); the writer's own follow
        self._meter = ProgressMeter(found.files, len(found.chunks), clock)
        self._remaining = [0] * found.files  # per file: its rows not written yet
        for owner in found.owners:
            self._remaining[owner] += 1
        self._meter.advance(files=sum(1 for n in self._remaining if n == 0))  # files with no chunks
        self._writes: list[object] = []
        self._last_report = clock()
        self.tally = WriteTally()

    def write(self) -> WriteTally:
        """Write the rows the plan reuses and embeds; returns the rows per provider. On failure the
        segments still landing are closed."""
        try:
            self._write()
        except BaseException:
            close_all(self._segments)
            raise
        return self.tally

    def _write(self) -> None:
        plan = self._plan
        sent = {row for segment in self._segments for row in segment.rows}
        self._start([row for row in plan.plan.embed if row not in sent])
        vanished = self._carry()
        for segment in list(self._segments):
            self._drain(segment)
        if vanished:
            base = plan.base.build if plan.base is not None else "-"
            embedding = len(plan.plan.embed) + len(vanished)
            self._emit(
                f"{len(vanished)} rows vanished from {base}: reused {self.tally.kept.total()}, embedding {embedding}"
            )
            self._drain(self._start(vanished))
        self._settle()
        if self._meter.chunks_done == 0 or self._meter.chunks_done != self._meter.chunks_total:
            self._emit(self._meter.line())

    def _start(self, rows: Sequence[int]) -> Segment:
        """Send the texts of `rows` to the encoders now; their batches are read by `_drain`."""
        with self._stages.timing(Stage.SEND):
            segment = send_segment(self._encoders, self._target, self._found.chunks, rows)
        self._segments.append(segment)
        return segment

    def _carry(self) -> list[int]:
        """Carry the reused rows inside the index, a page per call; returns the rows it could not."""
        plan, found, vanished = self._plan, self._found, []
        base = plan.base.build if plan.base is not None else ""
        for start in range(0, len(plan.plan.reuse), REUSE_BATCH):
            rows = plan.plan.reuse[start : start + REUSE_BATCH]
            carried = [
                CarriedRow(
                    source=plan.sources[plan.hashes[row]],
                    chunk=found.chunks[row],
                    file_hash=found.file_hashes[found.owners[row]],
                )
                for row in rows
            ]
            with self._stages.timing(Stage.CARRY):
                result = self._index.carry_rows(base, self._target.build, carried)
            missing = set(result.missing)
            vanished += [row for at, row in enumerate(rows) if at in missing]
            self.tally.kept.update(result.providers)
            self._landed([row for at, row in enumerate(rows) if at not in missing], reused=True)
        return vanished

    def _drain(self, segment: Segment) -> None:
        """Write each row of the segment once both its vectors landed (NoProviderLeft surfaces here)."""
        for batch in self._stages.timed(Stage.ENCODE, segment.stream):
            with self._stages.timing(Stage.ROWS):
                done = segment.pairs.land(batch)
            if done:
                self._write_embedded(done)

    def _write_embedded(self, done: list[PairedRow]) -> None:
        target, found = self._target, self._found
        with self._stages.timing(Stage.ROWS):
            points = [
                chunk_point(
                    target.name,
                    target.build,
                    target.reference,
                    found.chunks[paired.row],
                    paired.vectors,
                    (paired.provider, paired.writer),
                    file_hash=found.file_hashes[found.owners[paired.row]],
                    hashed=self._plan.hashes[paired.row],
                )
                for paired in done
            ]
        self.tally.embedded.update(paired.provider for paired in done)
        with self._stages.timing(Stage.WRITE):
            self._writes.append(self._index.write(target.build, points))
        self._landed([paired.row for paired in done], reused=False)

    def _landed(self, rows: list[int], *, reused: bool) -> None:
        """Rows written (or on their way): advance the meter, bound the writes in flight, report."""
        finished = 0
        for row in rows:
            owner = self._found.owners[row]
            self._remaining[owner] -= 1
            finished += self._remaining[owner] == 0
        if reused:
            self._meter.advance(reused=len(rows), files=finished)
        else:
            self._meter.advance(chunks=len(rows), files=finished)
        if len(self._writes) >= WRITES_IN_FLIGHT:
            self._settle()
        now = self._clock()
        if now - self._last_report >= PROGRESS_INTERVAL_S or self._meter.chunks_done == self._meter.chunks_total:
            self._last_report = now
            self._emit(self._meter.line())
            self._index.report_progress(self._target.build, self._meter.snapshot())

    def _settle(self) -> None:
        writes, self._writes = self._writes, []
        if writes:
            with self._stages.timing(Stage.WRITE):
                self._index.wait(writes)
