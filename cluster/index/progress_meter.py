"""Progress of a long job: files and chunks done, rate, ETA (pure, clock injected).

Chunks whose vector is reused (incremental reindex) count as done but not towards the rate:
they cost no encoding, and the ETA is the time the chunks still to embed will take. (BuildProgress
carries no reused count: index_status's build rows mirror its fields exactly.)"""

from __future__ import annotations

from cluster.index.records import BuildProgress
from cluster.types import Clock


class ProgressMeter:
    def __init__(self, files_total: int, chunks_total: int, clock: Clock) -> None:
        self._clock = clock
        self._started = clock()
        self.files_total = files_total
        self.chunks_total = chunks_total
        self.files_done = 0
        self.chunks_done = 0
        self.chunks_reused = 0

    def advance(self, *, chunks: int = 0, files: int = 0, reused: int = 0) -> None:
        """`chunks` embedded, `reused` written from reused vectors, `files` finished."""
        self.chunks_done += chunks + reused
        self.chunks_reused += reused
        self.files_done += files

    def snapshot(self) -> BuildProgress:
        elapsed = max(self._clock() - self._started, 1e-9)
        rate = (self.chunks_done - self.chunks_reused) / elapsed
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
        eta = "0s" if p.chunks_done >= p.chunks_total else "?" if p.eta_s is None else f"{p.eta_s:.0f}s"
        reused = f" (reused {self.chunks_reused})" if self.chunks_reused else ""
        return (
            f"progress: files {p.files_done}/{p.files_total} chunks {p.chunks_done}/{p.chunks_total}{reused} "
            f"({pct:.1f}%) {p.chunks_per_s:.1f} chunks/s ETA {eta}"
        )
