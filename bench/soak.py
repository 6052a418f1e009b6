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

The mix and the call log are in `bench.soak_mix`, the minute samples and the verdicts in
`bench.soak_verdicts`; the cluster, the clients' sessions and /proc come from the modules it shares
with `bench.search_load` (`load_servers`, `load_clients`, `process_memory`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.load_clients import bearer_headers, client_offsets, mcp_session
from bench.load_servers import INDEX_NAME, LoadFailed, SamespaceCluster, package_corpus
from bench.process_memory import MB, ProcessMemory, read_processes
from bench.run import RESULTS
from bench.soak_mix import MINUTE_S, CallLog, MixScheduler, calls_markdown, max_calls, weighted_cycle
from bench.soak_verdicts import (
    GROWTH_TOLERANCE,
    MinuteSample,
    minute_markdown,
    minute_table,
    name_verdicts,
    overall,
    process_verdicts,
    verdict_markdown,
)
from samespace.head import free_port

__all__ = ["CallFailed", "Load", "SoakCluster", "main", "one_call", "soak"]

RESULTS_FILE = "soak.json"
DEFAULT_MINUTES = 20
DEFAULT_BASELINE_MINUTE = 5
DEFAULT_CLIENTS = 4
DEFAULT_PACKAGE = "httpx"
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
SESSION = "session"  # the log's kind for a session that could not open or broke outside a call
ALLOWED_ROOTS_ENV = "SAMESPACE_INDEX__ALLOWED_ROOTS"


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
    hits: deque[dict[str, Any]] = deque(maxlen=RECENT_HITS)
    position = offset
    while not load.stop.is_set():
        opened = time.monotonic()
        try:
            async with mcp_session(load.url, load.headers, CALL_TIMEOUT_S) as session:
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
    kind, began = "refresh_index", time.monotonic()

    async def heard(done: float, total: float | None, message: str | None) -> None:
        return None

    try:
        async with mcp_session(load.url, load.headers, REFRESH_TIMEOUT_S) as session:
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
    return read_processes(cluster.pids())


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
    headers = bearer_headers()
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
