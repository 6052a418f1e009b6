"""The parts both options of `bench.graph_storage` share: the corpus, the sampled targets, the arithmetic.

Pure, no Ray, no model: the corpus is installed packages' sources walked and chunked by the
project's own `collect_repository` (every chunk carries its code-graph facts).
"""

from __future__ import annotations

import math
import os
import random
import shutil
import sysconfig
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster.build.collect import RepoChunks, collect_repository
from cluster.graph import CodeGraph, GraphRow, file_facts
from cluster.graph.nodes import DefNode
from cluster.settings import SamespaceSettings
from cluster.types import Chunk

SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])  # the running interpreter's installed packages
DEFAULT_PACKAGES = ("ray", "sympy")
COPY_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.pyi", "*.dylib", "*.dll")
NO_LIMIT = 1_000_000  # depth 1: every option answers in full, nothing truncated (the answers are compared)
WALK_LIMIT = 1000  # depth 3: the most a navigation tool returns (`GraphQuery.limit`); a full 3-hop walk over
# receiver-unknown edges (a method name shared by many classes) reaches much of the repository


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0-100) by linear interpolation between closest ranks; nan when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p90 and max of durations given in seconds, in milliseconds (3 decimals)."""
    return {
        "p50_ms": round(percentile(seconds, 50) * 1000, 3),
        "p90_ms": round(percentile(seconds, 90) * 1000, 3),
        "max_ms": round(max(seconds) * 1000, 3) if seconds else math.nan,
        "n": len(seconds),
    }


def disk_usage(path: Path) -> dict[str, int]:
    """Bytes under `path` (a file or a folder): allocated on disk (what `du` says) and apparent."""
    files = [path] if path.is_file() else [Path(root) / name for root, _, names in os.walk(path) for name in names]
    allocated = apparent = 0
    for file in files:
        stat = file.lstat()
        allocated += stat.st_blocks * 512
        apparent += stat.st_size
    return {"disk_bytes": allocated, "apparent_bytes": apparent}


def mib(count: float) -> float:
    return round(count / 2**20, 1)


def mean(values: Iterable[float]) -> float:
    """The mean, 2 decimals; 0 when empty."""
    listed = list(values)
    return round(sum(listed) / len(listed), 2) if listed else 0.0


def timed(action: Callable[[], Any]) -> tuple[Any, float]:
    """What `action` returns and how many seconds it took."""
    start = time.perf_counter()
    out = action()
    return out, time.perf_counter() - start


def latencies(items: Iterable[Any], query: Callable[[Any], Any]) -> tuple[list[float], list[Any]]:
    """Seconds per item of `query(item)`, and its answers."""
    seconds: list[float] = []
    answers: list[Any] = []
    for item in items:
        start = time.perf_counter()
        answers.append(query(item))
        seconds.append(time.perf_counter() - start)
    return seconds, answers


def rss_bytes() -> int:
    """This process's resident memory (Linux: /proc/self/statm; 0 elsewhere)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


@dataclass
class Corpus:
    root: Path
    packages: dict[str, str]  # package → version
    repo: RepoChunks
    collect_s: float
    facts_s: float  # `file_facts` alone over the same files
    texts: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def chunks(self) -> list[Chunk]:
        return self.repo.chunks

    def facts(self) -> dict[str, int]:
        chunks = self.repo.chunks
        return {
            "files": self.repo.files,
            "chunks": len(chunks),
            "chunks_with_facts": sum(1 for c in chunks if c.definitions or c.references or c.imports),
            "definitions": sum(len(c.definitions) for c in chunks),
            "references": sum(len(c.references) for c in chunks),
            "calls": sum(1 for c in chunks for r in c.references if r.call),
            "imports": sum(len(c.imports) for c in chunks),
        }


def copy_packages(packages: Sequence[str], root: Path, site: Path = SITE_PACKAGES) -> dict[str, str]:
    """Copy each package's sources under `root/<package>` (outside any git worktree: collect refuses those)."""
    import importlib.metadata

    versions: dict[str, str] = {}
    for package in packages:
        shutil.copytree(site / package, root / package, ignore=COPY_IGNORE, dirs_exist_ok=True)
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "?"
    return versions


def collect_corpus(root: Path, packages: dict[str, str]) -> Corpus:
    """Walk and chunk `root` with the facts (timed), then time `file_facts` alone over the same files."""
    repo, collect_s = timed(lambda: collect_repository(root, SamespaceSettings()))
    languages = {repo.paths[owner]: chunk.language for chunk, owner in zip(repo.chunks, repo.owners, strict=True)}
    texts = {path: (root / path).read_text(encoding="utf-8", errors="replace") for path in repo.paths}
    start = time.perf_counter()
    for path, text in texts.items():
        file_facts(path, languages.get(path, ""), text)
    return Corpus(root, packages, repo, collect_s, time.perf_counter() - start, texts)


def graph_rows(chunks: Iterable[Chunk]) -> Iterable[GraphRow]:
    return (GraphRow(c.path, c.language, c.definitions, c.references, c.imports) for c in chunks)


@dataclass(frozen=True)
class Target:
    """One definition both options are asked about: its place and the definition ids it stands for."""

    name: str
    qualified: str
    path: str
    ids: tuple[int, ...]  # the definitions at its place (overloads, a property's getter and setter)
    reached: tuple[int, ...]  # what a call reaching it may resolve to: its ids, and its class for a constructor


def target_of(graph: CodeGraph, d: DefNode) -> Target | None:
    """The target `d` gives, or None when its qualified name and path name more than one place."""
    found = graph.lookup(d.qualified, d.path)
    if {(f.path, f.qualified) for f in found} != {(d.path, d.qualified)}:
        return None
    ids = tuple(sorted(f.id for f in found))
    reached = set(ids)
    for f in found:
        if graph._is_constructor(f):  # noqa: SLF001 - the same expansion `CodeGraph.reaching` makes
            reached.update(c.id for c in graph.index.at(f.path, f.container))
    return Target(d.name, d.qualified, d.path, ids, tuple(sorted(reached)))


def sample_targets(graph: CodeGraph, called: set[int], count: int, seed: int) -> list[Target]:
    """`count` seeded definitions among those some call resolves to, each naming one place."""
    pool = sorted({graph.index.defs[i].path + "\0" + graph.index.defs[i].qualified: i for i in called}.values())
    random.Random(seed).shuffle(pool)
    out: list[Target] = []
    for def_id in pool:
        target = target_of(graph, graph.index.defs[def_id])
        if target is not None:
            out.append(target)
        if len(out) == count:
            break
    return out
