"""A soak: mixed MCP load on the embedded default for 20 minutes; does any process's memory keep growing?

    python -m bench.soak [--minutes 20] [--baseline-minute 5] [--package httpx] [--clients 4]

1. Corpus and cluster exactly as `bench.search_load` has them: a stripped copy of one installed
   package (`bench.quality_corpus.build_corpus`), indexed by `python -m samespace run` with the
   Makefile's environment, its own state folder, free ports and a short Ray temp dir, plus
   SAMESPACE_INDEX__ALLOWED_ROOTS naming the corpus's parent folder, so an MCP client may refresh it.
2. Load: `--clients` concurrent MCP SDK clients (streamable HTTP, one session each, reopened if it
   breaks), each starting a call at most every CLIENT_INTERVAL_S and at most `max_calls` in all,
   until the last memory sample: the weighted cycle search_code x6, read_code x2 (of a path and the
   lines a recent hit returned), index_status x1, and an ask_code every ASK_EVERY_S per client
   (staggered). ask_code has no mode argument: with no chat model reachable its answer comes in
   the pipeline's "citations-only" mode (`cluster/ask/pipeline.py`); deep=False skips the
   gathering loop, which would need a chat model too. Any other mode counts as an error.
3. Every minute, from minute 0 (before the first call) to minute `--minutes`: the RSS, PSS and USS
   of every process of the samespace Ray session and its children, per process (name + pid) and
   summed per name. Ten seconds into each minute, after its sample, one refresh_index of the
   corpus's index, followed to its end (progress token); the next sample waits for it, so no
   sample sees a reindex job's processes half-way.
4. The verdict, per process and per name: RSS at the last minute at most 10 % above its RSS at
   `--baseline-minute` (a drop passes). A process with no baseline sample is NEW, one whose name
   lost a baseline pid and gained a new one is RESTARTED (the pair shown), one that ended before
   the last minute is GONE: reported, not compared. Overall: FAIL when any compared row fails.

Prints the calls per kind (errors by name, p50/p99), the RSS per minute and the verdict tables;
writes bench/results/soak.json (every sample, the tables, the summary). The exit status is
non-zero only when it could not measure (the cluster did not start or stop, no sample at the
baseline or the last minute); a FAIL is printed. Everything it started is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.run import percentile
from bench.search_load import (
    INDEX_NAME,
    MB,
    RESULTS,
    LoadFailed,
    ProcessMemory,
    SamespaceCluster,
    aggregate_by_name,
    package_corpus,
    read_process,
)
from samespace.head import free_port

__all__ = [
    "KINDS",
    "CallLog",
    "MinuteSample",
    "MixScheduler",
    "Verdict",
    "main",
    "max_calls",
    "minute_markdown",
    "minute_table",
    "name_verdicts",
    "overall",
    "process_verdicts",
    "verdict_markdown",
    "weighted_cycle",
    "within_growth",
]

RESULTS_FILE = "soak.json"
DEFAULT_MINUTES = 20
DEFAULT_BASELINE_MINUTE = 5
DEFAULT_CLIENTS = 4
DEFAULT_PACKAGE = "httpx"
MINUTE_S = 60.0
KINDS = ("search_code", "read_code", "index_status", "ask_code", "refresh_index")
MIX_WEIGHTS = {"search_code": 6, "read_code": 2, "index_status": 1}
CLIENT_INTERVAL_S = 0.25  # a client starts at most 4 calls a second (fewer when calls take longer)
ASK_EVERY_S = 60.0  # per client; the clients' first asks are staggered across FIRST_ASK_S..ASK_EVERY_S
FIRST_ASK_S = 5.0
ASK_MODE = "citations-only"
REFRESH_OFFSET_S = 10.0  # into each minute, after its memory sample
REFRESH_TIMEOUT_S = 300.0
CALL_TIMEOUT_S = 60.0
RECONNECT_PAUSE_S = 1.0
RECENT_HITS = 20
K = 10
GROWTH_TOLERANCE = 0.10
ERROR_SAMPLES = 3  # messages kept per (kind, error name)
SESSION = "session"  # the log's kind for a session that could not open or broke outside a call
ALLOWED_ROOTS_ENV = "SAMESPACE_INDEX__ALLOWED_ROOTS"


# Pure parts: the mix, the call log, the minute tables, the verdicts.


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


@dataclass(frozen=True)
class MinuteSample:
    """The processes seen at one minute mark (`at_s`: when, in seconds since the load began)."""

    minute: int
    at_s: float
    processes: tuple[ProcessMemory, ...]

    def record(self) -> dict[str, Any]:
        return {
            "minute": self.minute,
            "at_s": round(self.at_s, 1),
            "total_rss_mb": round(sum(p.memory.rss for p in self.processes) / MB, 1),
            "total_pss_mb": round(sum(p.memory.pss for p in self.processes) / MB, 1),
            "processes": [
                {
                    "process": p.name,
                    "pid": p.pid,
                    "rss_mb": round(p.memory.rss / MB, 1),
                    "pss_mb": round(p.memory.pss / MB, 1),
                    "uss_mb": round(p.memory.uss / MB, 1),
                }
                for p in sorted(self.processes, key=lambda p: (p.name, p.pid))
            ],
            "by_name": aggregate_by_name(self.processes),
        }


def minute_table(samples: Sequence[MinuteSample], by_name: bool = False) -> list[dict[str, Any]]:
    """One row per process (name + pid), or per name with same-name processes summed: its RSS and
    PSS in MB at each sample, in the samples' order (None where it was not there), and for names
    the count of processes at each."""
    keys: dict[tuple[str, int | None], None] = {}
    for sample in samples:
        for p in sample.processes:
            keys[(p.name, None if by_name else p.pid)] = None
    rows = []
    for name, pid in sorted(keys, key=lambda key: (key[0], key[1] or 0)):
        row: dict[str, Any] = {"process": name} if by_name else {"process": name, "pid": pid}
        rss: list[float | None] = []
        pss: list[float | None] = []
        counts: list[int] = []
        for sample in samples:
            mine = [p for p in sample.processes if p.name == name and (by_name or p.pid == pid)]
            counts.append(len(mine))
            rss.append(round(sum(p.memory.rss for p in mine) / MB, 1) if mine else None)
            pss.append(round(sum(p.memory.pss for p in mine) / MB, 1) if mine else None)
        row |= {"minutes": [s.minute for s in samples], "rss_mb": rss, "pss_mb": pss}
        if by_name:
            row["count"] = counts
        rows.append(row)
    return rows


def minute_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """RSS MB per minute, a row per process (a name's count after its figure when it is not 1)."""
    if not rows:
        return "(no samples)"
    minutes = rows[0]["minutes"]
    with_pid = "pid" in rows[0]
    head = ["process", *(["pid"] if with_pid else []), *(f"m{m}" for m in minutes)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [str(row["process"]), *([str(row["pid"])] if with_pid else [])]
        for i, mb in enumerate(row["rss_mb"]):
            count = row["count"][i] if "count" in row else 1
            cells.append("-" if mb is None else f"{mb:.0f}" + (f" (x{count})" if count != 1 else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def within_growth(baseline: int, last: int, tolerance: float = GROWTH_TOLERANCE) -> bool:
    """The soak's test: `last` at most `tolerance` above `baseline` (a drop passes)."""
    return last <= baseline * (1 + tolerance)


@dataclass(frozen=True)
class Verdict:
    """One process (pid set) or one name's sum (pid None) at the baseline and the last minute.
    status: compared, new (no baseline), restarted (its name lost `previous_pid` and gained `pid`),
    gone (not there at the last minute). `passed` is None unless compared."""

    process: str
    pid: int | None
    status: str
    baseline_rss: int | None
    last_rss: int | None
    baseline_pss: int | None = None
    last_pss: int | None = None
    previous_pid: int | None = None
    counts: tuple[int, int] | None = None
    passed: bool | None = None

    @property
    def ratio(self) -> float | None:
        if self.baseline_rss is None or self.last_rss is None or self.baseline_rss == 0:
            return None
        return self.last_rss / self.baseline_rss

    @property
    def verdict(self) -> str:
        if self.status == "compared":
            return "PASS" if self.passed else "FAIL"
        return self.status.upper()

    def record(self) -> dict[str, Any]:
        ratio = self.ratio
        return asdict(self) | {"ratio": None if ratio is None else round(ratio, 3), "verdict": self.verdict}


def _compared(
    name: str, pid: int | None, b: Sequence[ProcessMemory], a: Sequence[ProcessMemory], tolerance: float
) -> Verdict:
    rss_b, rss_a = sum(p.memory.rss for p in b), sum(p.memory.rss for p in a)
    return Verdict(
        process=name,
        pid=pid,
        status="compared",
        baseline_rss=rss_b,
        last_rss=rss_a,
        baseline_pss=sum(p.memory.pss for p in b),
        last_pss=sum(p.memory.pss for p in a),
        counts=(len(b), len(a)) if pid is None else None,
        passed=within_growth(rss_b, rss_a, tolerance),
    )


def process_verdicts(
    baseline: Sequence[ProcessMemory], last: Sequence[ProcessMemory], tolerance: float = GROWTH_TOLERANCE
) -> list[Verdict]:
    """Each process (name + pid) at the baseline and the last minute: compared when it is in both;
    within a name, a baseline pid missing at the end and a new pid are paired as a restart (in pid
    order); what is left over is new or gone. Sorted by name, then pid."""
    before = {(p.name, p.pid): p for p in baseline}
    after = {(p.name, p.pid): p for p in last}
    verdicts = [
        _compared(name, pid, [before[(name, pid)]], [after[(name, pid)]], tolerance)
        for name, pid in before.keys() & after.keys()
    ]
    for name in sorted({name for name, _ in before.keys() ^ after.keys()}):
        gone = sorted(pid for n, pid in before.keys() - after.keys() if n == name)
        new = sorted(pid for n, pid in after.keys() - before.keys() if n == name)
        for old_pid, new_pid in zip(gone, new, strict=False):
            old, now = before[(name, old_pid)], after[(name, new_pid)]
            verdicts.append(
                Verdict(
                    name, new_pid, "restarted", old.memory.rss, now.memory.rss, old.memory.pss, now.memory.pss, old_pid
                )
            )
        for pid in new[len(gone) :]:
            now = after[(name, pid)]
            verdicts.append(Verdict(name, pid, "new", None, now.memory.rss, None, now.memory.pss))
        for pid in gone[len(new) :]:
            old = before[(name, pid)]
            verdicts.append(Verdict(name, pid, "gone", old.memory.rss, None, old.memory.pss, None))
    return sorted(verdicts, key=lambda v: (v.process, v.pid or 0))


def name_verdicts(
    baseline: Sequence[ProcessMemory], last: Sequence[ProcessMemory], tolerance: float = GROWTH_TOLERANCE
) -> list[Verdict]:
    """Each process name, same-name processes summed (as search_load's table): compared when the name
    is there at both minutes (counts shown), else new or gone."""
    names = sorted({p.name for p in baseline} | {p.name for p in last})
    verdicts = []
    for name in names:
        b = [p for p in baseline if p.name == name]
        a = [p for p in last if p.name == name]
        if b and a:
            verdicts.append(_compared(name, None, b, a, tolerance))
        elif a:
            rss, pss = sum(p.memory.rss for p in a), sum(p.memory.pss for p in a)
            verdicts.append(Verdict(name, None, "new", None, rss, None, pss, counts=(0, len(a))))
        else:
            rss, pss = sum(p.memory.rss for p in b), sum(p.memory.pss for p in b)
            verdicts.append(Verdict(name, None, "gone", rss, None, pss, None, counts=(len(b), 0)))
    return verdicts


def overall(verdicts: Iterable[Verdict]) -> bool | None:
    """False when any compared row failed, True when every compared row passed, None when none was compared."""
    passed = [v.passed for v in verdicts if v.status == "compared"]
    if not passed:
        return None
    return all(passed)


def verdict_markdown(verdicts: Sequence[Verdict], baseline_minute: int, last_minute: int) -> str:
    """The verdict table: RSS (and PSS) MB at both minutes, the ratio, the verdict and what it means."""
    lines = [
        (
            f"| process | pid | RSS m{baseline_minute} | RSS m{last_minute} | ratio | PSS m{baseline_minute} | "
            f"PSS m{last_minute} | verdict | note |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def mb(value: int | None) -> str:
        return "-" if value is None else f"{value / MB:.0f}"

    for v in verdicts:
        ratio = v.ratio
        note = ""
        if v.status == "restarted":
            note = f"pid {v.previous_pid} → {v.pid}"
        elif v.counts is not None and v.counts[0] != v.counts[1]:
            note = f"{v.counts[0]} → {v.counts[1]} processes"
        elif v.counts is not None and v.counts[0] > 1:
            note = f"{v.counts[0]} processes"
        lines.append(
            f"| {v.process} | {'-' if v.pid is None else v.pid} | {mb(v.baseline_rss)} | {mb(v.last_rss)} | "
            f"{'-' if ratio is None else f'{ratio:.2f}'} | {mb(v.baseline_pss)} | {mb(v.last_pss)} | {v.verdict} | "
            f"{note} |"
        )
    return "\n".join(lines)


# The load.


class CallFailed(Exception):
    """A call that answered, but wrongly: a tool error, no hits, an ask in another mode."""

    def __init__(self, name: str, message: str, outcome: str = "") -> None:
        super().__init__(message)
        self.name = name
        self.outcome = outcome


def error_name(exc: BaseException) -> str:
    """An exception's class name; for a group, its first leaf's (an MCP session's task group wraps what broke it)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return type(exc).__name__


@dataclass
class Load:
    """What the clients and the minute loop share: the server, the queries, the clock, the stop, the log."""

    url: str
    headers: dict[str, str]
    queries: list[str]
    log: CallLog
    started: float = field(default_factory=time.monotonic)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    sessions: int = 0

    def now_s(self) -> float:
        return time.monotonic() - self.started


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    """Sleep `seconds`, or less when `stop` is set meanwhile."""
    if seconds > 0 and not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)


async def _tool(
    session: Any, name: str, arguments: dict[str, Any], timeout_s: float = CALL_TIMEOUT_S, progress: Any = None
) -> dict[str, Any]:
    result = await session.call_tool(name, arguments, read_timeout_seconds=timeout_s, progress_callback=progress)
    if result.is_error:
        raise CallFailed("ToolError", "\n".join(getattr(block, "text", "") for block in result.content))
    content: dict[str, Any] = result.structured_content or {}
    return content


async def one_call(session: Any, kind: str, query: str, hits: deque[dict[str, Any]]) -> str:
    """One call of `kind` and a check of its answer; returns the outcome worth counting ('' for none)."""
    if kind == "search_code":
        found = (await _tool(session, kind, {"query": query, "k": K})).get("hits", [])
        if not found:
            raise CallFailed("NoHits", f"no hits for {query!r}")
        hits.extend(found[:3])
        return ""
    if kind == "read_code":
        hit = hits[0]
        hits.rotate(-1)
        arguments = {key: hit[key] for key in ("repo", "path", "start_line", "end_line")}
        if not (await _tool(session, kind, arguments)).get("text"):
            raise CallFailed("EmptyRead", f"read_code returned no text for {arguments}")
        return ""
    if kind == "index_status":
        indexes = (await _tool(session, kind, {"repo": INDEX_NAME})).get("indexes", [])
        if not any(info.get("repo") == INDEX_NAME for info in indexes):
            raise CallFailed("IndexMissing", f"index_status does not list {INDEX_NAME!r}")
        return ""
    if kind == "ask_code":
        answer = await _tool(session, kind, {"question": query, "repo": INDEX_NAME, "deep": False})
        mode = str(answer.get("produced", {}).get("mode", "?"))
        if mode != ASK_MODE:
            fallbacks = answer.get("produced", {}).get("fallbacks", [])
            raise CallFailed("UnexpectedAskMode", f"mode {mode!r}, fallbacks {fallbacks}", outcome=mode)
        if not answer.get("citations"):
            raise CallFailed("NoCitations", f"a {mode} answer with no citations for {query!r}", outcome=mode)
        return mode
    raise ValueError(f"no such kind: {kind}")


async def run_client(load: Load, offset: int, scheduler: MixScheduler) -> None:
    """One MCP client: a session (reopened after a call that raised, or one that broke), the scheduler's
    calls, one started per CLIENT_INTERVAL_S at most, until the stop or the scheduler's bound."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    hits: deque[dict[str, Any]] = deque(maxlen=RECENT_HITS)
    position = offset
    while not load.stop.is_set():
        opened = time.monotonic()
        try:
            async with (
                httpx2.AsyncClient(headers=load.headers, timeout=httpx2.Timeout(CALL_TIMEOUT_S)) as http,
                Client(streamable_http_client(load.url, http_client=http)) as session,
            ):
                load.sessions += 1
                while not load.stop.is_set():
                    kind = scheduler.next_kind(load.now_s(), bool(hits))
                    if kind is None:
                        return
                    query = load.queries[position % len(load.queries)]
                    position += 1
                    began = time.monotonic()
                    try:
                        outcome = await one_call(session, kind, query, hits)
                    except CallFailed as exc:
                        load.log.record(load.now_s(), kind, time.monotonic() - began, exc.name, str(exc), exc.outcome)
                    except Exception as exc:  # noqa: BLE001 - counted by name; the session may be broken: reopen it
                        load.log.record(load.now_s(), kind, time.monotonic() - began, error_name(exc), repr(exc))
                        break
                    else:
                        load.log.record(load.now_s(), kind, time.monotonic() - began, outcome=outcome)
                    await _pause(load.stop, began + CLIENT_INTERVAL_S - time.monotonic())
        except Exception as exc:  # noqa: BLE001 - a session that would not open or close cleanly: counted, retried
            load.log.record(load.now_s(), SESSION, time.monotonic() - opened, error_name(exc), repr(exc))
        await _pause(load.stop, RECONNECT_PAUSE_S)


async def refresh(load: Load) -> None:
    """One refresh_index of the corpus's index in a session of its own, followed to the build's end."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    kind, began = "refresh_index", time.monotonic()

    async def heard(done: float, total: float | None, message: str | None) -> None:
        return None

    try:
        async with (
            httpx2.AsyncClient(headers=load.headers, timeout=httpx2.Timeout(REFRESH_TIMEOUT_S)) as http,
            Client(streamable_http_client(load.url, http_client=http)) as session,
        ):
            report = await _tool(session, kind, {"name": INDEX_NAME}, REFRESH_TIMEOUT_S, heard)
        phase = str(report.get("phase", "?"))
        if phase == "failed" or not report.get("done"):
            raise CallFailed("RefreshFailed", f"phase {phase}: {report.get('error')}", outcome=phase)
    except CallFailed as exc:
        load.log.record(load.now_s(), kind, time.monotonic() - began, exc.name, str(exc), exc.outcome)
    except Exception as exc:  # noqa: BLE001 - counted by name; the next minute refreshes again
        load.log.record(load.now_s(), kind, time.monotonic() - began, error_name(exc), repr(exc))
    else:
        load.log.record(load.now_s(), kind, time.monotonic() - began, outcome=phase)


async def minute_loop(
    load: Load, minutes: int, sample: Callable[[], list[ProcessMemory]], samples: list[MinuteSample]
) -> None:
    """At each minute mark from 0 to `minutes`: the memory sample; REFRESH_OFFSET_S later (but for the
    last), one refresh, awaited (the next sample waits for it). Then the clients stop."""
    try:
        for minute in range(minutes + 1):
            await asyncio.sleep(max(0.0, load.started + minute * MINUTE_S - time.monotonic()))
            processes = tuple(await asyncio.to_thread(sample))
            samples.append(MinuteSample(minute, load.now_s(), processes))
            rss, pss = sum(p.memory.rss for p in processes) / MB, sum(p.memory.pss for p in processes) / MB
            print(
                f"minute {minute} (at {load.now_s():.0f} s): {len(processes)} processes, RSS {rss:.0f} MB, "
                f"PSS {pss:.0f} MB; {len(load.log.calls)} calls, {load.log.errors()} errors",
                flush=True,
            )
            if minute == minutes:
                break
            await asyncio.sleep(max(0.0, load.started + minute * MINUTE_S + REFRESH_OFFSET_S - time.monotonic()))
            await refresh(load)
    finally:
        load.stop.set()


async def soak(
    url: str,
    headers: dict[str, str],
    queries: list[str],
    minutes: int,
    clients: int,
    sample: Callable[[], list[ProcessMemory]],
) -> tuple[CallLog, list[MinuteSample], int]:
    """The whole load: the minute loop and `clients` clients; the call log, the samples, sessions opened."""
    from bench.search_load import client_offsets

    load = Load(url=url, headers=headers, queries=queries, log=CallLog())
    samples: list[MinuteSample] = []
    cycle = weighted_cycle(MIX_WEIGHTS)
    limit = max_calls(minutes, CLIENT_INTERVAL_S, ASK_EVERY_S)
    async with asyncio.TaskGroup() as group:
        group.create_task(minute_loop(load, minutes, sample, samples))
        for i, offset in enumerate(client_offsets(len(queries), clients)):
            first_ask_s = FIRST_ASK_S + i * (ASK_EVERY_S - FIRST_ASK_S) / clients
            group.create_task(run_client(load, offset, MixScheduler(cycle, ASK_EVERY_S, first_ask_s, limit)))
    return load.log, samples, load.sessions


# The run.


@dataclass
class SoakCluster(SamespaceCluster):
    """search_load's embedded default, with a few settings of this bench added to its environment."""

    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return super().env | self.extra_env


def sample_processes(cluster: SamespaceCluster) -> list[ProcessMemory]:
    return [p for p in map(read_process, cluster.pids()) if p is not None]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak")
    parser.add_argument("--minutes", type=int, default=DEFAULT_MINUTES, help="how long the load runs")
    parser.add_argument(
        "--baseline-minute", type=int, default=DEFAULT_BASELINE_MINUTE, help="the sample the last one is held to"
    )
    parser.add_argument("--package", default=DEFAULT_PACKAGE, help="installed package whose copy is the corpus")
    parser.add_argument("--clients", type=int, default=DEFAULT_CLIENTS, help="concurrent MCP clients")
    args = parser.parse_args(argv)
    if args.minutes < 1 or not 0 <= args.baseline_minute < args.minutes or args.clients < 1:
        parser.error("need --minutes >= 1, 0 <= --baseline-minute < --minutes and --clients >= 1")

    from cluster.settings import load_settings

    work = Path(tempfile.mkdtemp(prefix="samespace-soak-"))
    corpus, queries, facts = package_corpus(args.package, work)
    cluster = SoakCluster(
        state_dir=work / "state",
        temp_dir=Path(tempfile.mkdtemp(prefix="sso-", dir="/tmp")),  # Ray's socket paths must stay short
        corpus=corpus,
        mcp_port=free_port(),
        log=work / "samespace-run.log",
        extra_env={ALLOWED_ROOTS_ENV: json.dumps([str(corpus.parent)])},  # refresh_index over MCP
    )
    token = load_settings().serve.expected_token()  # the cluster reads the same SAMESPACE_* environment
    headers = {"Authorization": f"Bearer {token.get_secret_value()}"} if token is not None else {}
    try:
        began = time.perf_counter()
        cluster.start()
        startup_s = round(time.perf_counter() - began, 1)
        print(f"samespace run: up and indexed in {startup_s:.0f} s; {args.minutes} minutes of load", flush=True)
        log, samples, sessions = asyncio.run(
            soak(cluster.url, headers, queries, args.minutes, args.clients, lambda: sample_processes(cluster))
        )
    finally:
        left = cluster.stop()
    if left:
        raise LoadFailed(f"processes of the samespace session outlived `samespace stop` (killed): {left}")

    by_minute = {s.minute: s for s in samples}
    baseline, last = by_minute.get(args.baseline_minute), by_minute.get(args.minutes)
    per_process = process_verdicts(baseline.processes, last.processes) if baseline and last else []
    per_name = name_verdicts(baseline.processes, last.processes) if baseline and last else []
    passed = overall([*per_process, *per_name])
    summary = log.summary()
    results: dict[str, Any] = {
        "corpus": {
            "package": args.package,
            "version": facts["packages"][args.package],
            "files": facts["files"],
            "queries": len(queries),
        },
        "settings": {
            "minutes": args.minutes,
            "baseline_minute": args.baseline_minute,
            "clients": args.clients,
            "client_interval_s": CLIENT_INTERVAL_S,
            "mix_weights": MIX_WEIGHTS,
            "ask_every_s_per_client": ASK_EVERY_S,
            "ask": {"deep": False, "expected_mode": ASK_MODE},
            "refresh_offset_s": REFRESH_OFFSET_S,
            "growth_tolerance": GROWTH_TOLERANCE,
            "k": K,
        },
        "startup_s": startup_s,
        "sessions_opened": sessions,
        "calls": summary,
        "calls_per_minute": log.per_minute(args.minutes),
        "samples": [s.record() for s in samples],
        "minute_table": {"per_process": minute_table(samples), "per_name": minute_table(samples, by_name=True)},
        "verdicts": {
            "per_process": [v.record() for v in per_process],
            "per_name": [v.record() for v in per_name],
            "overall": {True: "PASS", False: "FAIL", None: "NOT MEASURED"}[passed],
        },
        "machine": {"cpus": os.cpu_count()},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / RESULTS_FILE).write_text(json.dumps(results, indent=2))

    print()
    print(calls_markdown(summary))
    print(f"\nRSS MB per minute, same-name processes summed:\n{minute_markdown(results['minute_table']['per_name'])}")
    print(f"\nper process, minute {args.baseline_minute} vs minute {args.minutes}:")
    print(verdict_markdown(per_process, args.baseline_minute, args.minutes))
    shown = {v.process for v in per_process if v.status != "compared"} | {
        v.process for v in per_name if v.counts != (1, 1)
    }  # the other names' sums are their one process's row above
    print("\nper name, same-name processes summed (names with several processes, or one new, restarted or gone):")
    print(verdict_markdown([v for v in per_name if v.process in shown], args.baseline_minute, args.minutes))
    others = Counter(v.verdict for v in per_process if v.status != "compared")
    failed = [f"{v.process} ({v.pid})" for v in per_process if v.passed is False]
    failed += [f"{v.process} (sum)" for v in per_name if v.passed is False]
    line = f"every process ends at most {GROWTH_TOLERANCE:.0%} above its RSS at minute {args.baseline_minute}"
    if failed:
        line += f"; failed: {', '.join(failed)}"
    if others:
        line += f"; not compared: {', '.join(f'{n} {verdict}' for verdict, n in sorted(others.items()))}"
    print(f"\n{results['verdicts']['overall']}  {line}")
    print(f"\nwritten: {RESULTS / RESULTS_FILE}")
    if passed is None:
        print(f"could not measure: no sample at minute {args.baseline_minute} or {args.minutes}; log in {work}")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
