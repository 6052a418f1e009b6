"""The memory and CPU of a tree of processes, read from /proc: what bench.search_load and bench.soak measure.

RSS counts shared pages once per process; PSS splits them among the processes that share them; USS
is a process's private pages only (/proc/<pid>/smaps_rollup). Processes are named as a person
reads them (`ray::IndexActor`, `raylet`, `-m bench.single_process`), and same-name processes summed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "GB",
    "MB",
    "Memory",
    "MemorySampler",
    "MemoryTrace",
    "ProcessMemory",
    "aggregate_by_name",
    "cpu_per_call",
    "descendants",
    "memory_table",
    "parent_map",
    "parse_smaps_rollup",
    "parse_stat_cpu_s",
    "process_name",
    "read_cpu",
    "read_process",
    "read_processes",
    "total",
]

SAMPLE_EVERY_S = 0.5
GB = 1e9
MB = 1e6
MAX_CODE_CHARS = 60  # of a `python -c` process's first statement, in its name


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


def memory_table(rows: Sequence[Mapping[str, Any]]) -> str:
    lines = ["| process | count | RSS MB | PSS MB | USS MB |", "|---|---|---|---|---|"]
    lines += [
        f"| {r['process']} | {r['count']} | {r['rss_mb']:.0f} | {r['pss_mb']:.0f} | {r['uss_mb']:.0f} |" for r in rows
    ]
    return "\n".join(lines)


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


def read_processes(pids: Iterable[int]) -> list[ProcessMemory]:
    """The name and memory of each of `pids` still alive."""
    return [p for p in map(read_process, pids) if p is not None]


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
            snapshot = read_processes(self._pids())
            self.trace.add(snapshot)
            if self._stop.wait(self._every_s):
                return
