"""Progress of a long job: files and chunks done, rate, ETA (pure, clock injected)."""

from __future__ import annotations

from cluster.index import BuildProgress
from cluster.types import Clock


class ProgressMeter:
    def __init__(self, files_total: int, chunks_total: int, clock: Clock) -> None:
        self._clock = clock
        self._started = clock()
        self.files_total = files_total
        self.chunks_total = chunks_total
        self.files_done = 0
        self.chunks_done = 0

    def advance(self, *, chunks: int = 0, files: int = 0) -> None:
        self.chunks_done += chunks
        self.files_done += files

    def snapshot(self) -> BuildProgress:
        elapsed = max(self._clock() - self._started, 1e-9)
        rate = self.chunks_done / elapsed
        remaining = self.chunks_total - self.chunks_done
        eta = remaining / rate if rate > 0 else None
        return BuildProgress(
            files_done=self.files_done,
            files_total=self.files_total,
            chunks_done=self.chunks_done,
            chunks_total=self.chunks_total,
            chunks_per_s=round(rate, 2),
            eta_s=None if eta is None else round(eta, 1),
        )

    def line(self) -> str:
        p = self.snapshot()
        pct = 100.0 * p.chunks_done / p.chunks_total if p.chunks_total else 100.0
        eta = "?" if p.eta_s is None else f"{p.eta_s:.0f}s"
        return (
            f"progress: files {p.files_done}/{p.files_total} chunks {p.chunks_done}/{p.chunks_total} "
            f"({pct:.1f}%) {p.chunks_per_s:.1f} chunks/s ETA {eta}"
        )
