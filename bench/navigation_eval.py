"""bench.navigation's accuracy part: one package's sampled functions, our graph's answers against
jedi's (bench.navigation_truth), and grep's beside them; P/R/F1 micro-averaged over (definition, site) pairs."""

from __future__ import annotations

import random
import shutil
import signal
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from bench.navigation_truth import CONSTRUCTORS, Grep, JediTruth, Site, Target, import_lines
from bench.quality_corpus import package_root, package_version
from cluster.build.collect import RepoChunks, collect_repository
from cluster.graph import CodeGraph, DefNode, GraphAnswer, GraphRow
from cluster.settings import SamespaceSettings

__all__ = [
    "CURVE",
    "FUNCTION_KINDS",
    "Counts",
    "PackageResult",
    "Scored",
    "build_graph",
    "copy_packages",
    "eligible",
    "evaluate_package",
    "prf",
    "sample",
    "scored_sites",
    "target_of",
]

FUNCTION_KINDS = frozenset({"function", "method"})
CURVE = (1.0, 0.5, 0.25, 0.0)  # minimum confidences the report always shows
LIMIT = 1000
IGNORED = ("__pycache__", "*.pyc")

Scored = dict[Site, float]  # a site and the highest confidence any of our items at it has


@dataclass
class Counts:
    """True positives, false positives and false negatives, summed over (definition, site) pairs."""

    tp: int = 0
    fp: int = 0
    fn: int = 0

    def add(self, ours: set[Site], truth: set[Site]) -> None:
        self.tp += len(ours & truth)
        self.fp += len(ours - truth)
        self.fn += len(truth - ours)

    def merge(self, other: Counts) -> None:
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn


def prf(counts: Counts) -> dict[str, float | int | None]:
    """Micro-averaged precision, recall and F1 (None where a ratio is 0/0)."""
    precision = counts.tp / (counts.tp + counts.fp) if counts.tp + counts.fp else None
    recall = counts.tp / (counts.tp + counts.fn) if counts.tp + counts.fn else None
    if precision is None or recall is None:
        f1 = None
    else:
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "tp": counts.tp, "fp": counts.fp, "fn": counts.fn}


# --- the corpus and our graph -------------------------------------------------------------------


def copy_packages(packages: Sequence[str], dest: Path) -> Path:
    """Each installed package's folder copied under `dest` (outside any git checkout): the root to index."""
    dest.mkdir(parents=True, exist_ok=True)
    for package in packages:
        shutil.copytree(package_root(package), dest / package, ignore=shutil.ignore_patterns(*IGNORED))
    return dest


def rows_of(found: RepoChunks) -> list[GraphRow]:
    return [GraphRow(c.path, c.language, c.definitions, c.references, c.imports) for c in found.chunks]


def build_graph(root: Path, name: str) -> tuple[CodeGraph, RepoChunks, float]:
    """The graph a reindex of `root` would serve, and the seconds collect_repository took."""
    t0 = time.perf_counter()
    found = collect_repository(root, SamespaceSettings())
    collect_s = time.perf_counter() - t0
    return CodeGraph(name, None, rows_of(found)), found, collect_s


def eligible(graph: CodeGraph) -> list[DefNode]:
    """Every function and method of the graph, once per (path, qualified name), in file order."""
    seen: set[tuple[str, str]] = set()
    out = []
    for d in sorted(graph.index.defs, key=lambda d: (d.path, d.line)):
        if d.kind in FUNCTION_KINDS and d.language == "python" and (d.path, d.qualified) not in seen:
            seen.add((d.path, d.qualified))
            out.append(d)
    return out


def sample(defs: Sequence[DefNode], n: int, seed: int) -> list[DefNode]:
    """A seeded sample of n (all when there are fewer), in file order."""
    if len(defs) <= n:
        return list(defs)
    picked = random.Random(seed).sample(range(len(defs)), n)
    return [defs[i] for i in sorted(picked)]


def target_of(graph: CodeGraph, d: DefNode) -> Target:
    owner = None
    if d.container is not None and d.name in CONSTRUCTORS:
        classes = [c for c in graph.index.at(d.path, d.container) if c.kind == "class"]
        if classes:
            owner = (classes[0].line, classes[0].name)
    return Target(d.path, d.line, d.name, owner)


def scored_sites(answer: GraphAnswer, drop: set[Site] | None = None) -> Scored:
    out: Scored = {}
    for item in answer.items:
        site = (item.path, item.line)
        if drop is None or site not in drop:
            out[site] = max(item.confidence, out.get(site, 0.0))
    return out


def at_least(scored: Scored, threshold: float) -> set[Site]:
    return {site for site, confidence in scored.items() if confidence >= threshold}


# --- one package --------------------------------------------------------------------------------


@dataclass
class PackageResult:
    """One package's counts: ours at each threshold, grep's, and what could not be measured."""

    package: str
    version: str
    functions: int = 0
    sampled: int = 0
    measured: int = 0
    impact_measured: int = 0
    jedi_failed: list[str] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)  # our lookup gave candidates or nothing
    truncated: int = 0
    callers: dict[float, Counts] = field(default_factory=dict)
    references: dict[float, Counts] = field(default_factory=dict)
    impact: dict[float, Counts] = field(default_factory=dict)
    grep_callers: Counts = field(default_factory=Counts)
    grep_references: Counts = field(default_factory=Counts)
    truth_calls: int = 0
    truth_references: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


class _Timeout(Exception):
    pass


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise _Timeout in this (main) thread after `seconds` (jedi can take long on one name). No
    deadline when `seconds` <= 0 or a timer already runs (pytest-timeout's: it is left alone)."""
    if seconds <= 0 or signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        yield
        return

    def ring(signum: int, frame: FrameType | None) -> None:
        raise _Timeout(f"over {seconds:.0f}s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def evaluate_package(
    package: str,
    work: Path,
    *,
    n: int,
    impact_n: int,
    seed: int,
    thresholds: Sequence[float],
    jedi_timeout_s: float = 120.0,
    root: Path | None = None,
) -> PackageResult:
    """Copy `package` under `work` (or use `root` as is), sample its functions, score ours and grep against jedi."""
    t0 = time.perf_counter()
    if root is None:
        root = copy_packages([package], work / package)
    graph, _, _ = build_graph(root, package)
    defs = eligible(graph)
    picked = sample(defs, n, seed)
    impact_ids = {d.id for d in sample(picked, impact_n, seed + 1)}
    result = PackageResult(package, package_version(package), functions=len(defs), sampled=len(picked))
    for table in (result.callers, result.references, result.impact):
        table.update({t: Counts() for t in thresholds})
    jedi_truth = JediTruth(root)
    grep = Grep(root)
    imports = {rel: import_lines("\n".join(jedi_truth.lines(rel))) for rel in grep.files}
    import_sites = {(rel, line) for rel, lines in imports.items() for line in lines}
    result.seconds["graph"] = round(time.perf_counter() - t0, 2)
    jedi_s = 0.0
    for d in picked:
        target = target_of(graph, d)
        label = f"{d.path}:{d.line} {d.qualified}"
        t1 = time.perf_counter()
        try:
            with _deadline(jedi_timeout_s):
                truth = jedi_truth.truth(target)
                chain = jedi_truth.transitive_calls(target, 3) if d.id in impact_ids else None
        except Exception as exc:  # noqa: BLE001 - jedi failing on one name is counted, never fatal
            result.jedi_failed.append(f"{label}: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        finally:
            jedi_s += time.perf_counter() - t1
        result.measured += 1
        result.truth_calls += len(truth.calls)
        result.truth_references += len(truth.references)
        callers = graph.callers(d.qualified, path=d.path, depth=1, limit=LIMIT)
        references = graph.find_references(d.qualified, path=d.path, limit=LIMIT)
        if not callers.definitions:
            result.unanswered.append(f"{label}: {callers.note}")
        result.truncated += callers.truncated + references.truncated
        ours_calls = scored_sites(callers)
        ours_refs = scored_sites(references, drop=import_sites)  # jedi's references hold no import lines either
        for t in thresholds:
            result.callers[t].add(at_least(ours_calls, t), truth.calls)
            result.references[t].add(at_least(ours_refs, t), truth.references)
        names = [d.name] + ([target.owner[1]] if target.owner else [])
        result.grep_callers.add(grep.calls(names), truth.calls)
        result.grep_references.add(grep.references(names), truth.references)
        if chain is not None:
            result.impact_measured += 1
            for t in thresholds:  # each edge must reach t (an item's confidence is the product along its path)
                impact = graph.impact(d.qualified, path=d.path, depth=3, limit=LIMIT, min_confidence=t)
                result.truncated += impact.truncated
                result.impact[t].add(set(scored_sites(impact)), chain)
    result.seconds["jedi"] = round(jedi_s, 2)
    result.seconds["total"] = round(time.perf_counter() - t0, 2)
    return result


def summary(results: Sequence[PackageResult], thresholds: Sequence[float]) -> dict[str, Any]:
    """One set's micro-averaged P/R/F1 (ours at each threshold, grep) over its packages."""

    def total(pick: Any) -> Counts:
        out = Counts()
        for r in results:
            out.merge(pick(r))
        return out

    return {
        "callers": {str(t): prf(total(lambda r, t=t: r.callers[t])) for t in thresholds},
        "references": {str(t): prf(total(lambda r, t=t: r.references[t])) for t in thresholds},
        "impact_depth3": {str(t): prf(total(lambda r, t=t: r.impact[t])) for t in thresholds},
        "grep_callers": prf(total(lambda r: r.grep_callers)),
        "grep_references": prf(total(lambda r: r.grep_references)),
    }
