"""MCP `search_code` under 1, 4 and 8 concurrent clients: samespace's embedded default against one process.

    python -m bench.search_load [--clients 1 4 8] [--seconds 20] [--package httpx]

Issue 17's comparison, measured back to back on one machine, one corpus and one query list:

1. Corpus: a stripped copy of one installed package (`bench.quality_corpus.build_corpus`, default
   httpx); the queries are its docstring queries (~250-300). Both sides index that folder.
2. samespace: the real embedded default, started as `make run` starts it: `python -m samespace run`
   (a local Ray head with token auth, `serve deploy`, the reindex job, a sample query) with the
   Makefile's environment, its own state folder, free ports and a short Ray temp dir; stopped with
   `samespace stop` at the end, after which no process of its Ray session may be left. The query-
   vector cache is set to live 1 µs (SAMESPACE_RLM__QUERY_CACHE_TTL_S): the competitor has none,
   so no answer on either side comes from a cache.
3. single process: `python -m bench.single_process` (FastAPI + the MCP SDK + MiniLM + numpy brute
   force over the same chunks), on a free port, stopped by PID at the end.
4. Load: for each client count N, N concurrent MCP clients (the SDK client, one session each, kept
   open), each looping over the queries from its own offset, calling search_code(query, k=10) for
   `--seconds` after a few uncounted warm-up calls. The sides alternate per client count
   (samespace N=1, single N=1, samespace N=4, ...), both servers up the whole time, one side loaded
   at a time. Any call that errors stops the bench.
5. Memory: RSS, PSS and USS (/proc/<pid>/smaps_rollup) of every process of the samespace Ray session
   and their children, and of the single process, sampled every 0.5 s through the load phase: the
   total at its peak and a per-process table (same-name processes summed) at the end. RSS counts
   shared pages once per process; PSS splits them among the processes that share them.

Prints the comparison table, the memory tables and issue 17's acceptance checks (PASS/FAIL: a
FAIL does not change the exit status; only a failure to measure does). Writes
bench/results/search_load.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.run import latency_summary, percentile
from cluster.environment import LOCAL_ENV
from samespace.head import FIXED_PORT_FLAGS, HeadRecord, free_port

__all__ = [
    "MAX_SAMESPACE_RSS_BYTES",
    "QUERY_CACHE_TTL_S",
    "Check",
    "Memory",
    "MemoryTrace",
    "ProcessMemory",
    "aggregate_by_name",
    "client_offsets",
    "compare",
    "descendants",
    "evaluate",
    "load_summary",
    "main",
    "markdown_table",
    "memory_table",
    "package_corpus",
    "parse_smaps_rollup",
    "process_name",
    "run_env",
]

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
RESULTS_FILE = "search_load.json"
DEFAULT_CLIENTS = (1, 4, 8)
DEFAULT_SECONDS = 20.0
DEFAULT_PACKAGE = "httpx"
INDEX_NAME = "load"
K = 10
WARMUP_CALLS = 3  # per client, before the timed window
SAMPLE_EVERY_S = 0.5
QUERY_CACHE_TTL_S = 1e-6  # the settings refuse 0; a microsecond lets no query vector be reused
SIDES = ("samespace", "single")
RUN_TIMEOUT_S = 1500.0  # a cold head, two model loads and the reindex job on a shared 2-core box
SERVE_WAIT_S = 900.0
SINGLE_START_S = 600.0
STOP_TIMEOUT_S = 120.0
HEALTH_POLL_S = 1.0
CALL_TIMEOUT_S = 60.0
# Issue 17's acceptance (bench, not timed tests).
MAX_P50_RATIO_AT_1 = 2.0
MIN_QPS_RATIO = 0.7
QPS_RATIO_CLIENTS = (4, 8)
MAX_SAMESPACE_RSS_BYTES = 2_500_000_000  # 2.5 GB
GB = 1e9
MB = 1e6
MAX_CODE_CHARS = 60  # of a `python -c` process's first statement, in its name


class LoadFailed(RuntimeError):
    """Something broke while measuring (a call errored, a server did not start or stop)."""


# Pure parts: process names, memory, summaries, acceptance, tables.


@dataclass(frozen=True)
class Memory:
    """Resident memory in bytes: rss counts shared pages in full, pss shares them out, uss is private only."""

    rss: int = 0
    pss: int = 0
    uss: int = 0

    def __add__(self, other: Memory) -> Memory:
        return Memory(self.rss + other.rss, self.pss + other.pss, self.uss + other.uss)


@dataclass(frozen=True)
class ProcessMemory:
    pid: int
    name: str
    memory: Memory


@dataclass(frozen=True)
class Check:
    """One acceptance line; `passed` None when the run did not measure what it needs."""

    name: str
    passed: bool | None
    detail: str

    @property
    def verdict(self) -> str:
        return {True: "PASS", False: "FAIL", None: "SKIP"}[self.passed]


def parse_smaps_rollup(text: str) -> Memory:
    """Rss, Pss and Private_Clean + Private_Dirty (USS) of a /proc/<pid>/smaps_rollup, in bytes."""
    kb: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            kb[key.strip()] = int(parts[0])
    if "Rss" not in kb:
        raise ValueError("not an smaps_rollup: no Rss line")
    uss = kb.get("Private_Clean", 0) + kb.get("Private_Dirty", 0)
    return Memory(rss=kb["Rss"] * 1024, pss=kb.get("Pss", 0) * 1024, uss=uss * 1024)


def process_name(cmdline: Sequence[str], comm: str) -> str:
    """A readable name: Ray's process title without the running method (`ray::IndexActor`) or the
    incarnation (`ray-dashboard-JobHead`, a dashboard module forked from its forkserver), an
    executable's name (`raylet`), a Python script's file name (`dashboard.py`), `-m module`, or
    `-c <first statement>`."""
    if not cmdline or not cmdline[0].strip():
        return comm
    first = cmdline[0].split()[0]
    if first.startswith("ray::"):
        title = first.removesuffix("()")
        head, _, last = title.rpartition(":")
        return f"{head}:{last.split('.')[0]}" if head else title.split(".")[0]
    if first.startswith("ray-"):
        return first.rstrip("0123456789").removesuffix("-")
    program = Path(first).name
    if not program.startswith("python"):
        return program
    rest = list(cmdline[1:])
    while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
        rest.pop(0)
    if not rest or (rest[0] in ("-m", "-c") and len(rest) < 2):
        return program
    if rest[0] == "-m":
        return f"-m {rest[1]}"
    if rest[0] == "-c":
        return f"-c {rest[1].split(';')[0].strip()[:MAX_CODE_CHARS]}"
    script = Path(rest[0])
    return f"{script.parent.name}/{script.name}" if script.name in ("main.py", "__main__.py") else script.name


def descendants(roots: Iterable[int], parents: Mapping[int, int]) -> set[int]:
    """`roots` and every process below them, given each live process's parent."""
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def aggregate_by_name(processes: Iterable[ProcessMemory]) -> list[dict[str, Any]]:
    """One row per process name (count, MB of RSS/PSS/USS summed), largest RSS first."""
    rows: dict[str, tuple[int, Memory]] = {}
    for p in processes:
        count, memory = rows.get(p.name, (0, Memory()))
        rows[p.name] = (count + 1, memory + p.memory)
    table = [
        {
            "process": name,
            "count": count,
            "rss_mb": round(m.rss / MB, 1),
            "pss_mb": round(m.pss / MB, 1),
            "uss_mb": round(m.uss / MB, 1),
        }
        for name, (count, m) in rows.items()
    ]
    return sorted(table, key=lambda row: (-row["rss_mb"], row["process"]))


def total(processes: Iterable[ProcessMemory]) -> Memory:
    return sum((p.memory for p in processes), Memory())


def load_summary(latencies_s: Sequence[float], elapsed_s: float, errors: int = 0) -> dict[str, Any]:
    """q/s over the timed window and the latency percentiles of the calls in it."""
    if not latencies_s or elapsed_s <= 0:
        raise ValueError("a load summary needs at least one call and a positive window")
    summary = latency_summary(list(latencies_s))
    return {
        "qps": round(len(latencies_s) / elapsed_s, 2),
        "p50_ms": summary["p50_ms"],
        "p95_ms": summary["p95_ms"],
        "p99_ms": round(percentile([s * 1000 for s in latencies_s], 99), 2),
        "mean_ms": summary["mean_ms"],
        "calls": len(latencies_s),
        "errors": errors,
        "seconds": round(elapsed_s, 2),
    }


def compare(clients: int, samespace: Mapping[str, Any], single: Mapping[str, Any]) -> dict[str, Any]:
    """One row of the comparison: both sides' summaries and samespace's ratios to the single process."""
    return {
        "clients": clients,
        "samespace": dict(samespace),
        "single": dict(single),
        "qps_ratio": round(samespace["qps"] / single["qps"], 3),
        "p50_ratio": round(samespace["p50_ms"] / single["p50_ms"], 3),
    }


def client_offsets(n_queries: int, n_clients: int) -> list[int]:
    """Where each client starts in the query list: spread evenly, so concurrent clients ask different things."""
    if n_queries < 1 or n_clients < 1:
        raise ValueError("need at least one query and one client")
    return [i * n_queries // n_clients for i in range(n_clients)]


def evaluate(rows: Sequence[Mapping[str, Any]], samespace_peak_rss: int | None) -> list[Check]:
    """Issue 17's acceptance checks on the comparison rows and samespace's peak RSS."""
    by_clients = {row["clients"]: row for row in rows}
    checks = []
    one = by_clients.get(1)
    checks.append(
        Check(
            f"1 client: samespace p50 within {MAX_P50_RATIO_AT_1:g}x of the single process",
            None if one is None else one["p50_ratio"] <= MAX_P50_RATIO_AT_1,
            "not measured" if one is None else f"p50 ratio {one['p50_ratio']:.2f}",
        )
    )
    for n in QPS_RATIO_CLIENTS:
        row = by_clients.get(n)
        checks.append(
            Check(
                f"{n} clients: samespace q/s at least {MIN_QPS_RATIO:g}x the single process",
                None if row is None else row["qps_ratio"] >= MIN_QPS_RATIO,
                "not measured" if row is None else f"q/s ratio {row['qps_ratio']:.2f}",
            )
        )
    four, eight = by_clients.get(4), by_clients.get(8)
    if four is None or eight is None:
        checks.append(Check("samespace q/s at 8 clients at least its q/s at 4", None, "not measured"))
    else:
        at_4, at_8 = four["samespace"]["qps"], eight["samespace"]["qps"]
        checks.append(
            Check("samespace q/s at 8 clients at least its q/s at 4", at_8 >= at_4, f"{at_8} q/s at 8, {at_4} at 4")
        )
    checks.append(
        Check(
            f"samespace peak RSS at most {MAX_SAMESPACE_RSS_BYTES / GB:g} GB",
            None if samespace_peak_rss is None else samespace_peak_rss <= MAX_SAMESPACE_RSS_BYTES,
            "not measured" if samespace_peak_rss is None else f"peak RSS {samespace_peak_rss / GB:.2f} GB",
        )
    )
    return checks


def markdown_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The issue's table: both sides' q/s and p50 / p99, and samespace's ratios."""
    lines = [
        "| clients | samespace q/s | p50 / p99 ms | single q/s | p50 / p99 ms | q/s ratio | p50 ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        s, o = row["samespace"], row["single"]
        lines.append(
            f"| {row['clients']} | {s['qps']:.1f} | {s['p50_ms']:.1f} / {s['p99_ms']:.1f} | {o['qps']:.1f} | "
            f"{o['p50_ms']:.1f} / {o['p99_ms']:.1f} | {row['qps_ratio']:.2f} | {row['p50_ratio']:.2f} |"
        )
    return "\n".join(lines)


def memory_table(rows: Sequence[Mapping[str, Any]]) -> str:
    lines = ["| process | count | RSS MB | PSS MB | USS MB |", "|---|---|---|---|---|"]
    lines += [
        f"| {r['process']} | {r['count']} | {r['rss_mb']:.0f} | {r['pss_mb']:.0f} | {r['uss_mb']:.0f} |" for r in rows
    ]
    return "\n".join(lines)


def run_env(base: Mapping[str, str], state_dir: Path, mcp_port: int) -> dict[str, str]:
    """The environment `make run` gives `samespace run` (the Makefile's exports), with this run's
    state folder for the store and the admin files, and a query-vector cache that never hits."""
    env = {key: value for key, value in base.items() if key != "PYTEST_CURRENT_TEST"}
    env.update(LOCAL_ENV)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["SAMESPACE_STORE__DATA_DIR"] = str(state_dir / "data")
    env["SAMESPACE_SERVE__PORT"] = str(mcp_port)
    env["SAMESPACE_ADMIN__TOKEN_FILE"] = str(state_dir / "admin-token")
    env["SAMESPACE_ADMIN__CONFIG_PATH"] = str(state_dir / "config.json")
    env["SAMESPACE_RLM__QUERY_CACHE_TTL_S"] = repr(QUERY_CACHE_TTL_S)
    return env


# /proc readers and the sampler.


def read_process(pid: int) -> ProcessMemory | None:
    """A live process's name and memory; None when it is gone (or unreadable)."""
    proc = Path(f"/proc/{pid}")
    try:
        cmdline = [part for part in (proc / "cmdline").read_bytes().decode(errors="replace").split("\0") if part]
        comm = (proc / "comm").read_text().strip()
        memory = parse_smaps_rollup((proc / "smaps_rollup").read_text())
    except (OSError, ValueError):
        return None
    return ProcessMemory(pid=pid, name=process_name(cmdline, comm), memory=memory)


def parse_stat_cpu_s(stat: str, ticks_per_s: float) -> float:
    """User plus system CPU seconds from a /proc/<pid>/stat line (fields 14 and 15, after the comm)."""
    fields = stat.rsplit(")", 1)[1].split()  # "pid (comm) state ppid ...": utime and stime are fields 12, 13 here
    return (int(fields[11]) + int(fields[12])) / ticks_per_s


def read_cpu(pids: Iterable[int]) -> dict[int, tuple[str, float]]:
    """Each live process's name and CPU seconds so far."""
    ticks = float(os.sysconf("SC_CLK_TCK"))
    found = {}
    for pid in pids:
        proc = Path(f"/proc/{pid}")
        try:
            cmdline = [part for part in (proc / "cmdline").read_bytes().decode(errors="replace").split("\0") if part]
            found[pid] = (
                process_name(cmdline, (proc / "comm").read_text().strip()),
                parse_stat_cpu_s((proc / "stat").read_text(), ticks),
            )
        except (OSError, ValueError, IndexError):
            continue
    return found


def cpu_per_call(
    before: Mapping[int, tuple[str, float]], after: Mapping[int, tuple[str, float]], calls: int
) -> list[dict[str, Any]]:
    """Where a search's CPU went: each process name's CPU ms per call over a load window (processes
    alive at both ends), busiest first."""
    spent: dict[str, float] = {}
    for pid, (name, cpu_s) in after.items():
        if pid in before:
            spent[name] = spent.get(name, 0.0) + cpu_s - before[pid][1]
    per_call = {name: round(1000 * cpu_s / max(calls, 1), 2) for name, cpu_s in spent.items()}
    ranked = sorted((item for item in per_call.items() if item[1] > 0), key=lambda item: -item[1])
    return [{"process": name, "cpu_ms_per_call": ms} for name, ms in ranked]


def parent_map() -> dict[int, int]:
    """Every live process's parent PID."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return parents


@dataclass
class MemoryTrace:
    """What the sampler saw: the peak totals (each on its own) and the last per-process snapshot."""

    samples: int = 0
    peak: Memory = field(default_factory=Memory)
    last: list[ProcessMemory] = field(default_factory=list)

    def add(self, snapshot: list[ProcessMemory]) -> None:
        now = total(snapshot)
        self.peak = Memory(max(self.peak.rss, now.rss), max(self.peak.pss, now.pss), max(self.peak.uss, now.uss))
        self.last = snapshot
        self.samples += 1

    def report(self) -> dict[str, Any]:
        end = total(self.last)
        return {
            "samples": self.samples,
            "peak_rss_gb": round(self.peak.rss / GB, 3),
            "peak_pss_gb": round(self.peak.pss / GB, 3),
            "peak_uss_gb": round(self.peak.uss / GB, 3),
            "end_rss_gb": round(end.rss / GB, 3),
            "end_pss_gb": round(end.pss / GB, 3),
            "processes": aggregate_by_name(self.last),
        }


class MemorySampler:
    """Samples the memory of the processes `pids()` names every `every_s` in a background thread."""

    def __init__(self, pids: Callable[[], Iterable[int]], every_s: float = SAMPLE_EVERY_S) -> None:
        self._pids = pids
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="memory-sampler", daemon=True)
        self.trace = MemoryTrace()

    def __enter__(self) -> MemoryTrace:
        self._thread.start()
        return self.trace

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while True:
            snapshot = [p for p in map(read_process, self._pids()) if p is not None]
            self.trace.add(snapshot)
            if self._stop.wait(self._every_s):
                return


# The two servers.


def wait_healthy(url: str, timeout_s: float, alive: Callable[[], bool] = lambda: True) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and alive():
        try:
            response = httpx.get(url, timeout=5.0)
            if response.is_success:
                body: dict[str, Any] = response.json()
                return body
        except httpx.TransportError:
            pass
        time.sleep(HEALTH_POLL_S)
    raise LoadFailed(f"{url} did not answer within {timeout_s:.0f} s")


@dataclass
class SamespaceCluster:
    """The embedded default as `make run` starts it, in a state folder and Ray temp dir of its own."""

    state_dir: Path
    temp_dir: Path
    corpus: Path
    mcp_port: int
    log: Path
    session: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.mcp_port}/mcp/"

    @property
    def env(self) -> dict[str, str]:
        return run_env(os.environ, self.state_dir, self.mcp_port)

    def start(self) -> None:

        argv = [
            sys.executable,
            "-m",
            "samespace",
            "run",
            "--state-dir",
            str(self.state_dir),
            "--repo",
            str(self.corpus),
            "--name",
            INDEX_NAME,
            "--query",
            "send a request and follow redirects",
            "--port",
            str(free_port()),
            "--dashboard-port",
            str(free_port()),
            "--mcp-port",
            str(self.mcp_port),
            "--temp-dir",
            str(self.temp_dir),
            "--wait-s",
            str(SERVE_WAIT_S),
            *(f"--ray-arg={flag}={free_port()}" for flag in FIXED_PORT_FLAGS),
        ]
        with self.log.open("wb") as log:
            try:
                done = subprocess.run(
                    argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S
                )
            finally:
                record = HeadRecord.read(self.state_dir / "ray-head.json")
                self.session = record.session if record is not None else None
        if done.returncode != 0:
            raise LoadFailed(f"samespace run exited {done.returncode}; its output: {self.log}\n{_tail(self.log)}")

    def pids(self) -> set[int]:
        from samespace.head import session_members

        if self.session is None:
            return set()
        return descendants(session_members(self.session), parent_map())

    def stop(self) -> list[int]:
        """`samespace stop`; returns the PIDs of the session (or of its temp dir) still alive after it."""
        from samespace.head import HeadRecord, processes_naming

        # Without a record `samespace stop` falls back to `ray stop`, which would stop every Ray of this user.
        if HeadRecord.read(self.state_dir / "ray-head.json") is not None:
            subprocess.run(
                [sys.executable, "-m", "samespace", "stop", "--state-dir", str(self.state_dir)],
                cwd=ROOT,
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=STOP_TIMEOUT_S,
            )
        left = self.pids() | set(processes_naming(str(self.temp_dir)))
        for pid in left:  # ours: this run's session and temp dir only
            _kill(pid)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        return sorted(left)


@dataclass
class SingleProcess:
    corpus: Path
    port: int
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp/"

    def start(self) -> None:
        argv = [sys.executable, "-m", "bench.single_process", "--repo", str(self.corpus), "--port", str(self.port)]
        argv += ["--name", INDEX_NAME]
        env = {**os.environ, **LOCAL_ENV}
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    def wait(self) -> dict[str, Any]:
        process = self.process
        if process is None:
            raise LoadFailed("the single process was never started")
        try:
            return wait_healthy(f"http://127.0.0.1:{self.port}/healthz", SINGLE_START_S, lambda: process.poll() is None)
        except LoadFailed as exc:
            raise LoadFailed(f"{exc}; its output:\n{_tail(self.log)}") from exc

    def pids(self) -> set[int]:
        if self.process is None or self.process.poll() is not None:
            return set()
        return descendants([self.process.pid], parent_map())

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


# The load.


@dataclass
class Window:
    start: float = 0.0
    deadline: float = 0.0
    ends: list[float] = field(default_factory=list)


async def run_load(
    url: str, headers: Mapping[str, str], queries: Sequence[str], clients: int, seconds: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`clients` concurrent MCP sessions calling search_code for `seconds`: the summary, and the first
    result's fields other than its hits (which legs ran, who encoded)."""
    window = Window()
    latencies: list[float] = []
    first: dict[str, Any] = {}
    ready = asyncio.Barrier(clients + 1)
    go = asyncio.Event()

    async def client(offset: int) -> None:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        timeout = httpx2.Timeout(CALL_TIMEOUT_S)
        async with (
            httpx2.AsyncClient(headers=dict(headers), timeout=timeout) as http,
            Client(streamable_http_client(url, http_client=http)) as session,
        ):
            i = offset
            for _ in range(WARMUP_CALLS):
                first.update(await _search(session, queries[i % len(queries)]))
                i += 1
            await ready.wait()
            await go.wait()
            while time.perf_counter() < window.deadline:
                t0 = time.perf_counter()
                await _search(session, queries[i % len(queries)])
                latencies.append(time.perf_counter() - t0)
                i += 1
            window.ends.append(time.perf_counter())

    async def starter() -> None:
        await ready.wait()
        window.start = time.perf_counter()
        window.deadline = window.start + seconds
        go.set()

    async with asyncio.TaskGroup() as group:
        group.create_task(starter())
        for offset in client_offsets(len(queries), clients):
            group.create_task(client(offset))
    return load_summary(latencies, max(window.ends) - window.start), first


async def _search(session: Any, query: str) -> dict[str, Any]:
    result = await session.call_tool("search_code", {"query": query, "k": K})
    if result.is_error:
        text = "\n".join(getattr(block, "text", "") for block in result.content)
        raise LoadFailed(f"search_code failed for {query!r}: {text}")
    content = result.structured_content or {}
    hits = content.get("hits", [])
    if len(hits) != K:
        raise LoadFailed(f"search_code returned {len(hits)} hits for {query!r}, expected {K}")
    return {key: value for key, value in content.items() if key != "hits"}


# The run.


def package_corpus(package: str, work: Path) -> tuple[Path, list[str], dict[str, Any]]:
    """The stripped copy of an installed package under `work`, its docstring queries and its facts
    (version, files), printed."""
    from bench.quality_corpus import build_corpus, corpus_dir, read_facts

    queries = [q.query for q in build_corpus((package,), work / "eval")]
    facts = read_facts(work / "eval")
    print(f"corpus: {package} {facts['packages'][package]}, {facts['files']} files, {len(queries)} queries")
    return corpus_dir(work / "eval"), queries, facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.search_load")
    parser.add_argument("--clients", type=int, nargs="+", default=list(DEFAULT_CLIENTS), help="client counts")
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS, help="timed window per side and count")
    parser.add_argument("--package", default=DEFAULT_PACKAGE, help="installed package whose copy is the corpus")
    args = parser.parse_args(argv)
    if min(args.clients) < 1 or args.seconds <= 0:
        parser.error("client counts must be at least 1 and --seconds positive")

    from cluster.settings import load_settings

    work = Path(tempfile.mkdtemp(prefix="samespace-load-"))
    corpus, queries, facts = package_corpus(args.package, work)
    samespace = SamespaceCluster(
        state_dir=work / "state",
        temp_dir=Path(tempfile.mkdtemp(prefix="ssl-", dir="/tmp")),  # Ray's socket paths must stay short
        corpus=corpus,
        mcp_port=free_port(),
        log=work / "samespace-run.log",
    )
    single = SingleProcess(corpus=corpus, port=free_port(), log=work / "single-process.log")
    token = load_settings().serve.expected_token()  # the cluster reads the same SAMESPACE_* environment
    headers = {"Authorization": f"Bearer {token.get_secret_value()}"} if token is not None else {}
    left: list[int] = []
    try:
        single.start()
        t0 = time.perf_counter()
        samespace.start()
        startup_s = {"samespace_run": round(time.perf_counter() - t0, 1)}
        print(f"samespace run: up and indexed in {startup_s['samespace_run']:.0f} s", flush=True)
        health = single.wait()
        startup_s["single_process"] = round(time.perf_counter() - t0, 1)  # started together; it waited its turn
        print(f"single process: up, {health['chunks']} chunks", flush=True)
        urls = {"samespace": samespace.url, "single": single.url}
        summaries: dict[str, dict[int, dict[str, Any]]] = {side: {} for side in SIDES}
        profiles: dict[str, dict[int, list[dict[str, Any]]]] = {side: {} for side in SIDES}
        pids = {"samespace": samespace.pids, "single": single.pids}
        first: dict[str, Any] = {}
        with MemorySampler(samespace.pids) as samespace_memory, MemorySampler(single.pids) as single_memory:
            for n in args.clients:
                for side in SIDES:
                    before = read_cpu(pids[side]())
                    summary, first[side] = asyncio.run(run_load(urls[side], headers, queries, n, args.seconds))
                    profiles[side][n] = cpu_per_call(before, read_cpu(pids[side]()), summary["calls"])
                    summaries[side][n] = summary
                    print(
                        f"{side:>9} x{n}: {summary['qps']:.1f} q/s, p50 {summary['p50_ms']:.1f} ms, "
                        f"p99 {summary['p99_ms']:.1f} ms ({summary['calls']} calls)",
                        flush=True,
                    )
    finally:
        try:
            single.stop()
        finally:
            left = samespace.stop()
    if left:
        raise LoadFailed(f"processes of the samespace session outlived `samespace stop` (killed): {left}")

    rows = [compare(n, summaries["samespace"][n], summaries["single"][n]) for n in args.clients]
    memory: dict[str, Any] = {"samespace": samespace_memory.report(), "single": single_memory.report()}
    memory["rss_ratio"] = round(samespace_memory.peak.rss / single_memory.peak.rss, 2)
    memory["pss_ratio"] = round(samespace_memory.peak.pss / single_memory.peak.pss, 2)
    checks = evaluate(rows, samespace_memory.peak.rss)
    results: dict[str, Any] = {
        "corpus": {
            "package": args.package,
            "version": facts["packages"][args.package],
            "files": facts["files"],
            "chunks": health["chunks"],
            "queries": len(queries),
        },
        "settings": {
            "clients": args.clients,
            "seconds": args.seconds,
            "k": K,
            "warmup_calls_per_client": WARMUP_CALLS,
            "samespace_query_cache_ttl_s": QUERY_CACHE_TTL_S,
        },
        "startup_s": startup_s,
        "samespace_search": first.get("samespace", {}),
        "load": rows,
        "memory": memory,
        "cpu_ms_per_call": {side: {str(n): profiles[side][n] for n in args.clients} for side in SIDES},
        "acceptance": [asdict(c) | {"verdict": c.verdict} for c in checks],
        "machine": {"cpus": os.cpu_count()},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / RESULTS_FILE).write_text(json.dumps(results, indent=2))
    shutil.rmtree(work, ignore_errors=True)

    print()
    print(markdown_table(rows))
    print()
    for side in SIDES:
        m = memory[side]
        print(f"{side}: peak RSS {m['peak_rss_gb']:.2f} GB, peak PSS {m['peak_pss_gb']:.2f} GB")
    print(f"RSS ratio {memory['rss_ratio']:.2f}, PSS ratio {memory['pss_ratio']:.2f} (samespace / single)\n")
    for side in SIDES:
        print(f"{side} processes at the end of the load:")
        print(memory_table(memory[side]["processes"]))
        print()
    for n in args.clients:  # the profile: where a search's CPU goes (warm-up calls included, a few per client)
        spent = ", ".join(f"{r['process']} {r['cpu_ms_per_call']:.1f}" for r in profiles["samespace"][n][:8])
        print(f"samespace CPU ms per call, {n} clients: {spent}")
    print()
    for check in checks:
        print(f"{check.verdict}  {check.name} ({check.detail})")
    print(f"\nwritten: {RESULTS / RESULTS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
