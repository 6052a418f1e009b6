"""bench.soak's memory verdicts: the processes seen at each minute, their RSS per minute, and each
process's (and each name's) RSS at the last minute against the baseline minute."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.process_memory import MB, ProcessMemory, aggregate_by_name

__all__ = [
    "GROWTH_TOLERANCE",
    "MinuteSample",
    "Verdict",
    "minute_markdown",
    "minute_table",
    "name_verdicts",
    "overall",
    "process_verdicts",
    "verdict_markdown",
    "within_growth",
]

GROWTH_TOLERANCE = 0.10


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
