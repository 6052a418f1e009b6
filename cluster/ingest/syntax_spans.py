"""The spans a syntax tree yields: definitions, members and leading comments per language
(tree-sitter), Markdown sections, and the module-level runs between them.

Iterative or depth-capped (`max_syntax_depth`): code nested deeper than the cap is covered by
the enclosing span and windowed by the chunker. None for a language without a grammar, or a
file whose parse failed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from tree_sitter import Node

from cluster.ingest.languages import has_grammar, parse
from cluster.ingest.syntax_rules import KIND_FUNCTION, KIND_METHOD, KIND_MODULE, KIND_SECTION, RULES, SyntaxRules
from cluster.ingest.syntax_rules_csharp import RULES as CSHARP_RULES
from cluster.ingest.syntax_rules_jvm import RULES as JVM_RULES
from cluster.ingest.syntax_rules_scripting import RULES as SCRIPTING_RULES
from cluster.ingest.syntax_rules_swift import RULES as SWIFT_RULES
from cluster.settings import ChunkingSettings


@dataclass(frozen=True)
class Span:
    """Lines start..end of a file that form one chunk (before windows and the byte cap)."""

    start: int  # 1-based, inclusive
    end: int
    kind: str
    symbol: str | None


ALL_RULES: Mapping[str, SyntaxRules] = {**RULES, **JVM_RULES, **CSHARP_RULES, **SCRIPTING_RULES, **SWIFT_RULES}


def syntax_spans(language: str, text: str, lines: Sequence[str], settings: ChunkingSettings) -> list[Span] | None:
    if not has_grammar(language) or (language != "markdown" and language not in ALL_RULES):
        return None
    source = text.encode("utf-8", errors="replace")
    tree = parse(language, source)
    if tree is None:
        return None
    if language == "markdown":
        return _markdown_spans(tree.root_node, len(lines))
    scanner = _Scanner(ALL_RULES[language], lines, source.split(b"\n"), settings)
    scanner.scan(tree.root_node.children, (), None, in_container=False, depth=0)
    spans = scanner.spans
    return [*spans, *_uncovered(1, len(lines), spans, lines, KIND_MODULE, None)]


def _uncovered(
    start: int,
    end: int,
    spans: Iterable[Span],
    lines: Sequence[str],
    kind: str,
    symbol: str | None,
) -> list[Span]:
    """Runs of lines in [start, end] outside every span, dropping runs with no word character."""
    covered = [False] * (end - start + 1)
    for span in spans:
        for line in range(max(span.start, start), min(span.end, end) + 1):
            covered[line - start] = True
    runs: list[Span] = []
    run_start: int | None = None
    for offset, is_covered in enumerate([*covered, True]):
        line = start + offset
        if not is_covered and run_start is None:
            run_start = line
        elif is_covered and run_start is not None:
            if any(_has_word(lines[i - 1]) for i in range(run_start, line)):
                runs.append(Span(run_start, line - 1, kind, symbol))
            run_start = None
    return runs


_WORD_CHARACTER = re.compile(r"[^\W_]")  # what str.isalnum() accepts, searched at C speed


def _has_word(line: str) -> bool:
    return _WORD_CHARACTER.search(line) is not None


# --- code: definitions, members, leading comments ----------------------------------------


def _start_line(node: Node) -> int:
    return node.start_point.row + 1


def _last_row(node: Node) -> int:
    """0-based last row holding part of the node (a node may end at column 0 of the next)."""
    row = node.end_point.row
    if node.end_point.column == 0 and row > node.start_point.row:
        row -= 1
    return row


def _text(node: Node | None) -> str | None:
    if node is None or node.text is None:
        return None
    return node.text.decode("utf-8", errors="replace")


def _is_trivia(node: Node) -> bool:
    return "comment" in node.type or node.type == "attribute_item"


def _is_shebang(node: Node) -> bool:
    return node.start_point.row == 0 and (node.text or b"").startswith(b"#!")


def _qualify(qualifier: str | None, name: str | None) -> str | None:
    if qualifier is None:
        return name
    if name is None:
        return qualifier
    return f"{qualifier}.{name}"


class _Scanner:
    """Collects definition spans from sibling lists, descending into big containers.

    Recursion is bounded by ``max_syntax_depth`` (each level is one container, namespace or
    member group): deeper code is left to the enclosing span's line windows, so a 10,000-deep
    file never reaches Python's recursion limit.
    """

    def __init__(
        self, rules: SyntaxRules, lines: Sequence[str], byte_lines: Sequence[bytes], settings: ChunkingSettings
    ) -> None:
        self.rules = rules
        self.lines = lines
        self.byte_lines = byte_lines
        self.window = settings.window_lines
        self.max_depth = settings.max_syntax_depth
        self.spans: list[Span] = []

    def scan(
        self,
        children: Iterable[Node],
        seed: Sequence[Node],
        qualifier: str | None,
        *,
        in_container: bool,
        depth: int,
    ) -> None:
        pending = list(seed)  # comments/attributes since the last real sibling
        deeper = depth + 1 < self.max_depth
        for child in children:
            if _is_trivia(child):
                pending.append(child)
                continue
            if child.type in self.rules.member_groups:
                if deeper:
                    self.scan(child.children, pending, qualifier, in_container=in_container, depth=depth + 1)
            elif child.type in self.rules.namespaces:
                body = child.child_by_field_name("body")
                if body is not None and deeper:  # else its lines are windowed with the module
                    self.scan(body.children, (), qualifier, in_container=in_container, depth=depth + 1)
            else:
                self._definition(child, pending, qualifier, in_container=in_container, depth=depth)
            pending = []

    def _definition(
        self, node: Node, pending: Sequence[Node], qualifier: str | None, *, in_container: bool, depth: int
    ) -> None:
        found = self._classify(node)
        if found is None:
            return
        inner, kind, is_container = found
        if in_container and kind == KIND_FUNCTION:
            kind = KIND_METHOD
        symbol = _qualify(qualifier, _symbol(inner))
        start = self._leading_start(node, pending)
        end = _last_row(node) + 1
        body = inner.child_by_field_name("body") if is_container else None
        if body is None or end - start + 1 <= self.window or depth + 1 >= self.max_depth:
            self.spans.append(Span(start, end, kind, symbol))
            return
        before = len(self.spans)
        self.scan(body.children, _trivia_before(body), symbol, in_container=True, depth=depth + 1)
        members = self.spans[before:]
        self.spans.extend(_uncovered(start, end, members, self.lines, kind, symbol))

    def _classify(self, node: Node) -> tuple[Node, str, bool] | None:
        """(definition node, kind, is_container), or None when ``node`` is no definition.

        Wrappers (decorators, export, template) are unwrapped depth first, at most
        ``max_depth`` of them; the first named descendant that is a definition wins.
        """
        stack: list[Iterator[Node]] = [iter((node,))]
        while stack:
            current = next(stack[-1], None)
            if current is None:
                stack.pop()
            elif current.type in self.rules.wrappers:
                if len(stack) < self.max_depth:
                    stack.append(iter(current.named_children))
            else:
                found = self._classify_one(current)
                if found is not None:
                    return found
        return None

    def _classify_one(self, node: Node) -> tuple[Node, str, bool] | None:
        rules = self.rules
        if node.type in rules.needs_body and not _has_body(node):
            return None
        if node.type in rules.containers:
            return node, rules.containers[node.type], True
        if node.type in rules.definitions:
            return node, _refine_kind(node, rules.definitions[node.type]), False
        if node.type in rules.variables and _function_declarator(node) is not None:
            return node, KIND_FUNCTION, False
        return None

    def _leading_start(self, node: Node, pending: Sequence[Node]) -> int:
        """First line of ``node`` with the comments/attributes stacked directly above it."""
        row = node.start_point.row
        column = node.start_point.column
        for trivia in reversed(pending):
            if _last_row(trivia) != row - 1 or trivia.start_point.column != column:
                break
            if not self._starts_line(trivia) or _is_shebang(trivia):
                break
            row = trivia.start_point.row
        return row + 1

    def _starts_line(self, node: Node) -> bool:
        row, column = node.start_point.row, node.start_point.column
        return row < len(self.byte_lines) and not self.byte_lines[row][:column].strip()


def _trivia_before(body: Node) -> list[Node]:
    """Comments right before a body node but outside it (tree-sitter-python puts them there)."""
    found: list[Node] = []
    sibling = body.prev_sibling
    while sibling is not None and _is_trivia(sibling):
        found.append(sibling)
        sibling = sibling.prev_sibling
    return found[::-1]


def _has_body(node: Node) -> bool:
    if node.type == "type_definition":
        inner = node.child_by_field_name("type")
        return inner is not None and inner.child_by_field_name("body") is not None
    return node.child_by_field_name("body") is not None


_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function"})


def _function_declarator(node: Node) -> Node | None:
    """The first declarator of a JS/TS variable declaration whose value is a function."""
    for child in node.named_children:
        if child.type != "variable_declarator":
            continue
        value = child.child_by_field_name("value")
        if value is not None and value.type in _FUNCTION_VALUES:
            return child
    return None


def _refine_kind(node: Node, kind: str) -> str:
    """Go: a lone `type X struct`/`interface` declaration reads as 'struct'/'interface'."""
    if node.type != "type_declaration":
        return kind
    specs = [c for c in node.named_children if c.type in ("type_spec", "type_alias")]
    if len(specs) == 1:
        value = specs[0].child_by_field_name("type")
        if value is not None and value.type == "struct_type":
            return "struct"
        if value is not None and value.type == "interface_type":
            return "interface"
    return kind


_C_NAME_TYPES = frozenset(
    {"identifier", "field_identifier", "qualified_identifier", "destructor_name", "operator_name"}
)


def _symbol(node: Node) -> str | None:
    """The name a definition goes by; 'Recv.Method' for Go methods."""
    kind = node.type
    if kind == "method_declaration" and node.child_by_field_name("receiver") is not None:
        receiver = _go_receiver(node.child_by_field_name("receiver"))
        return _qualify(receiver, _text(node.child_by_field_name("name")))
    if kind == "type_declaration":
        names = [
            _text(c.child_by_field_name("name")) for c in node.named_children if c.type in ("type_spec", "type_alias")
        ]
        return ", ".join(n for n in names if n) or None
    if kind in ("lexical_declaration", "variable_declaration"):
        declarator = _function_declarator(node)
        return _text(declarator.child_by_field_name("name")) if declarator else None
    if kind == "function_definition" and node.child_by_field_name("declarator") is not None:
        return _c_declarator_name(node.child_by_field_name("declarator"))
    if kind == "type_definition":
        return _text(node.child_by_field_name("declarator"))
    if kind == "impl_item":
        target = node.child_by_field_name("type")
        if target is not None and target.type == "generic_type":
            target = target.child_by_field_name("type") or target
        return _text(target)
    return _text(node.child_by_field_name("name"))


def _go_receiver(parameters: Node | None) -> str | None:
    if parameters is None:
        return None
    for parameter in parameters.named_children:
        target = parameter.child_by_field_name("type")
        while target is not None and target.type != "type_identifier":
            target = next((c for c in target.named_children), None)
        if target is not None:
            return _text(target)
    return None


def _c_declarator_name(declarator: Node | None) -> str | None:
    """Follow pointer/reference/function declarators down to the declared name."""
    current = declarator
    while current is not None and current.type not in _C_NAME_TYPES:
        current = current.child_by_field_name("declarator") or next(
            (c for c in current.named_children if "declarator" in c.type or c.type in _C_NAME_TYPES),
            None,
        )
    return _text(current)


# --- markdown ----------------------------------------------------------------------------

_HEADINGS = frozenset({"atx_heading", "setext_heading"})


def _markdown_spans(root: Node, line_count: int) -> list[Span]:
    """One span per heading up to the next heading; text before the first has no symbol.

    Headings are taken from the section tree (not from code blocks or quotes). Setext
    headings do not open a `section` node in this grammar, so headings, not sections,
    mark the boundaries.
    """
    headings: list[tuple[int, str | None]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.children:
            if child.type in _HEADINGS:
                headings.append((_start_line(child), _heading_text(child)))
            elif child.type == "section":
                stack.append(child)
    headings.sort(key=lambda h: h[0])
    spans: list[Span] = []
    first = headings[0][0] if headings else line_count + 1
    if first > 1:
        spans.append(Span(1, first - 1, KIND_SECTION, None))
    for index, (start, title) in enumerate(headings):
        end = headings[index + 1][0] - 1 if index + 1 < len(headings) else line_count
        spans.append(Span(start, end, KIND_SECTION, title))
    return spans


def _heading_text(heading: Node) -> str | None:
    inline = _find_inline(heading)
    if inline is None:
        return None
    text = _text(inline) or ""
    if heading.type == "atx_heading":
        text = _strip_atx_closing(text)
    title = " ".join(text.split())
    return title or None


def _find_inline(node: Node) -> Node | None:
    current: Node | None = node
    while current is not None:
        parent, current = current, None
        for child in parent.named_children:
            if child.type == "inline":
                return child
            if child.type == "paragraph":  # setext: the title is a paragraph above the underline
                current = child
                break
    return None


def _strip_atx_closing(text: str) -> str:
    r"""``text`` without an ATX closing sequence (`## Title ##` → `## Title`): trailing '#'s
    that start the text or follow whitespace, and the whitespace around them. Linear (a regex
    `(^|\s+)#+\s*$` is quadratic on a long run of spaces)."""
    body = text.rstrip()
    opened = body.rstrip("#")
    if opened == body or (opened and not opened[-1].isspace()):
        return text
    return opened.rstrip()
