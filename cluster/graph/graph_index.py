"""One build's definitions, references and imports, indexed for the resolver and the queries.

Built once from the rows of a build (`GraphRow`s, in any order; a fact shown by two rows counts
once) and read-only after: the index actor keeps one per serving build beside its code map.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import PurePosixPath

from cluster.graph.modules import module_of
from cluster.graph.nodes import DefNode, GraphRow, RefSite
from cluster.graph.registry import SPECS
from cluster.graph.spec import CLASS_KINDS, ModuleStyle
from cluster.types import ImportBinding


class GraphIndex:
    """Definitions by name, place and container; references by name and enclosing definition;
    each file's import bindings; each module's files."""

    def __init__(self, rows: Iterable[GraphRow]) -> None:
        self.defs: list[DefNode] = []
        self.refs: list[RefSite] = []
        self.by_name: dict[str, list[int]] = defaultdict(list)
        self.by_place: dict[tuple[str, str], list[int]] = defaultdict(list)  # (path, qualified)
        self.members: dict[tuple[str, str], list[int]] = defaultdict(list)  # (path, container qualified)
        self.refs_by_name: dict[str, list[int]] = defaultdict(list)
        self.refs_by_enclosing: dict[tuple[str, str | None], list[int]] = defaultdict(list)
        self.imports: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        self.paths_by_module: dict[str, list[str]] = defaultdict(list)
        self.import_sites: dict[str, list[tuple[str, ImportBinding]]] = defaultdict(list)  # by the name imported
        self.module_by_path: dict[str, str] = {}
        self.language_by_path: dict[str, str] = {}
        self._matching: dict[str, list[str]] = {}  # modules_matching's answers (the index is read-only)
        self._in_file: dict[str, list[DefNode]] | None = None  # per path, by first line (`enclosing`)
        seen_defs: set[tuple[str, str, str, int]] = set()
        seen_refs: set[tuple[str, str, int, str | None, bool]] = set()
        for row in rows:
            self._file(row.path, row.language)
            for d in row.definitions:
                if (key := (row.path, d.qualified, d.kind, d.line)) not in seen_defs:
                    seen_defs.add(key)
                    self._add_def(row, d.name, d.qualified, d.kind, (d.line, d.end_line), d.bases)
            for r in row.references:
                if (rkey := (row.path, r.name, r.line, r.qualifier, r.call)) not in seen_refs:
                    seen_refs.add(rkey)
                    place = (row.path, row.language, r.name, r.line)
                    self._add_ref(RefSite(len(self.refs), *place, r.qualifier, r.enclosing, r.call))
            for binding in row.imports:
                targets = self.imports[row.path][binding.alias]
                if binding.target not in targets:
                    targets.append(binding.target)
                    self.import_sites[binding.target.rpartition(".")[2]].append((row.path, binding))
        self.by_name = dict(self.by_name)
        self.refs_by_name = dict(self.refs_by_name)

    def _file(self, path: str, language: str) -> None:
        if path in self.module_by_path:
            return
        spec = SPECS.get(language)
        module = module_of(path, spec.module_style if spec else ModuleStyle.FILE)
        self.module_by_path[path] = module
        self.language_by_path[path] = language
        self.paths_by_module[module].append(path)

    def _add_def(
        self, row: GraphRow, name: str, qualified: str, kind: str, lines: tuple[int, int], bases: tuple[str, ...]
    ) -> None:
        node = DefNode(
            len(self.defs), row.path, row.language, self.module_by_path[row.path], name, qualified, kind, *lines, bases
        )
        self.defs.append(node)
        self.by_name[name].append(node.id)
        self.by_place[(row.path, qualified)].append(node.id)
        if node.container is not None:
            self.members[(row.path, node.container)].append(node.id)

    def _add_ref(self, site: RefSite) -> None:
        self.refs.append(site)
        self.refs_by_name[site.name].append(site.id)
        self.refs_by_enclosing[(site.path, site.enclosing)].append(site.id)

    # --- reading ---------------------------------------------------------------------------------

    def named(self, name: str) -> list[DefNode]:
        return [self.defs[i] for i in self.by_name.get(name, ())]

    def at(self, path: str, qualified: str | None) -> list[DefNode]:
        """The definitions called `qualified` in `path` (overloads: several)."""
        if qualified is None:
            return []
        return [self.defs[i] for i in self.by_place.get((path, qualified), ())]

    def member_of(self, cls: DefNode, name: str) -> list[DefNode]:
        return [self.defs[i] for i in self.members.get((cls.path, cls.qualified), ()) if self.defs[i].name == name]

    def classes(self, name: str) -> list[DefNode]:
        return [d for d in self.named(name) if d.kind in CLASS_KINDS]

    def enclosing(self, path: str, line: int) -> DefNode | None:
        """The innermost definition of `path` whose lines hold `line` (None: at the file's top level)."""
        if self._in_file is None:
            in_file: dict[str, list[DefNode]] = defaultdict(list)
            for d in self.defs:
                in_file[d.path].append(d)
            for defs in in_file.values():
                defs.sort(key=lambda d: (d.line, -d.end_line))
            self._in_file = dict(in_file)
        inner: DefNode | None = None
        for d in self._in_file.get(path, ()):
            if d.line > line:
                break
            if line <= d.end_line:
                inner = d  # a later start inside an earlier one is nested in it
        return inner

    def enclosing_class(self, path: str, enclosing: str | None) -> DefNode | None:
        """The innermost class-like definition around a site whose enclosing definition is `enclosing`."""
        qualified = enclosing
        while qualified:
            found = [d for d in self.at(path, qualified) if d.kind in CLASS_KINDS]
            if found:
                return found[0]
            qualified = qualified.rpartition(".")[0] or None
        return None

    def lineage(self, cls: DefNode, depth: int = 8) -> list[DefNode]:
        """`cls` and its bases found in the repository (by name, the same file's first), breadth first."""
        out, frontier, seen = [cls], [cls], {cls.id}
        for _ in range(depth):
            nxt: list[DefNode] = []
            for current in frontier:
                for base in current.bases:
                    found = self.classes(base)
                    same_file = [d for d in found if d.path == current.path]
                    for d in same_file or found:
                        if d.id not in seen:
                            seen.add(d.id)
                            nxt.append(d)
            out.extend(nxt)
            frontier = nxt
            if not frontier:
                break
        return out

    def modules_matching(self, target: str) -> list[str]:
        """Modules whose key is `target` or ends with it on a dot boundary (a src/ layout, a Go module path)."""
        found = self._matching.get(target)
        if found is None:
            found = self._matching[target] = self._modules_matching(target)
        return found

    def _modules_matching(self, target: str) -> list[str]:
        exact = self.paths_by_module.get(target)
        if exact:
            return [target]
        suffix = "." + target
        found = [m for m in self.paths_by_module if m.endswith(suffix)]
        if found:
            return found
        tails = [m for m in self.paths_by_module if m and target.endswith("." + m) and self._is_package(m)]
        longest = max((len(m) for m in tails), default=0)
        return [m for m in tails if len(m) == longest]

    def _is_package(self, module: str) -> bool:
        """A folder-style module (Go, Java, Kotlin, Scala, C#): an import path may end with its folder's
        key (a Go module path, a Java package under src/main/java). Python and file-style imports may not."""
        paths = self.paths_by_module.get(module, [])
        spec = SPECS.get(self.language_by_path.get(paths[0], "")) if paths else None
        return spec is not None and spec.module_style is ModuleStyle.FOLDER

    def same_folder(self, path: str, other: str) -> bool:
        return PurePosixPath(path).parent == PurePosixPath(other).parent
