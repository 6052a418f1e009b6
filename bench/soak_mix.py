"""bench.soak's mix of calls and their log: a smooth weighted cycle, one scheduler per client (asks on
their own clock), and every call's end, kind, latency, error and outcome."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.run import percentile

__all__ = ["KINDS", "MINUTE_S", "CallLog", "MixScheduler", "calls_markdown", "max_calls", "weighted_cycle"]

MINUTE_S = 60.0
KINDS = ("search_code", "read_code", "index_status", "ask_code", "refresh_index")
ERROR_SAMPLES = 3  # messages kept per (kind, error name)


def weighted_cycle(weights: Mapping[str, int]) -> list[str]:
    """One period of a smooth weighted round-robin: each kind `weight` times, spread out (a x2, b x1: a b a)."""
    if not weights or any(w < 1 for w in weights.values()):
        raise ValueError("every weight must be at least 1")
    total_weight = sum(weights.values())
    current = dict.fromkeys(weights, 0)
    cycle = []
    for _ in range(total_weight):
        for kind, weight in weights.items():
            current[kind] += weight
        chosen = max(current, key=lambda kind: current[kind])  # ties: the first in `weights`
        current[chosen] -= total_weight
        cycle.append(chosen)
    return cycle


def max_calls(minutes: float, interval_s: float, ask_every_s: float) -> int:
    """A client's bound on calls: one per interval over the run, plus its asks."""
    seconds = minutes * MINUTE_S
    return math.ceil(seconds / interval_s) + math.ceil(seconds / ask_every_s) + 1


class MixScheduler:
    """What one client calls next: an ask when one is due (the first at `first_ask_s`, then one per
    `ask_every_s`; missed ones are skipped, never made up in a burst), else the next kind of the
    cycle, with read_code turned into search_code while no hit is known; None once `limit` calls
    were scheduled. Times are seconds since the load began."""

    def __init__(self, cycle: Sequence[str], ask_every_s: float, first_ask_s: float, limit: int) -> None:
        if not cycle or ask_every_s <= 0 or limit < 0:
            raise ValueError("need a cycle, a positive ask period and a non-negative limit")
        self._cycle = list(cycle)
        self._ask_every_s = ask_every_s
        self._next_ask_s = first_ask_s
        self._limit = limit
        self._position = 0
        self.scheduled = 0

    def next_kind(self, now_s: float, have_hit: bool) -> str | None:
        if self.scheduled >= self._limit:
            return None
        self.scheduled += 1
        if now_s >= self._next_ask_s:
            while self._next_ask_s <= now_s:
                self._next_ask_s += self._ask_every_s
            return "ask_code"
        kind = self._cycle[self._position % len(self._cycle)]
        self._position += 1
        return "search_code" if kind == "read_code" and not have_hit else kind


@dataclass
class CallLog:
    """Every call: when it ended (seconds since the load began), its kind, its latency, its error's
    name (None: it succeeded) and an outcome worth counting (an ask's mode, a refresh's phase)."""

    calls: list[tuple[float, str, float, str | None]] = field(default_factory=list)
    messages: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)

    def record(
        self, at_s: float, kind: str, seconds: float, error: str | None = None, message: str = "", outcome: str = ""
    ) -> None:
        self.calls.append((at_s, kind, seconds, error))
        if error is not None:
            kept = self.messages.setdefault((kind, error), [])
            if len(kept) < ERROR_SAMPLES:
                kept.append(message[:300])
        if outcome:
            self.outcomes.setdefault(kind, Counter())[outcome] += 1

    def errors(self) -> int:
        return sum(1 for call in self.calls if call[3] is not None)

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per kind (the five, then any other seen): calls, errors by name with sample messages, the
        latency percentiles of the calls that succeeded, and the outcomes counted."""
        seen = [kind for kind in dict.fromkeys(call[1] for call in self.calls) if kind not in KINDS]
        table = {}
        for kind in [*KINDS, *seen]:
            mine = [call for call in self.calls if call[1] == kind]
            ok_ms = [call[2] * 1000 for call in mine if call[3] is None]
            errors = Counter(call[3] for call in mine if call[3] is not None)
            table[kind] = {
                "calls": len(mine),
                "ok": len(ok_ms),
                "errors": dict(sorted(errors.items())),
                "error_messages": {name: self.messages.get((kind, name), []) for name in sorted(errors)},
                "p50_ms": round(percentile(ok_ms, 50), 1) if ok_ms else None,
                "p99_ms": round(percentile(ok_ms, 99), 1) if ok_ms else None,
                "outcomes": dict(sorted(self.outcomes.get(kind, Counter()).items())),
            }
        return table

    def per_minute(self, minutes: int) -> list[dict[str, Any]]:
        """Calls, errors and p50 per kind in each minute of the load (a call counts in the minute it ended)."""
        rows = []
        for minute in range(minutes):
            row: dict[str, Any] = {"minute": minute}
            for kind in KINDS:
                mine = [c for c in self.calls if c[1] == kind and minute * MINUTE_S <= c[0] < (minute + 1) * MINUTE_S]
                ok_ms = [c[2] * 1000 for c in mine if c[3] is None]
                row[kind] = {
                    "calls": len(mine),
                    "errors": len(mine) - len(ok_ms),
                    "p50_ms": round(percentile(ok_ms, 50), 1) if ok_ms else None,
                }
            rows.append(row)
        return rows


def calls_markdown(summary: Mapping[str, Mapping[str, Any]]) -> str:
    lines = ["| kind | calls | errors | p50 ms | p99 ms | errors by name | outcomes |", "|---|---|---|---|---|---|---|"]
    for kind, row in summary.items():
        errors = sum(row["errors"].values())
        names = ", ".join(f"{name} x{n}" for name, n in row["errors"].items()) or "-"
        outcomes = ", ".join(f"{name} x{n}" for name, n in row["outcomes"].items()) or "-"
        p50 = "-" if row["p50_ms"] is None else f"{row['p50_ms']:.0f}"
        p99 = "-" if row["p99_ms"] is None else f"{row['p99_ms']:.0f}"
        lines.append(f"| {kind} | {row['calls']} | {errors} | {p50} | {p99} | {names} | {outcomes} |")
    return "\n".join(lines)
