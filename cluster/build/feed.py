"""Feed: a build's texts on their way to the encoders, and the early feed that starts them during the walk.

A segment is one `embed_stream` call: some rows' texts in the order `cluster.build.pairing` gives
them, and the pairing of their vectors as the batches land. The writer drains its segments in turn.

A build that embeds every chunk (no vector to reuse: a first build, `--full`, a new encoder space,
a drifted reference) knows so before the walk, so it need not wait for the walk to end: the early
feed sends the walk's chunks as it collects them, a first segment once it holds `EARLY_ROWS`
chunks, then each time it has collected as many again as were sent (segments double, so a long
walk makes few calls). The encoders work while the rest of the repository is walked and chunked;
the rows are still written after the plan and `begin_build`, in the usual order. A walk that fails,
a refused shrink or a failed write closes the segments (the dispatcher drops what it still had).
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Sequence
from dataclasses import dataclass

from cluster.build.pairing import EMBED_BLOCK, VectorPairs, embedding_slots, slot_texts
from cluster.build.ports import BuildEncoders, LandedStream
from cluster.build.request import BuildTarget
from cluster.build.stages import Stage, StageTimes
from cluster.cloud import Priority
from cluster.routing import LandedBatch
from cluster.types import Chunk

EARLY_ROWS = EMBED_BLOCK  # chunks the walk collects before the first early segment goes


@dataclass(frozen=True)
class Segment:
    """One embed call: its rows (chunk indexes), the pairing of their vectors, and its batches."""

    rows: list[int]
    pairs: VectorPairs
    stream: LandedStream


def _nothing() -> Generator[LandedBatch, None, None]:
    yield from ()


def send_segment(encoders: BuildEncoders, target: BuildTarget, chunks: Sequence[Chunk], rows: Sequence[int]) -> Segment:
    """Send the texts of `rows` to the encoders now; their batches are read from the segment's stream."""
    slots = embedding_slots(chunks, rows)
    pairs = VectorPairs(slots, target.reference)
    if not slots:
        return Segment([], pairs, _nothing())
    texts = slot_texts(chunks, slots)
    return Segment(list(rows), pairs, encoders.embed_stream(texts, target.name, Priority.BULK))


def close_all(segments: Sequence[Segment]) -> None:
    """Give up on every segment's batches still to land (best effort: the build's own error is the one raised)."""
    for segment in segments:
        with contextlib.suppress(Exception):
            segment.stream.close()


class EarlyFeed:
    """Sends a walk's chunks to the encoders as it collects them (see the module's docstring)."""

    def __init__(self, encoders: BuildEncoders, target: BuildTarget, stages: StageTimes) -> None:
        self._encoders = encoders
        self._target = target
        self._stages = stages
        self.segments: list[Segment] = []
        self.sent = 0  # chunks 0 .. sent-1 went in a segment

    def collected(self, chunks: Sequence[Chunk]) -> None:
        """After each file of the walk, `chunks` being every chunk collected so far."""
        fresh = len(chunks) - self.sent
        if fresh < max(EARLY_ROWS, self.sent):
            return
        with self._stages.timing(Stage.SEND):
            self.segments.append(send_segment(self._encoders, self._target, chunks, range(self.sent, len(chunks))))
        self.sent = len(chunks)

    def line(self, total: int) -> str:
        """e.g. 'embedding began during the walk: 768 of 1571 chunks sent in 2 segments'."""
        return f"embedding began during the walk: {self.sent} of {total} chunks sent in {len(self.segments)} segments"

    def close(self) -> None:
        close_all(self.segments)
