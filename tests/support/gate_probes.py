"""Fake embedding providers for the compatibility gate's unit tests: crafted unit rows, a copy with one
row at a chosen cosine, providers that return fixed rows or raise or hang, and a fixed clock.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np

from cluster.gate.probe import PROBE_TEXTS, GateReport, ProbeTarget, Regime, probe

WIDTH = 8
N = len(PROBE_TEXTS)


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def unit_rows(seed: int = 0, n: int = N, width: int = WIDTH) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, width))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def with_one_row_at(base: np.ndarray, cosine: float, row: int = 3) -> np.ndarray:
    """A copy of `base` whose row `row` sits at exactly `cosine` from the original; others identical."""
    out = base.astype(np.float64).copy()
    v = out[row]
    u = np.random.default_rng(99).normal(size=v.shape)
    u -= u.dot(v) * v
    u /= np.linalg.norm(u)
    out[row] = cosine * v + np.sqrt(1.0 - cosine**2) * u
    return out.astype(np.float32)


@dataclass
class Fake:
    """A provider that returns fixed rows, or raises, or hangs; it counts its calls."""

    name: str
    rows: np.ndarray | None = None
    error: Exception | None = None
    hang_s: float = 0.0
    upstream: str | None = None
    needs_pin: bool = False
    model: str = "minilm"
    calls: list[list[str]] = field(default_factory=list)

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(texts)
        if self.hang_s:
            await asyncio.sleep(self.hang_s)
        if self.error is not None:
            raise self.error
        assert self.rows is not None
        return self.rows

    @property
    def target(self) -> ProbeTarget:
        return ProbeTarget(self.name, self.model, self.upstream, self.needs_pin, self.embed)


def cloud(name: str = "cloud-a", rows: np.ndarray | None = None, upstream: str | None = "nebius", **kw: object) -> Fake:
    rows = rows if rows is not None else unit_rows()
    return Fake(name, rows=rows, upstream=upstream, needs_pin=True, **kw)  # type: ignore[arg-type]


def local(name: str = "gpu-0", rows: np.ndarray | None = None, **kw: object) -> Fake:
    return Fake(name, rows=rows if rows is not None else unit_rows(), **kw)  # type: ignore[arg-type]


async def run_probe(candidate: Fake, reference: Fake | None, **kw: object) -> GateReport:
    return await probe(
        candidate.target,
        reference.target if reference is not None else None,
        regime=kw.pop("regime", Regime.LOCAL_REF),  # type: ignore[arg-type]
        expected_width=kw.pop("expected_width", WIDTH),  # type: ignore[arg-type]
        clock=kw.pop("clock", FakeClock()),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )
