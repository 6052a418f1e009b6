"""A repository at a glance, for the `repo_overview` tool: files, chunks, languages, top folders,
the main types, the most referenced definitions and the head of the root README.

A definition's references are the chunks outside it that mention its last name as a whole word.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from cluster.index.tokens import IDENTIFIER
from cluster.search.models import (
    MOST_REFERENCED,
    README_MAX_CHARS,
    TOP_DIRS,
    TOP_TYPES,
    CodeEntry,
    ReferencedSymbol,
    RepoOverview,
    TypeEntry,
)
from cluster.search.units import Unit, last_component

__all__ = ["TYPE_KINDS", "build_overview"]

TYPE_KINDS = frozenset({"class", "struct", "interface", "trait", "record"})
_README_NAMES = ("README.md", "README", "README.rst", "README.markdown", "README.txt")


def build_overview(
    repo: str, entries: Sequence[CodeEntry], by_path: Mapping[str, list[int]], units: Sequence[Unit]
) -> RepoOverview:
    """The overview of one map: `entries` sorted, `by_path` their indexes per file, `units` its units."""
    languages: Counter[str] = Counter()
    dirs: Counter[str] = Counter()
    for path, indexes in by_path.items():
        languages[entries[indexes[0]].language] += 1
        dirs[path.split("/", 1)[0] if "/" in path else "."] += 1
    references = _reference_counts(entries, units)
    types: dict[tuple[str, str], TypeEntry] = {}
    for unit in units:
        if unit.symbol is None or unit.kind not in TYPE_KINDS or (unit.symbol, unit.path) in types:
            continue
        types[(unit.symbol, unit.path)] = TypeEntry(
            symbol=unit.symbol,
            kind=unit.kind,
            path=unit.path,
            line=unit.start_line,
            references=references.get(last_component(unit.names[0], unit.kind), (0, 0, unit))[0],
        )
    top_types = sorted(types.values(), key=lambda t: (-t.references, t.path, t.line))[:TOP_TYPES]
    referenced = sorted(
        (
            ReferencedSymbol(
                symbol=unit.symbol or name,
                kind=unit.kind,
                path=unit.path,
                line=unit.start_line,
                references=count,
                definitions=definitions,
            )
            for name, (count, definitions, unit) in references.items()
            if count > 0
        ),
        key=lambda r: (-r.references, r.path, r.line, r.symbol),
    )[:MOST_REFERENCED]
    return RepoOverview(
        repo=repo,
        files=len(by_path),
        chunks=len(entries),
        languages=dict(sorted(languages.items(), key=lambda kv: (-kv[1], kv[0]))),
        top_dirs=dict(sorted(dirs.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_DIRS]),
        top_types=top_types,
        most_referenced=referenced,
        readme=_readme(entries, by_path),
    )


def _reference_counts(entries: Sequence[CodeEntry], units: Sequence[Unit]) -> dict[str, tuple[int, int, Unit]]:
    """last name → (chunks outside its definitions that mention it as a whole word,
    number of definitions, the first definition by rank/path/line)."""
    by_name: dict[str, list[Unit]] = defaultdict(list)
    for unit in units:
        if unit.symbol is None or unit.kind == "section":
            continue
        for name in unit.names:
            last = last_component(name, unit.kind)
            if len(last) >= 3 and IDENTIFIER.fullmatch(last) and not (last.startswith("__") and last.endswith("__")):
                by_name[last].append(unit)
    if not by_name:
        return {}
    names = set(by_name)
    mentions: list[set[str]] = [set(IDENTIFIER.findall(entry.text)) & names for entry in entries]
    frequency: Counter[str] = Counter(name for found in mentions for name in found)
    counts: dict[str, tuple[int, int, Unit]] = {}
    for name, named in by_name.items():
        own = {index for unit in named for index in unit.chunks}
        count = frequency[name] - sum(1 for index in own if name in mentions[index])
        first = min(named, key=lambda u: (u.rank, u.path, u.start_line))
        counts[name] = (count, len(named), first)
    return counts


def _readme(entries: Sequence[CodeEntry], by_path: Mapping[str, list[int]]) -> str | None:
    """The head of the root README (its chunks' lines stitched back together), if one is indexed."""
    candidates = {path.lower(): path for path in by_path if "/" not in path}
    for name in _README_NAMES:
        path = name if name in by_path else candidates.get(name.lower())
        if path is None:
            continue
        lines: dict[int, str] = {}
        for entry in (entries[i] for i in by_path[path]):
            for offset, text in enumerate(entry.text.split("\n")):
                lines.setdefault(entry.start_line + offset, text)
        first, last = min(lines), max(lines)
        text = "\n".join(lines.get(number, "") for number in range(first, last + 1))
        return text[:README_MAX_CHARS]
    return None
