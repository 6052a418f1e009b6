"""The navigation tools over one build's graph: definitions, references, callers, callees, impact.

Pure logic, no Ray: `CodeGraph` is built from the rows of one serving build (`GraphRow`s) and
answers from memory; `cluster.search.maps.CodeMaps` keeps one per index beside its code map.
A symbol is a bare or qualified name (`Class.method`, `module.func`; `::`, `#` and `->` read as
dots) and `path` (a file, a folder, or a path's tail) picks among definitions. A symbol naming
several definitions is answered with the candidates, nothing walked: the caller picks one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from cluster.graph.answers import (
    GraphAnswer,
    GraphItem,
    GraphQuery,
    GraphTool,
    ImpactAnswer,
    ImpactFile,
    SymbolDefinition,
)
from cluster.graph.graph_index import GraphIndex
from cluster.graph.nodes import DefNode, GraphRow, RefSite
from cluster.graph.registry import SPECS
from cluster.graph.resolve import CERTAIN, RECEIVER_UNKNOWN, Resolver
from cluster.ingest import is_test_path

__all__ = ["CodeGraph"]

_SEPARATORS = re.compile(r"::|->|#|\\")


@dataclass(frozen=True)
class _Reach:
    site: RefSite
    confidence: float
    ambiguous: bool
    target: DefNode


class CodeGraph:
    """The graph of one build of index `repo`, made from the files at `commit`."""

    def __init__(self, repo: str, commit: str | None, rows: Iterable[GraphRow]) -> None:
        self.repo = repo
        self.commit = commit
        self.index = GraphIndex(rows)
        self.resolver = Resolver(self.index)
        self._incoming: dict[str, dict[int, tuple[tuple[int, float], ...]]] = {}  # name -> definition -> edges in
        self._popular: list[tuple[DefNode, int]] | None = None

    def __repr__(self) -> str:
        return f"CodeGraph(repo={self.repo!r}, definitions={len(self.index.defs)}, references={len(self.index.refs)})"

    # --- symbols ---------------------------------------------------------------------------------

    def lookup(self, symbol: str, path: str | None = None) -> list[DefNode]:
        """The definitions `symbol` names (bare or qualified), in `path` when given."""
        wanted = _SEPARATORS.sub(".", symbol.strip()).strip(".")
        name = wanted.rpartition(".")[2]
        found = [d for d in self.index.named(name) if _names(d, wanted)]
        if path:
            found = [d for d in found if _in_path(d.path, path)]
        exact = [d for d in found if wanted in (d.qualified, d.full)]
        return exact or found  # `wrap_file` is the function, not also the method `Progress.wrap_file`

    def enclosing(self, path: str, line: int) -> str | None:
        """The qualified name of the innermost definition around `line` of `path` (None: none)."""
        found = self.index.enclosing(path, line)
        return None if found is None else found.qualified

    def find_definition(self, symbol: str, path: str | None = None) -> list[SymbolDefinition]:
        return [self.definition(d) for d in self.lookup(symbol, path)]

    def definition(self, d: DefNode) -> SymbolDefinition:
        return SymbolDefinition(
            repo=self.repo,
            commit=self.commit,
            path=d.path,
            line=d.line,
            end_line=d.end_line,
            symbol=d.qualified,
            qualified=d.full,
            kind=d.kind,
            language=d.language,
        )

    def _targets(self, symbol: str, path: str | None) -> tuple[list[DefNode], GraphAnswer | None]:
        """The definitions to walk from, or the answer that stops here (none found, or ambiguous)."""
        found = self.lookup(symbol, path)
        if not found:
            where = f" in {path}" if path else ""
            return [], GraphAnswer(symbol=symbol, note=f"no definition of {symbol!r}{where} in {self.repo}")
        places = {(d.path, d.qualified) for d in found}
        if len(places) > 1:
            note = f"{symbol!r} names {len(places)} definitions: ask again with a path or a qualified name"
            return [], GraphAnswer(symbol=symbol, candidates=[self.definition(d) for d in found], note=note)
        return found, None

    # --- walking ---------------------------------------------------------------------------------

    def reaching(self, targets: list[DefNode], *, calls_only: bool) -> Iterator[_Reach]:
        """Every reference that reaches one of `targets` (a call of a class reaches its constructors)."""
        wanted = {d.id: d for d in targets}
        for d in targets:
            if self._is_constructor(d):
                for cls in self.index.at(d.path, d.container):
                    wanted.setdefault(cls.id, d)
        names = {self.index.defs[i].name for i in wanted}
        for name in list(names):
            names.update(alias for alias, target in self._aliases(name))
        for name in sorted(names):
            incoming = self._incoming_by_name(name)
            reached: dict[int, list[float]] = {}  # reference id -> [confidence, edges into wanted, first target]
            for def_id in wanted:
                for ref_id, confidence in incoming.get(def_id, ()):
                    known = reached.setdefault(ref_id, [0.0, 0, def_id])
                    known[0] += confidence
                    known[1] += 1
                    known[2] = min(known[2], def_id)
            for ref_id in sorted(reached):
                site = self.index.refs[ref_id]
                if calls_only and not site.call:
                    continue
                confidence, into_wanted, first = reached[ref_id]
                others = len(self.resolver.resolve(site)) > into_wanted
                target = wanted[int(first)]
                yield _Reach(site, min(confidence, 1.0), others or confidence < CERTAIN, target)

    def _incoming_by_name(self, name: str) -> dict[int, tuple[tuple[int, float], ...]]:
        """The references written `name`, by the definitions they resolve to, with the edge's confidence:
        resolved once per name, so a walk meeting a common name (`get`, `__init__`) again reads the
        edges into what it asks for, not every `get` of the build nor every guess of each."""
        incoming = self._incoming.get(name)
        if incoming is None:
            by_target: dict[int, list[tuple[int, float]]] = {}
            for ref_id in self.index.refs_by_name.get(name, ()):
                for def_id, confidence in self.resolver.resolve(self.index.refs[ref_id]):
                    if confidence > 0:
                        by_target.setdefault(def_id, []).append((ref_id, confidence))
            incoming = self._incoming[name] = {def_id: tuple(edges) for def_id, edges in by_target.items()}
        return incoming

    def _aliases(self, name: str) -> list[tuple[str, str]]:
        return [(b.alias, b.target) for _, b in self.index.import_sites.get(name, ()) if b.alias not in (name, "*")]

    def _is_constructor(self, d: DefNode) -> bool:
        if d.container is None:
            return False
        spec = SPECS.get(d.language)
        owner = d.container.rpartition(".")[2]
        return d.name == owner or (spec is not None and d.name in spec.constructors)

    def callers(
        self, symbol: str, path: str | None = None, depth: int = 1, limit: int = 100, min_confidence: float = 0.0
    ) -> GraphAnswer:
        targets, stop = self._targets(symbol, path)
        if stop is not None:
            return stop
        items, truncated = self._walk_callers(targets, depth, limit, min_confidence)
        return GraphAnswer(
            symbol=symbol, definitions=[self.definition(d) for d in targets], items=items, truncated=truncated
        )

    def _walk_callers(
        self, targets: list[DefNode], depth: int, limit: int, min_confidence: float
    ) -> tuple[list[GraphItem], bool]:
        """Callers breadth first; an edge under `min_confidence` is neither listed nor followed. An item's
        confidence is the product along its path."""
        items: list[GraphItem] = []
        seen_defs = {d.id for d in targets}
        seen_sites: set[int] = set()
        frontier: list[tuple[list[DefNode], float]] = [(targets, 1.0)]
        for level in range(1, depth + 1):
            following: list[tuple[list[DefNode], float]] = []
            for group, carried in frontier:
                for reach in self.reaching(group, calls_only=True):
                    if reach.site.id in seen_sites or reach.confidence < min_confidence:
                        continue
                    seen_sites.add(reach.site.id)
                    if len(items) >= limit:
                        return items, True
                    confidence = reach.confidence * carried
                    items.append(self._item(reach.site, level, confidence, reach.ambiguous, reach.target))
                    callers = [d for d in self.index.at(reach.site.path, reach.site.enclosing) if d.id not in seen_defs]
                    seen_defs.update(d.id for d in callers)
                    if callers:
                        following.append((callers, confidence))
            frontier = following
            if not frontier:
                break
        return items, False

    def callees(
        self, symbol: str, path: str | None = None, depth: int = 1, limit: int = 100, min_confidence: float = 0.0
    ) -> GraphAnswer:
        targets, stop = self._targets(symbol, path)
        if stop is not None:
            return stop
        items: list[GraphItem] = []
        seen = {d.id for d in targets}
        frontier: list[tuple[DefNode, float]] = [(d, 1.0) for d in targets]
        for level in range(1, depth + 1):
            following: list[tuple[DefNode, float]] = []
            for caller, carried in frontier:
                for ref_id in self.index.refs_by_enclosing.get((caller.path, caller.qualified), ()):
                    site = self.index.refs[ref_id]
                    if not site.call:
                        continue
                    edges = self.resolver.resolve(site)
                    if not edges and level == 1:
                        items.append(self._item(site, level, 0.0, False, None))
                    for def_id, confidence in edges:
                        if confidence < min_confidence:
                            continue
                        callee = self.index.defs[def_id]
                        items.append(self._item(site, level, confidence * carried, len(edges) > 1, callee))
                        if callee.id not in seen:
                            seen.add(callee.id)
                            following.append((callee, confidence * carried))
                    if len(items) >= limit:
                        return GraphAnswer(
                            symbol=symbol,
                            definitions=[self.definition(d) for d in targets],
                            items=items[:limit],
                            truncated=True,
                        )
            frontier = following
        return GraphAnswer(symbol=symbol, definitions=[self.definition(d) for d in targets], items=items)

    def find_references(
        self, symbol: str, path: str | None = None, limit: int = 100, min_confidence: float = 0.0
    ) -> GraphAnswer:
        targets, stop = self._targets(symbol, path)
        if stop is not None:
            return stop
        items = [
            self._item(r.site, 1, r.confidence, r.ambiguous, r.target, call=r.site.call)
            for r in self.reaching(targets, calls_only=False)
            if r.confidence >= min_confidence
        ]
        items.extend(self._import_items(targets))
        items.sort(key=lambda item: (-item.confidence, item.path, item.line))
        return GraphAnswer(
            symbol=symbol,
            definitions=[self.definition(d) for d in targets],
            items=items[:limit],
            truncated=len(items) > limit,
        )

    def _import_items(self, targets: list[DefNode]) -> list[GraphItem]:
        ids = {d.id for d in targets}
        out: list[GraphItem] = []
        for d in targets:
            for path, binding in self.index.import_sites.get(d.name, ()):
                language = self.index.language_by_path.get(path, d.language)
                reached = [x for x in self.resolver.imported(binding.target, language) if x.id in ids]
                if reached:
                    site = RefSite(-1, path, language, binding.alias, binding.line, None, None, False)
                    out.append(self._item(site, 1, CERTAIN, False, reached[0], call=False))
        return out

    def impact(
        self, symbol: str, path: str | None = None, depth: int = 3, limit: int = 200, min_confidence: float = 0.0
    ) -> ImpactAnswer:
        targets, stop = self._targets(symbol, path)
        if stop is not None:
            return ImpactAnswer(**stop.model_dump())
        items, truncated = self._walk_callers(targets, depth, limit, min_confidence)
        mentions = [
            self._item(r.site, 1, r.confidence, r.ambiguous, r.target, call=False)
            for r in self.reaching(targets, calls_only=False)
            if not r.site.call and r.confidence >= min_confidence
        ]
        files: dict[str, tuple[int, int]] = {}
        for item in [*items, *mentions]:
            known = files.get(item.path)
            files[item.path] = (min(item.depth, known[0]), known[1] + 1) if known else (item.depth, 1)
        ranked = sorted(files.items(), key=lambda kv: (kv[1][0], -kv[1][1], kv[0]))
        impact_files = [
            ImpactFile(repo=self.repo, commit=self.commit, path=p, depth=d, sites=n) for p, (d, n) in ranked
        ]
        return ImpactAnswer(
            symbol=symbol,
            definitions=[self.definition(d) for d in targets],
            items=items,
            truncated=truncated,
            files=impact_files,
            tests=[f for f in impact_files if is_test_path(f.path)],
        )

    def answer(self, query: GraphQuery) -> GraphAnswer:
        """The answer of one navigation tool (`query.repo` is the caller's business: this is one index)."""
        if query.tool is GraphTool.DEFINITION:
            found = self.find_definition(query.symbol, query.path)
            note = None if found else f"no definition of {query.symbol!r} in {self.repo}"
            return GraphAnswer(symbol=query.symbol, definitions=found[: query.limit], note=note)
        least = query.least
        if query.tool is GraphTool.REFERENCES:
            return self.find_references(query.symbol, query.path, query.limit, least)
        if query.tool is GraphTool.CALLERS:
            return self.callers(query.symbol, query.path, query.walk, query.limit, least)
        if query.tool is GraphTool.CALLEES:
            return self.callees(query.symbol, query.path, query.walk, query.limit, least)
        return self.impact(query.symbol, query.path, query.walk, query.limit, least)

    def most_called(self, count: int = 10) -> list[tuple[SymbolDefinition, int]]:
        """The definitions with the most call sites that surely or probably reach them."""
        if self._popular is None:
            calls: Counter[int] = Counter()
            for site in self.index.refs:
                if site.call:
                    for def_id, confidence in self.resolver.resolve(site):
                        if confidence >= RECEIVER_UNKNOWN:
                            calls[def_id] += 1
            self._popular = [(self.index.defs[i], n) for i, n in calls.most_common()]
        return [(self.definition(d), n) for d, n in self._popular[:count]]

    def _item(
        self,
        site: RefSite,
        depth: int,
        confidence: float,
        ambiguous: bool,
        target: DefNode | None,
        *,
        call: bool = True,
    ) -> GraphItem:
        return GraphItem(
            repo=self.repo,
            commit=self.commit,
            path=site.path,
            line=site.line,
            symbol=site.enclosing,
            depth=depth,
            confidence=round(confidence, 4),
            ambiguous=ambiguous,
            call=call,
            target=target.qualified if target else None,
            target_path=target.path if target else None,
        )


def _names(d: DefNode, wanted: str) -> bool:
    """True when `wanted` (dotted) names `d`: its bare name, its qualified name, or a dotted tail of
    its module-qualified name."""
    if wanted in (d.name, d.qualified, d.full):
        return True
    return d.full.endswith("." + wanted)


def _in_path(path: str, wanted: str) -> bool:
    wanted = wanted.strip().strip("/")
    return path == wanted or path.startswith(wanted + "/") or path.endswith("/" + wanted)
