"""bench.quality's report: the markdown tables, each row's deltas against the function-dense script
and the hybrid row, one set's JSON, and the code version the numbers were measured on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.baselines import FUNCTION_DENSE
from bench.quality_corpus import PACKAGE_SETS
from bench.quality_rows import BASELINE_MARK, HYBRID, SetRun, baseline_report

__all__ = [
    "code_version",
    "delta_points",
    "delta_table",
    "deltas",
    "format_points",
    "set_report",
    "sets_line",
    "table",
]


def table(lines: list[tuple[str, dict[str, Any]]]) -> str:
    out = ["| row | recall@1 | recall@5 | recall@10 | MRR@10 | p50 ms |", "|---|---|---|---|---|---|"]
    for label, m in lines:
        if not m:
            out.append(f"| {label} | n/a | n/a | n/a | n/a | n/a |")
        else:
            out.append(
                f"| {label} | {m['recall@1']:.3f} | {m['recall@5']:.3f} | {m['recall@10']:.3f} | "
                f"{m['mrr@10']:.3f} | {m['latency']['p50_ms']:.1f} |"
            )
    return "\n".join(out)


def delta_points(value: float, reference: float) -> float:
    """value - reference in percentage points, to one decimal (0.461 vs 0.387 → 7.4)."""
    points = round(100 * (value - reference), 1)
    return points if points != 0 else 0.0  # never -0.0


def format_points(points: float) -> str:
    return f"{points:+.1f}"


def deltas(lines: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each row against "function dense (script)" (points) and its p50 against the hybrid row (ratio)."""
    by_label = {label.removesuffix(BASELINE_MARK): m for label, m in lines}
    reference = by_label.get(FUNCTION_DENSE) or {}
    hybrid_p50 = (by_label.get(HYBRID) or {}).get("latency", {}).get("p50_ms")
    out = []
    for label, m in lines:
        if not m:
            out.append({"row": label, "available": False})
            continue
        entry: dict[str, Any] = {"row": label, "available": True}
        for key in ("recall@1", "recall@10", "mrr@10"):
            entry[f"{key}_points"] = delta_points(m[key], reference[key]) if reference else None
        p50 = m["latency"]["p50_ms"]
        entry["p50_vs_hybrid"] = round(p50 / hybrid_p50, 3) if hybrid_p50 else None
        out.append(entry)
    return out


def delta_table(rows: list[dict[str, Any]]) -> str:
    def points(value: float | None) -> str:
        return "n/a" if value is None else format_points(value)

    out = [
        f"| row | Δ recall@1 | Δ recall@10 | Δ MRR@10 | p50 ÷ {HYBRID} |",
        "|---|---|---|---|---|",
    ]
    for d in rows:
        if not d["available"]:
            out.append(f"| {d['row']} | n/a | n/a | n/a | n/a |")
            continue
        ratio = d["p50_vs_hybrid"]
        ratio = "n/a" if ratio is None else "<0.01×" if ratio < 0.01 else f"{ratio:.2f}×"  # the in-process BM25
        out.append(
            f"| {d['row']} | {points(d['recall@1_points'])} | {points(d['recall@10_points'])} | "
            f"{points(d['mrr@10_points'])} | {ratio} |"
        )
    return "\n".join(out)


def set_report(run: SetRun) -> dict[str, Any]:
    lines = run.lines()
    return {
        "packages": list(run.packages),
        "repo": run.repo,
        "corpus": run.facts,
        "baselines": [baseline_report(b) for b in run.baselines],
        "rows": [row.report() for row in run.rows],
        "deltas": deltas(lines),
    }


def sets_line() -> str:
    dev, test = PACKAGE_SETS["dev"], PACKAGE_SETS["test"]
    return f"dev (tuning) packages: {', '.join(dev)}; test (held out, never tuned on) packages: {', '.join(test)}"


def code_version() -> dict[str, Any]:
    """The commit and uncommitted paths the numbers were measured on (search code changes often)."""
    import subprocess

    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {"commit": git("rev-parse", "--short", "HEAD"), "uncommitted": git("status", "--short").splitlines()}
