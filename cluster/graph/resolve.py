"""Which definitions a reference reaches, and how sure that is.

A reference names what it uses as written (`foo`, `self.foo`, `mod.foo`, `Foo.bar`, `obj.bar`); the
resolver follows what its file says (imports and aliases, the enclosing class and its bases, the
same file, the same folder) to the definitions of the repository it can reach. Each edge carries a
confidence: 1 when the code says which definition it is, less when it is a guess among several
(shared equally: an ambiguous edge is kept and said, never dropped or picked). A name imported from
outside the repository resolves to nothing, whatever the repository defines under that name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath

from cluster.graph.graph_index import GraphIndex
from cluster.graph.nodes import DefNode, RefSite
from cluster.graph.registry import SPECS
from cluster.graph.spec import CLASS_KINDS, GraphSpec, ModuleStyle

__all__ = ["CERTAIN", "Edge", "Resolver"]

CERTAIN = 1.0  # the code names the definition (an import, self, the same file, a class)
STAR = 0.9  # a wildcard import or #include brings it
SAME_PACKAGE = 0.8  # a definition of the same folder (package) by that name
GLOBAL = 0.6  # any top-level definition by that name (languages with a global namespace)
RECEIVER_UNKNOWN = 0.5  # a method by that name, on a receiver whose type is not written

Edge = tuple[int, float]  # (definition id, confidence)
_DEFAULT = GraphSpec(language="", query="")
_FAMILIES = {  # languages that call each other's definitions; any other language only its own
    "java": "jvm",
    "kotlin": "jvm",
    "scala": "jvm",
    "c": "c",
    "cpp": "c",
    "javascript": "js",
    "typescript": "js",
    "tsx": "js",
}


def family(language: str) -> str:
    return _FAMILIES.get(language, language)


class Resolver:
    """Resolves references of one `GraphIndex`, each once (cached)."""

    def __init__(self, index: GraphIndex) -> None:
        self.index = index
        self._cache: dict[int, tuple[Edge, ...]] = {}
        self._by_family: dict[tuple[str, str], list[DefNode]] = {}  # (name, family) -> definitions
        self._guesses: dict[tuple[str, str], tuple[Edge, ...]] = {}  # (name, family) -> any method by that name

    def resolve(self, site: RefSite) -> tuple[Edge, ...]:
        cached = self._cache.get(site.id)
        if cached is None:
            spec = SPECS.get(site.language, _DEFAULT)
            fam = family(site.language)
            found = self._bare(site, spec, fam) if site.qualifier is None else self._qualified(site, spec, fam)
            cached = self._cache[site.id] = tuple(found)
        return cached

    def imported(self, target: str, language: str) -> list[DefNode]:
        """The definitions an import binding of a file in `language` names (`pkg.mod.f`)."""
        return self._imported([target], family(language))

    # --- bare names ------------------------------------------------------------------------------

    def _bare(self, site: RefSite, spec: GraphSpec, fam: str) -> Sequence[Edge]:
        index = self.index
        imported = index.imports.get(site.path, {}).get(site.name)
        if imported:
            return _spread(self._imported(imported, fam), CERTAIN)
        candidates = self._named(site.name, fam)
        if not candidates:
            return []
        here = [d for d in candidates if d.path == site.path and self._visible_from(d, site.enclosing)]
        if here:
            return _spread(here, CERTAIN)
        cls = index.enclosing_class(site.path, site.enclosing)
        if spec.implicit_members and cls is not None:
            members = self._members(cls, site.name)
            if members:
                return _spread(members, CERTAIN)
        top = [d for d in candidates if d.container is None]
        starred = index.imports.get(site.path, {}).get("*")
        if starred:
            modules = {m for target in starred for m in index.modules_matching(target)}
            brought = [d for d in top if d.module in modules]
            if brought:
                return _spread(brought, STAR)
        package = [d for d in top if index.same_folder(d.path, site.path)]
        if package and (spec.module_style is ModuleStyle.FOLDER or spec.global_names):
            return _spread(package, CERTAIN if spec.module_style is ModuleStyle.FOLDER else SAME_PACKAGE)
        if spec.global_names and top:
            return _spread(top, GLOBAL)
        return []

    def _imported(self, targets: Iterable[str], fam: str) -> list[DefNode]:
        """The definitions import targets name: `pkg.mod.f` is `f` of module `pkg.mod` (or a module's suffix)."""
        index = self.index
        found: list[DefNode] = []
        for target in targets:
            module, _, name = target.rpartition(".")
            if not name:
                continue
            hits = [d for d in self._named(name, fam) if d.container is None and d.full.endswith(target)]
            if not hits and module:
                hits = _module_level(self._in_modules(index.modules_matching(module), name, fam))
            found.extend(d for d in hits if d not in found)
        return found

    # --- qualified names -------------------------------------------------------------------------

    def _qualified(self, site: RefSite, spec: GraphSpec, fam: str) -> Sequence[Edge]:
        index = self.index
        qualifier = site.qualifier or ""
        if not self._named(site.name, fam):
            return []
        if qualifier in spec.self_names or qualifier in spec.super_names:
            cls = index.enclosing_class(site.path, site.enclosing)
            if cls is not None:
                lineage = index.lineage(cls)
                classes = lineage[1:] if qualifier in spec.super_names else lineage
                members = self._first_members(classes, site.name)
                if members:
                    return _spread(members, CERTAIN)
            return self._any_method(site.name, fam)
        head, _, rest = qualifier.partition(".")
        bound = index.imports.get(site.path, {}).get(head)
        if bound:
            return _spread(self._through_import(bound, rest, site.name, fam), CERTAIN)
        classes = [c for c in index.classes(qualifier.rpartition(".")[2]) if family(c.language) == fam]
        for tier in _nearest_first(classes, site.path):
            members = [m for cls in tier for m in self._first_members([cls], site.name, lineage=True)]
            if members:
                return _spread(members, CERTAIN)
        return self._any_method(site.name, fam)

    def _through_import(self, targets: Sequence[str], rest: str, name: str, fam: str) -> list[DefNode]:
        """Definitions `name` reached through an import alias (`alias.rest.name`): a module's top-level
        definitions or a class's members. Nothing when the import leaves the repository."""
        index = self.index
        found: list[DefNode] = []
        for target in targets:
            path = f"{target}.{rest}" if rest else target
            hits = _module_level(self._in_modules(index.modules_matching(path), name, fam))
            if not hits:  # alias.Class.method, or an imported class
                owner, _, cls_name = path.rpartition(".")
                for cls in [c for c in index.classes(cls_name) if family(c.language) == fam]:
                    if not owner or cls.module in index.modules_matching(owner) or cls.full.endswith(path):
                        hits.extend(self._members(cls, name))
            found.extend(d for d in hits if d not in found)
        return found

    def _members(self, cls: DefNode, name: str) -> list[DefNode]:
        return self._first_members(self.index.lineage(cls), name)

    def _first_members(self, classes: Sequence[DefNode], name: str, *, lineage: bool = False) -> list[DefNode]:
        """The members called `name` of the first class (in order) that has any."""
        for cls in classes:
            chain = self.index.lineage(cls) if lineage else [cls]
            for owner in chain:
                members = self.index.member_of(owner, name)
                if members:
                    return members
        return []

    def _visible_from(self, definition: DefNode, enclosing: str | None) -> bool:
        """A definition a bare name reaches in its own file: top-level, or nested in a function around
        the site (a nested helper called by its parent); a class's members need `implicit_members`."""
        container = definition.container
        if container is None:
            return True
        if enclosing is None or not (enclosing == container or enclosing.startswith(container + ".")):
            return False
        return not any(d.kind in CLASS_KINDS for d in self.index.at(definition.path, container))

    def _any_method(self, name: str, fam: str) -> tuple[Edge, ...]:
        """A call on a receiver of unknown type: every method by that name (one tuple per name, shared)."""
        guesses = self._guesses.get((name, fam))
        if guesses is None:
            methods = [
                d for d in self._named(name, fam) if d.container is not None and d.kind in ("method", "function")
            ]
            guesses = self._guesses[(name, fam)] = tuple(_spread(methods, RECEIVER_UNKNOWN))
        return guesses

    def _named(self, name: str, fam: str) -> list[DefNode]:
        """The definitions called `name` in the language family `fam` (the site's)."""
        named = self._by_family.get((name, fam))
        if named is None:
            named = self._by_family[(name, fam)] = [d for d in self.index.named(name) if family(d.language) == fam]
        return named

    def _in_modules(self, modules: Iterable[str], name: str, fam: str) -> list[DefNode]:
        wanted = set(modules)
        return [d for d in self._named(name, fam) if d.module in wanted]


def _module_level(definitions: Sequence[DefNode]) -> list[DefNode]:
    """What a module gives its importers under a name: its top-level definitions, else the members of
    a top-level table or object it exports (Lua's `M.f`, a JS `exports` object)."""
    top = [d for d in definitions if d.container is None]
    return top or [d for d in definitions if d.container is not None and "." not in d.container]


def _nearest_first(classes: Sequence[DefNode], path: str) -> list[list[DefNode]]:
    """Classes a qualifier may name, nearest first: the same file, the same folder, anywhere."""
    same_file = [c for c in classes if c.path == path]
    folder = PurePosixPath(path).parent
    same_folder = [c for c in classes if c not in same_file and PurePosixPath(c.path).parent == folder]
    rest = [c for c in classes if c not in same_file and c not in same_folder]
    return [tier for tier in (same_file, same_folder, rest) if tier]


def _spread(definitions: Sequence[DefNode], confidence: float) -> list[Edge]:
    """Edges to `definitions`, sharing `confidence` equally among distinct places (overloads share one)."""
    places = {(d.path, d.qualified) for d in definitions}
    if not places:
        return []
    share = confidence / len(places)
    return [(d.id, share) for d in definitions]
