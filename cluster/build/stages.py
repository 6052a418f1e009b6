"""Where a build's time goes: seconds per stage, as the driver spent them (timer injected).

Each stage is the driver's own wall time in it: `encode` is the time it waited on the encoders'
next batch, so the encoders' work that overlaps the other stages is in none of them. The build
says them in one log line at its end (`StageTimes.line`, read back by `parse_stage_line`):

    stages: total 41.20s; prepare 0.31s, walk 0.40s, chunk 1.10s, ... commit 0.20s
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import TypeVar

from cluster.types import Clock

T = TypeVar("T")

STAGE_LINE_PREFIX = "stages: "


class Stage(StrEnum):
    """A build's stages, in the order they are said."""

    PREPARE = "prepare"  # the source state, the reference encoder, the drift check, the probe vectors
    WALK = "walk"  # listing and reading the files (ignore rules, secret files, binaries)
    CHUNK = "chunk"  # the generated-file check and the chunker
    GRAPH = "graph"  # the code-graph facts of each file
    SECRETS = "secrets"  # the secret scan of each file
    PLAN = "plan"  # the shrink check, the embed hashes and row keys, the serving build's keys
    BEGIN = "begin"  # the build's empty collection
    SEND = "send"  # the texts in their order, handed to the encoders
    ENCODE = "encode"  # waiting on the encoders' next batch
    ROWS = "rows"  # pairing each chunk's two vectors and building its row (payload, keywords)
    WRITE = "write"  # starting store writes and waiting for them to land
    CARRY = "carry"  # reused rows carried inside the index
    VECTOR_INDEX = "vector-index"  # a large build's HNSW graphs, before it serves
    COMMIT = "commit"  # the switch to the new build
    HISTORY = "history"  # mining the commits since the last build


class StageTimes:
    """Seconds per stage, measured with `timer` (a monotonic clock in seconds)."""

    def __init__(self, timer: Clock) -> None:
        self._timer = timer
        self._started = timer()
        self.seconds: dict[Stage, float] = {}

    def add(self, stage: Stage, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    @contextmanager
    def timing(self, stage: Stage) -> Iterator[None]:
        """Time the block as `stage` (added even when it raises)."""
        start = self._timer()
        try:
            yield
        finally:
            self.add(stage, self._timer() - start)

    def timed(self, stage: Stage, items: Iterable[T]) -> Iterator[T]:
        """`items`, the time spent producing each (a generator's work, a stream's wait) added to `stage`."""
        iterator = iter(items)
        while True:
            start = self._timer()
            try:
                item = next(iterator)
            except StopIteration:
                self.add(stage, self._timer() - start)
                return
            self.add(stage, self._timer() - start)
            yield item

    def elapsed(self) -> float:
        return self._timer() - self._started

    def line(self) -> str:
        """e.g. 'stages: total 12.00s; prepare 0.50s, walk 0.25s, encode 10.00s' (stages not entered left out)."""
        parts = [f"{stage.value} {self.seconds[stage]:.2f}s" for stage in Stage if stage in self.seconds]
        return f"{STAGE_LINE_PREFIX}total {self.elapsed():.2f}s; " + ", ".join(parts)


_PART = re.compile(r"([a-z][a-z-]*) (\d+(?:\.\d+)?)s")


def parse_stage_line(line: str) -> dict[str, float]:
    """The seconds of a `StageTimes.line` by stage name (with 'total'); {} for any other line."""
    if not line.startswith(STAGE_LINE_PREFIX):
        return {}
    return {name: float(seconds) for name, seconds in _PART.findall(line[len(STAGE_LINE_PREFIX) :])}
