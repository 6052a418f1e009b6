"""One file's code-graph facts: its definitions, the names it calls and mentions, what its imports
bind, found by the language's query (`cluster.graph.spec`), and where each fact lies among the
file's chunks.

Pure functions, no I/O. Never raises on a file's content: a language without a spec, a failed
parse or a query error give no facts (the file is still chunked and searched); a file with more
facts than `MAX_FACTS` keeps the first ones.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from tree_sitter import Language, Node, Query, QueryCursor

from cluster.graph.modules import module_of, normalise_module, unify
from cluster.graph.registry import SPECS
from cluster.graph.spec import CLASS_KINDS, GraphSpec
from cluster.ingest import GRAMMARS, parse
from cluster.types import Chunk, Definition, ImportBinding, Reference

__all__ = ["MAX_FACTS", "FileFacts", "attach_facts", "file_facts", "module_of", "normalise_module"]

MAX_FACTS = 20_000  # per kind and file: a hostile or generated file cannot grow a row without bound
MAX_QUALIFIER = 120  # characters of a receiver kept as a reference's qualifier
_IDENTIFIER = re.compile(r"[A-Za-z_$@][\w$]*")
_DOTTED = re.compile(r"[A-Za-z_$@][\w$@]*(\(\))?(\.[A-Za-z_$@][\w$@]*(\(\))?)*")
_BRACKETED = re.compile(r"<[^<>]*>|\[[^\[\]]*\]")


@dataclass(frozen=True)
class FileFacts:
    """The facts of one file, in source order."""

    definitions: tuple[Definition, ...] = ()
    references: tuple[Reference, ...] = ()
    imports: tuple[ImportBinding, ...] = ()


def file_facts(path: str, language: str, text: str) -> FileFacts:
    """The facts of `text`, the content of `path` in `language`; empty when the language has no spec."""
    spec = SPECS.get(language)
    if spec is None or language not in GRAMMARS:
        return FileFacts()
    source = text.encode("utf-8", errors="replace")
    tree = parse(language, source)
    query = _query(spec)
    if tree is None or query is None:
        return FileFacts()
    try:
        matches = QueryCursor(query).matches(tree.root_node)
    except Exception:  # noqa: BLE001 - a query the grammar rejects at run time gives no facts, never a failed file
        return FileFacts()
    reader = _Reader(spec, path)
    for _, captures in matches:
        reader.add(captures)
    imports = reader.imports
    if spec.imports is not None:
        try:
            imports = spec.imports(tree.root_node, path)[:MAX_FACTS]
        except Exception:  # noqa: BLE001 - an import reader failing on odd syntax loses the imports, not the file
            imports = []
    return reader.facts(tuple(imports))


def attach_facts(chunks: Sequence[Chunk], facts: FileFacts) -> list[Chunk]:
    """`chunks` (one file's) with each fact on the narrowest chunk covering its line (the first of
    equals): every fact lands once, on a chunk that shows it."""
    if not chunks or not (facts.definitions or facts.references or facts.imports):
        return list(chunks)
    order = sorted(range(len(chunks)), key=lambda i: (chunks[i].end_line - chunks[i].start_line, i))
    owners: dict[int, int] = {}

    def owner(line: int) -> int | None:
        if line not in owners:
            found = next((i for i in order if chunks[i].start_line <= line <= chunks[i].end_line), None)
            if found is None:
                return None
            owners[line] = found
        return owners[line]

    buckets: list[tuple[list[Definition], list[Reference], list[ImportBinding]]] = [([], [], []) for _ in chunks]
    for definition in facts.definitions:
        if (i := owner(definition.line)) is not None:
            buckets[i][0].append(definition)
    for reference in facts.references:
        if (i := owner(reference.line)) is not None:
            buckets[i][1].append(reference)
    for binding in facts.imports:
        if (i := owner(binding.line)) is not None:
            buckets[i][2].append(binding)
    return [
        chunk.model_copy(update={"definitions": tuple(d), "references": tuple(r), "imports": tuple(m)})
        if (d or r or m)
        else chunk
        for chunk, (d, r, m) in zip(chunks, buckets, strict=True)
    ]


# --- queries ---------------------------------------------------------------------------------------

_QUERIES: dict[str, Query | None] = {}
_QUERY_LOCK = threading.Lock()


def _query(spec: GraphSpec) -> Query | None:
    """The compiled query of a spec, once per language; None when the grammar rejects it."""
    with _QUERY_LOCK:
        if spec.language not in _QUERIES:
            try:
                _QUERIES[spec.language] = Query(Language(GRAMMARS[spec.language]()), spec.query)
            except Exception:  # noqa: BLE001 - a spec the installed grammar rejects: that language has no facts
                _QUERIES[spec.language] = None
        return _QUERIES[spec.language]


# --- reading the matches ---------------------------------------------------------------------------


@dataclass
class _Def:
    node: Node
    name: str
    kind: str
    container: str | None
    bases: list[str]


class _Reader:
    def __init__(self, spec: GraphSpec, path: str) -> None:
        self.spec = spec
        self.path = path
        self.defs: dict[tuple[int, int, str], _Def] = {}
        self.name_nodes: set[tuple[int, int]] = set()
        self.uses: list[tuple[Node, str, str | None, bool]] = []  # (node, name, qualifier, call)
        self.imports: list[ImportBinding] = []

    def add(self, captures: dict[str, list[Node]]) -> None:
        kind = next((key.removeprefix("definition.") for key in captures if key.startswith("definition.")), None)
        if kind is not None:
            self._definition(captures, kind)
        elif "call" in captures and "callee" in captures:
            self._use(captures, captures["callee"][0], call=True)
        elif "reference" in captures:
            self._use(captures, captures["reference"][0], call=False)
        elif "import" in captures and "import.module" in captures:
            self._import(captures)

    def _definition(self, captures: dict[str, list[Node]], kind: str) -> None:
        node = captures[f"definition.{kind}"][0]
        names = captures.get("name")
        if not names or len(self.defs) >= MAX_FACTS:
            return
        name = _last_identifier(_text(names[0]), self.spec)
        if not name:
            return
        key = (node.start_byte, node.end_byte, kind)
        bases = [base for n in captures.get("bases", ()) if (base := _last_identifier(_text(n), self.spec))]
        known = self.defs.get(key)
        if known is not None:
            known.bases.extend(b for b in bases if b not in known.bases)
            return
        containers = captures.get("container")
        container = _last_identifier(_text(containers[0]), self.spec) if containers else None
        self.defs[key] = _Def(node, name, kind, container or None, bases)
        self.name_nodes.add((names[0].start_byte, names[0].end_byte))

    def _use(self, captures: dict[str, list[Node]], node: Node, *, call: bool) -> None:
        if len(self.uses) >= MAX_FACTS:
            return
        name = _last_identifier(_text(node), self.spec)
        if not name or name in self.spec.keywords:
            return
        receivers = captures.get("receiver")
        qualifier = _qualifier(_text(receivers[0]), self.spec) if receivers else None
        self.uses.append((node, name, qualifier, call))

    def _import(self, captures: dict[str, list[Node]]) -> None:
        if len(self.imports) >= MAX_FACTS:
            return
        module = normalise_module(_text(captures["import.module"][0]), self.path, self.spec)
        names = captures.get("import.name")
        aliases = captures.get("import.alias")
        name = _text(names[0]).strip() if names else None
        alias = _text(aliases[0]).strip() if aliases else (name or module.rsplit(".", 1)[-1])
        if not module or not alias:
            return
        target = f"{module}.{name}" if name and name != "*" else module
        line = captures["import"][0].start_point.row + 1
        self.imports.append(ImportBinding(alias="*" if name == "*" else alias, target=target, line=line))

    def facts(self, imports: tuple[ImportBinding, ...]) -> FileFacts:
        defs = sorted(self.defs.values(), key=lambda d: (d.node.start_byte, -d.node.end_byte))
        qualified: list[str] = []
        stack: list[tuple[int, str, _Def]] = []  # (end byte, qualified name, definition) of those around
        for d in defs:
            while stack and stack[-1][0] <= d.node.start_byte:
                stack.pop()
            parent = stack[-1][2] if stack else None
            if d.kind == "function" and (d.container or (parent is not None and parent.kind in CLASS_KINDS)):
                d.kind = "method"
            prefix = d.container or (stack[-1][1] if stack else None)
            name = f"{prefix}.{d.name}" if prefix else d.name
            qualified.append(name)
            stack.append((d.node.end_byte, name, d))
        definitions = tuple(
            Definition(
                name=d.name,
                qualified=q,
                kind=d.kind,
                line=d.node.start_point.row + 1,
                end_line=_last_line(d.node),
                bases=tuple(d.bases),
            )
            for d, q in zip(defs, qualified, strict=True)
        )
        return FileFacts(definitions, self._references(defs, qualified), imports)

    def _references(self, defs: Sequence[_Def], qualified: Sequence[str]) -> tuple[Reference, ...]:
        spans = [(d.node.start_byte, d.node.end_byte, q) for d, q in zip(defs, qualified, strict=True)]
        seen: set[tuple[str, int, str | None, bool]] = set()
        out: list[Reference] = []
        stack: list[tuple[int, int, str]] = []
        position = 0
        for node, name, qualifier, call in sorted(self.uses, key=lambda use: use[0].start_byte):
            if (node.start_byte, node.end_byte) in self.name_nodes:
                continue
            while position < len(spans) and spans[position][0] <= node.start_byte:
                stack.append(spans[position])
                position += 1
            enclosing = _innermost(stack, node.start_byte)
            line = node.start_point.row + 1
            key = (name, line, qualifier, call)
            if key in seen:
                continue
            seen.add(key)
            out.append(Reference(name=name, line=line, qualifier=qualifier, enclosing=enclosing, call=call))
        calls = {(r.name, r.line, r.qualifier) for r in out if r.call}
        return tuple(r for r in out if r.call or (r.name, r.line, r.qualifier) not in calls)


def _last_line(node: Node) -> int:
    """A node's last line: one that ends at a line's first column (an indented body's newline) ends before it."""
    start, end = node.start_point, node.end_point
    row = end.row - 1 if end.column == 0 and end.row > start.row else end.row
    return row + 1


def _innermost(stack: list[tuple[int, int, str]], at: int) -> str | None:
    while stack and stack[-1][1] <= at:
        stack.pop()
    for start, end, name in reversed(stack):
        if start <= at < end:
            return name
    return None


# --- names -----------------------------------------------------------------------------------------


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")


def _last_identifier(text: str, spec: GraphSpec) -> str:
    """The name a definition, callee or container is known by: generic arguments dropped, the last
    part of a scoped name (`ns::Foo` -> `Foo`, `*Repo` -> `Repo`)."""
    text = unify(text, spec)
    for _ in range(4):
        stripped = _BRACKETED.sub("", text)
        if stripped == text:
            break
        text = stripped
    found = _IDENTIFIER.findall(text.rsplit(".", 1)[-1]) or _IDENTIFIER.findall(text)
    return found[-1] if found else ""


def _qualifier(text: str, spec: GraphSpec) -> str | None:
    """A receiver as a dotted name (`self`, `os.path`, `super()`); any other expression is "?", a
    receiver whose type the code does not write (and whose text, a literal perhaps, is not kept)."""
    text = "".join(unify(text, spec).split())
    if len(text) <= MAX_QUALIFIER and _DOTTED.fullmatch(text):
        return text
    return "?"
