"""bench.quality's rows: what each row asks search_code (its mode, rerank or not), read against the
arguments search_code declares, and what each row and each package set collects."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.baselines import BaselineRun
from bench.quality_corpus import Query, mrr_at, recall_at
from bench.run import latency_summary

__all__ = [
    "BASELINE_MARK",
    "HYBRID",
    "RERANK_NOTE",
    "ROWS",
    "STAND_IN",
    "Interface",
    "K",
    "Row",
    "RowSpec",
    "SetRun",
    "baseline_report",
    "metrics",
    "plan_row",
    "read_interface",
    "repo_name",
    "with_tests",
]

K = 10
RERANK_NOTE = "rerank = fake (MiniLM cosine), not a cross-encoder"
HYBRID = "hybrid"  # the row the p50 ratios are taken against (today's default search)
BASELINE_MARK = " ²"  # marks the same-run baselines in the tables


def repo_name(set_name: str) -> str:
    """The index each package set is searched in: one function spells it."""
    return f"quality-{set_name}"


@dataclass(frozen=True)
class RowSpec:
    label: str
    mode: str | None  # None: no `mode` argument, search_code's own default
    rerank: bool
    tests: str | None = None  # search_code's `tests` argument (None: not sent, its default)


def with_tests(specs: Sequence[RowSpec], values: Sequence[str] | None) -> list[RowSpec]:
    """Each row once per `tests` value asked (`--tests include exclude`), labelled with it; as they are
    when none is asked."""
    if not values:
        return list(specs)
    return [replace(spec, label=f"{spec.label} [tests={value}]", tests=value) for spec in specs for value in values]


ROWS = (
    RowSpec("BM25 / keyword", "keyword", False),
    RowSpec("dense", "dense", False),
    RowSpec(HYBRID, "hybrid", False),
    RowSpec("default", None, False),
    RowSpec("hybrid + rerank", "hybrid", True),
)
STAND_IN = RowSpec("dense + rerank", "dense", True)  # only while hybrid is not offered


@dataclass
class Interface:
    """What search_code declares: its `mode` values (None: no `mode` argument), their default, `rerank`."""

    modes: list[str] | None
    rerank: bool
    schema: dict[str, Any]
    default_mode: str | None = None  # the schema's default for `mode`, when it declares one


def metrics(ranks: list[int | None], latencies_s: list[float]) -> dict[str, Any]:
    """The reported figures of one row (MCP or baseline), from its ranks and per-query latencies."""
    return {
        "recall@1": round(recall_at(ranks, 1), 4),
        "recall@5": round(recall_at(ranks, 5), 4),
        "recall@10": round(recall_at(ranks, 10), 4),
        "mrr@10": round(mrr_at(ranks, K), 4),
        "latency": latency_summary(latencies_s),
    }


@dataclass
class Row:
    spec: RowSpec
    arguments: dict[str, Any] | None  # None: unavailable
    notes: list[str] = field(default_factory=list)
    expected_mode: str | None = None  # the `mode` an answer must say ran (None: not known, not checked)
    ranks: list[int | None] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)
    errors: int = 0
    reranked: int = 0
    other_mode: int = 0  # answers whose `mode` says other legs ran than expected (e.g. degraded to keyword)
    modes_answered: Counter[str] = field(default_factory=Counter)
    empty: int = 0  # answers with no hit at all

    @property
    def available(self) -> bool:
        return self.arguments is not None and bool(self.ranks)

    def metrics(self) -> dict[str, Any]:
        return metrics(self.ranks, self.latencies_s) if self.available else {}

    def report(self) -> dict[str, Any]:
        return {
            "row": self.spec.label,
            "mode": self.spec.mode,
            "rerank": self.spec.rerank,
            "available": self.available,
            "arguments": self.arguments,
            "notes": self.notes,
            "errors": self.errors,
            "reranked_calls": self.reranked,
            "modes_answered": dict(self.modes_answered),
            "other_mode_calls": self.other_mode,
            "empty_answers": self.empty,
            **self.metrics(),
            "ranks": self.ranks,
        }


def baseline_report(run: BaselineRun) -> dict[str, Any]:
    return {
        "row": run.label,
        "same_run_baseline": True,
        "units": run.units,
        "index_s": run.index_s,
        **metrics(run.ranks, run.latencies_s),
        "ranks": run.ranks,
    }


@dataclass
class SetRun:
    """One package set: its corpus, queries, baselines and MCP rows."""

    name: str
    packages: tuple[str, ...]
    work: Path
    queries: list[Query]
    facts: dict[str, Any]
    baselines: list[BaselineRun] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)

    @property
    def repo(self) -> str:
        return repo_name(self.name)

    def lines(self) -> list[tuple[str, dict[str, Any]]]:
        """(label, metrics) of every row, baselines first; metrics {} when the row is unavailable."""
        out = [(run.label + BASELINE_MARK, metrics(run.ranks, run.latencies_s)) for run in self.baselines]
        for row in self.rows:
            label = row.spec.label + (" ¹" if row.spec.rerank else "") + (" (stand-in)" if row.spec is STAND_IN else "")
            out.append((label, row.metrics()))
        return out


# --- search_code's interface ------------------------------------------------------------------


def _enum_values(prop: Any) -> list[str]:
    """Enum values anywhere in a JSON-schema property (enum, anyOf/oneOf, const)."""
    if isinstance(prop, dict):
        values = [str(v) for v in prop.get("enum", [])] + ([str(prop["const"])] if "const" in prop else [])
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in prop.get(key, []):
                values += _enum_values(sub)
        return values
    return []


def read_interface(schema: dict[str, Any]) -> Interface:
    props = schema.get("properties", {})
    modes = None
    default_mode = None
    if "mode" in props:
        modes = _enum_values(props["mode"]) or [spec.mode for spec in ROWS if spec.mode]  # no enum: ask and see
        default = props["mode"].get("default") if isinstance(props["mode"], dict) else None
        default_mode = str(default) if default is not None else None
    return Interface(modes=modes, rerank="rerank" in props, schema=props, default_mode=default_mode)


def plan_row(spec: RowSpec, interface: Interface, repo: str) -> Row:
    """The arguments a row sends besides the query, or why it cannot run (its notes say either way)."""
    args: dict[str, Any] = {"k": K, "repo": repo}
    notes: list[str] = []
    expected = spec.mode
    if spec.mode is None:
        expected = interface.default_mode
        declared = f"declared default {expected!r}" if expected else "no declared default: the answered mode is noted"
        notes.append(f"no `mode` argument: search_code's default ({declared})")
    elif interface.modes is None:
        if spec.mode != "dense":
            return Row(spec, None, [f"unavailable: search_code has no `mode` argument ({spec.mode} not offered)"])
        notes.append(
            "search_code has no `mode` argument: this row is its default path (dense, on servers without `mode`)"
        )
    elif spec.mode not in interface.modes:
        return Row(spec, None, [f"unavailable: mode {spec.mode!r} not among {interface.modes}"])
    else:
        args["mode"] = spec.mode
    if interface.rerank:
        args["rerank"] = spec.rerank
    elif spec.rerank:
        notes.append(
            "search_code has no `rerank` argument: called without it once a reranker serves "
            "(the service reranks by default)"
        )
    else:
        notes.append("search_code has no `rerank` argument: called without it before any reranker serves")
    if spec.tests is not None:
        if "tests" not in interface.schema:
            return Row(spec, None, [f"unavailable: search_code has no `tests` argument (tests={spec.tests})"])
        args["tests"] = spec.tests
    if spec.rerank:
        notes.append(RERANK_NOTE)
    return Row(spec, args, notes, expected_mode=expected)
