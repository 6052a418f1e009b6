"""Cut a source file into chunks at syntax boundaries (tree-sitter), else at line windows.

Pure functions: no I/O, no Ray. Parsers are built on first use and cached per language.

No file can fail or stall a reindex: `chunk_file` never raises; the syntax scan
descends at most `max_syntax_depth` levels (deeper code is windowed); definitions that cover
the same lines become one chunk; no chunk text exceeds `max_chunk_bytes` (a longer line is cut
by characters), so a file's total chunk text stays within a small multiple of its size.
`generated_reason` names minified and generated files, which a reindex skips.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import tree_sitter_bash
import tree_sitter_c
import tree_sitter_cpp
import tree_sitter_go
import tree_sitter_java
import tree_sitter_javascript
import tree_sitter_markdown
import tree_sitter_python
import tree_sitter_rust
import tree_sitter_typescript
from tree_sitter import Language, Node, Parser, Tree

from cluster.settings import ChunkingSettings
from cluster.types import Chunk

FALLBACK_LANGUAGE = "text"

KIND_WINDOW = "window"
KIND_MODULE = "module"
KIND_SECTION = "section"
KIND_FUNCTION = "function"
KIND_METHOD = "method"


# --- languages ---------------------------------------------------------------------------

_EXTENSIONS: Mapping[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".go": "go",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".c++": "cpp",
    ".hh": "cpp",
    ".hpp": "cpp",
    ".hxx": "cpp",
    ".h++": "cpp",
    ".md": "markdown",
    ".markdown": "markdown",
    ".sh": "bash",
    ".bash": "bash",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".ini": "ini",
    ".cfg": "ini",
    ".html": "html",
    ".htm": "html",
    ".css": "css",
    ".sql": "sql",
    ".xml": "xml",
    ".rst": "rst",
    ".rb": "ruby",
    ".txt": "text",
}
_FILENAMES: Mapping[str, str] = {"Dockerfile": "dockerfile", "Makefile": "make"}

KNOWN_LANGUAGES: frozenset[str] = frozenset(
    {*_EXTENSIONS.values(), *_FILENAMES.values(), FALLBACK_LANGUAGE}
)

_GRAMMARS: Mapping[str, Callable[[], object]] = {
    "python": tree_sitter_python.language,
    "go": tree_sitter_go.language,
    "javascript": tree_sitter_javascript.language,
    "typescript": tree_sitter_typescript.language_typescript,
    "tsx": tree_sitter_typescript.language_tsx,
    "rust": tree_sitter_rust.language,
    "java": tree_sitter_java.language,
    "c": tree_sitter_c.language,
    "cpp": tree_sitter_cpp.language,
    "markdown": tree_sitter_markdown.language,
    "bash": tree_sitter_bash.language,
}


def detect_language(path: str) -> str:
    """Language name from the file name; FALLBACK_LANGUAGE ('text') when unknown."""
    pure = PurePosixPath(path)
    if pure.name in _FILENAMES:
        return _FILENAMES[pure.name]
    return _EXTENSIONS.get(pure.suffix.lower(), FALLBACK_LANGUAGE)


@dataclass(frozen=True)
class _Rules:
    """Which syntax nodes of a grammar become chunks."""

    definitions: Mapping[str, str]  # node type -> kind of a definition chunked whole
    containers: Mapping[str, str] = field(default_factory=dict)  # split into members when big
    wrappers: frozenset[str] = frozenset()  # wrap one definition: decorators, export, template
    namespaces: frozenset[str] = frozenset()  # their body holds top-level definitions
    variables: frozenset[str] = frozenset()  # count when a declarator's value is a function
    member_groups: frozenset[str] = frozenset()  # hold more members of the enclosing body
    needs_body: frozenset[str] = frozenset()  # count only with a body (not a forward decl)


_JS_DEFINITIONS = {
    "function_declaration": KIND_FUNCTION,
    "generator_function_declaration": KIND_FUNCTION,
    "function_expression": KIND_FUNCTION,  # export default function () {}
    "method_definition": KIND_METHOD,
}
_JS_RULES = _Rules(
    definitions=_JS_DEFINITIONS,
    containers={"class_declaration": "class", "class": "class"},
    wrappers=frozenset({"export_statement"}),
    variables=frozenset({"lexical_declaration", "variable_declaration"}),
)
_TS_RULES = _Rules(
    definitions={
        **_JS_DEFINITIONS,
        "method_signature": KIND_METHOD,
        "abstract_method_signature": KIND_METHOD,
        "interface_declaration": "interface",
        "type_alias_declaration": "type",
        "enum_declaration": "enum",
    },
    containers={"class_declaration": "class", "abstract_class_declaration": "class", "class": "class"},
    wrappers=frozenset({"export_statement"}),
    variables=frozenset({"lexical_declaration", "variable_declaration"}),
)
_C_TYPES = {"struct_specifier": "struct", "union_specifier": "union", "enum_specifier": "enum"}
_C_NEEDS_BODY = frozenset({*_C_TYPES, "class_specifier", "type_definition"})

_RULES: Mapping[str, _Rules] = {
    "python": _Rules(
        definitions={"function_definition": KIND_FUNCTION},
        containers={"class_definition": "class"},
        wrappers=frozenset({"decorated_definition"}),
    ),
    "go": _Rules(
        definitions={
            "function_declaration": KIND_FUNCTION,
            "method_declaration": KIND_METHOD,
            "type_declaration": "type",
        }
    ),
    "javascript": _JS_RULES,
    "typescript": _TS_RULES,
    "tsx": _TS_RULES,
    "rust": _Rules(
        definitions={
            "function_item": KIND_FUNCTION,
            "function_signature_item": KIND_FUNCTION,
            "struct_item": "struct",
            "enum_item": "enum",
            "union_item": "union",
            "type_item": "type",
            "macro_definition": "macro",
        },
        containers={"impl_item": "impl", "trait_item": "trait"},
        namespaces=frozenset({"mod_item"}),
    ),
    "java": _Rules(
        definitions={
            "method_declaration": KIND_METHOD,
            "constructor_declaration": KIND_METHOD,
            "compact_constructor_declaration": KIND_METHOD,
        },
        containers={
            "class_declaration": "class",
            "interface_declaration": "interface",
            "enum_declaration": "enum",
            "record_declaration": "record",
            "annotation_type_declaration": "interface",
        },
        member_groups=frozenset({"enum_body_declarations"}),
    ),
    "c": _Rules(
        definitions={"function_definition": KIND_FUNCTION, "type_definition": "type", **_C_TYPES},
        needs_body=_C_NEEDS_BODY,
    ),
    "cpp": _Rules(
        definitions={
            "function_definition": KIND_FUNCTION,
            "type_definition": "type",
            "union_specifier": "union",
            "enum_specifier": "enum",
        },
        containers={"class_specifier": "class", "struct_specifier": "struct"},
        wrappers=frozenset({"template_declaration"}),
        namespaces=frozenset({"namespace_definition", "linkage_specification"}),
        needs_body=_C_NEEDS_BODY,
    ),
    "bash": _Rules(definitions={"function_definition": KIND_FUNCTION}),
}

MINIFIED_AVG_LINE_CHARS = 1_000  # average line of a minified bundle; normal code is ~30-40
MINIFIED_MIN_CHARS = 4_096  # a smaller file is never called minified: it is cheap to chunk anyway
GENERATED_MARKER_LINES = 40  # markers are looked for in the first lines only (Go: before `package`)
_MARKER_LINE_CHARS = 400  # a longer line holds no marker (and is never scanned for one)
_PROSE_LANGUAGES = frozenset({"markdown", "rst", FALLBACK_LANGUAGE})  # long lines are normal prose

_PARSERS: dict[str, Parser] = {}
_PARSER_LOCK = threading.Lock()  # a Parser is not safe to share between threads


def _parse(language: str, source: bytes) -> Tree | None:
    try:
        with _PARSER_LOCK:
            parser = _PARSERS.get(language)
            if parser is None:
                parser = Parser(Language(_GRAMMARS[language]()))
                _PARSERS[language] = parser
            return parser.parse(source)
    except Exception:  # a broken grammar or parse must not lose the file: fall back to windows
        return None


# --- public entry point ------------------------------------------------------------------


@dataclass(frozen=True)
class _Span:
    start: int  # 1-based, inclusive
    end: int
    kind: str
    symbol: str | None


def chunk_file(path: str, text: str, settings: ChunkingSettings) -> list[Chunk]:
    """Chunks of one file, sorted by (start_line, end_line); never an empty-text chunk, never a
    text over ``settings.max_chunk_bytes`` UTF-8 bytes. Line numbers are those of `split_lines`."""
    lines = split_lines(text)
    if not lines:
        return []
    language = detect_language(path)
    spans = _syntax_spans(language, text, lines, settings)
    if spans is None:
        spans = [_Span(1, len(lines), KIND_WINDOW, None)]
    return _emit(path, language, lines, spans, settings)


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, as chunks and read_code number them (line n is item n - 1).

    Split on "\n" only; one trailing "\r" is stripped from each line (CRLF and LF may mix; a
    lone "\r" elsewhere stays in its line); a final "\n" opens no empty last line.
    """
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def generated_reason(path: str, text: str) -> str | None:
    """Why a file is minified or generated (a short human reason for the skip log), else None.

    Tight on purpose, since a skip drops the file: a minified or bundle file name (`*.min.*`,
    `*.map`, `*.bundle.js`, `*.chunk.js`), a code or markup file of at least MINIFIED_MIN_CHARS
    whose average line is MINIFIED_AVG_LINE_CHARS or more, or a generator's marker on a comment
    line among the first GENERATED_MARKER_LINES lines.
    """
    by_name = _generated_by_name(PurePosixPath(path).name.lower())
    if by_name is not None:
        return by_name
    language = detect_language(path)
    if language in _PROSE_LANGUAGES:
        return None
    newlines = text.count("\n")
    line_count = newlines + (0 if text.endswith("\n") else 1)
    average = (len(text) - newlines) / line_count
    if len(text) >= MINIFIED_MIN_CHARS and average >= MINIFIED_AVG_LINE_CHARS:
        return f"minified: average line {average:,.0f} chars"
    return _generated_marker(text, language)


_BUNDLE_PARTS = frozenset({"bundle", "chunk"})
_BUNDLE_SUFFIXES = frozenset({"js", "mjs", "cjs", "css"})


def _generated_by_name(name: str) -> str | None:
    parts = name.split(".")
    if len(parts) < 2:
        return None
    if parts[-1] == "map":
        return "source map: *.map"
    if "min" in parts[1:-1]:
        return f"minified: *.min.{parts[-1]}"
    if len(parts) >= 3 and parts[-2] in _BUNDLE_PARTS and parts[-1] in _BUNDLE_SUFFIXES:
        return f"bundle: *.{parts[-2]}.{parts[-1]}"
    return None


# Each marker is searched only on a comment line of the file's own language (a Python string
# holding " * @generated" is a generator's source, not generated); the reason names the marker.
_C_COMMENT = re.compile(r"\s*(?://|/\*|\*)")
_HASH_COMMENT = re.compile(r"\s*#")
_COMMENT_LINES: Mapping[str, re.Pattern[str]] = {
    **dict.fromkeys(("c", "cpp", "go", "java", "javascript", "typescript", "tsx", "rust", "css"), _C_COMMENT),
    **dict.fromkeys(("python", "bash", "yaml", "toml", "ruby", "make", "dockerfile", "ini"), _HASH_COMMENT),
    **dict.fromkeys(("html", "xml"), re.compile(r"\s*<!--")),
    "sql": re.compile(r"\s*--"),
}
_GENERATED_MARKERS: Sequence[tuple[re.Pattern[str], str]] = (
    (re.compile(r"^// Code generated .* DO NOT EDIT\.$"), "generated: 'Code generated ... DO NOT EDIT.' marker"),
    (re.compile(r"(?<![\w@])@generated\b"), "generated: '@generated' marker"),
    (re.compile(r"<auto-generated\b"), "generated: '<auto-generated>' marker"),
    (
        re.compile(r"Generated by the protocol buffer compiler\.\s+DO NOT EDIT!"),
        "generated: 'Generated by the protocol buffer compiler. DO NOT EDIT!' marker",
    ),
)


def _generated_marker(text: str, language: str) -> str | None:
    comment = _COMMENT_LINES.get(language)
    if comment is None:
        return None
    head = text[: GENERATED_MARKER_LINES * (_MARKER_LINE_CHARS + 1)]
    for line in split_lines(head)[:GENERATED_MARKER_LINES]:
        if len(line) > _MARKER_LINE_CHARS or not comment.match(line):
            continue
        for pattern, reason in _GENERATED_MARKERS:
            if pattern.search(line):
                return reason
    return None


def _syntax_spans(
    language: str, text: str, lines: Sequence[str], settings: ChunkingSettings
) -> list[_Span] | None:
    if language not in _GRAMMARS:
        return None
    source = text.encode("utf-8", errors="replace")
    tree = _parse(language, source)
    if tree is None:
        return None
    if language == "markdown":
        return _markdown_spans(tree.root_node, len(lines))
    scanner = _Scanner(_RULES[language], lines, source.split(b"\n"), settings)
    scanner.scan(tree.root_node.children, (), None, in_container=False, depth=0)
    spans = scanner.spans
    return [*spans, *_uncovered(1, len(lines), spans, lines, KIND_MODULE, None)]


def _emit(
    path: str, language: str, lines: Sequence[str], spans: Iterable[_Span], settings: ChunkingSettings
) -> list[Chunk]:
    seen: set[tuple[int, int, str]] = set()
    chunks: list[Chunk] = []
    for span in _merge_same_lines(spans, lines):
        for first, last in _windows(span.start, span.end, settings):
            for start, end, body in _capped(lines, first, last, settings.max_chunk_bytes):
                key = (start, end, body)  # the point id is (path, lines, text): one chunk each
                if not body.strip() or key in seen:
                    continue
                seen.add(key)
                chunks.append(
                    Chunk(
                        path=path,
                        start_line=start,
                        end_line=end,
                        language=language,
                        symbol=span.symbol,
                        kind=span.kind,
                        text=body,
                    )
                )
    chunks.sort(key=lambda c: (c.start_line, c.end_line, c.kind, c.symbol or ""))
    return chunks


def _merge_same_lines(spans: Iterable[_Span], lines: Sequence[str]) -> list[_Span]:
    """Spans trimmed of blank edge lines; spans covering the same lines become one (a minified
    line of 5,000 definitions is one span, not 5,000 copies of the line). A merged span keeps a
    kind and a symbol only when all of its spans agree: else 'module' and no symbol."""
    merged: dict[tuple[int, int], _Span] = {}
    for span in spans:
        trimmed = _trim(span.start, span.end, lines)
        if trimmed is None:
            continue
        known = merged.get(trimmed)
        if known is None:
            merged[trimmed] = _Span(*trimmed, span.kind, span.symbol)
        elif (known.kind, known.symbol) != (span.kind, span.symbol):
            kind = known.kind if known.kind == span.kind else KIND_MODULE
            symbol = known.symbol if known.symbol == span.symbol else None
            merged[trimmed] = _Span(*trimmed, kind, symbol)
    return list(merged.values())


def _capped(lines: Sequence[str], start: int, end: int, cap: int) -> Iterator[tuple[int, int, str]]:
    """(start, end, text) pieces of lines start..end, each at most ``cap`` UTF-8 bytes: whole
    when it fits, else consecutive runs of lines, and a line longer than ``cap`` in character
    pieces that share its line number. Pieces never overlap, so their total is the window's."""
    selected = lines[start - 1 : end]
    body = "\n".join(selected)
    if _utf8_length(body) <= cap:
        yield start, end, body
        return
    group: list[str] = []
    group_start = start
    size = 0
    for number, line in enumerate(selected, start):
        length = _utf8_length(line)
        if group and size + 1 + length > cap:
            yield group_start, number - 1, "\n".join(group)
            group = []
        if length > cap:
            for piece in split_by_bytes(line, cap):
                yield number, number, piece
            continue
        if not group:
            group_start, size = number, length
        else:
            size += 1 + length
        group.append(line)
    if group:
        yield group_start, group_start + len(group) - 1, "\n".join(group)


def _utf8_length(text: str) -> int:
    """UTF-8 bytes of ``text``; a lone surrogate (from surrogateescape or surrogatepass) counts 3."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def split_by_bytes(text: str, cap: int) -> list[str]:
    """``text`` cut into pieces of at most ``cap`` UTF-8 bytes (``cap`` >= 8), never inside a
    character's UTF-8 sequence nor between the two halves of a surrogate pair; joined, the pieces
    are ``text``."""
    if text.isascii():
        return [text[i : i + cap] for i in range(0, len(text), cap)]
    data = text.encode("utf-8", "surrogatepass")
    pieces: list[str] = []
    position = 0
    while position < len(data):
        cut = min(position + cap, len(data))
        if cut < len(data):
            while data[cut] & 0xC0 == 0x80:  # a continuation byte: back to the sequence's lead
                cut -= 1
            if _splits_surrogate_pair(data, cut) and cut - 3 > position:
                cut -= 3
        pieces.append(data[position:cut].decode("utf-8", "surrogatepass"))
        position = cut
    return pieces


def _splits_surrogate_pair(data: bytes, cut: int) -> bool:
    """A high surrogate (ED A0-AF xx) right before ``cut`` and a low one (ED B0-BF xx) at it."""
    return (
        cut >= 3
        and cut + 1 < len(data)
        and data[cut - 3] == 0xED
        and 0xA0 <= data[cut - 2] <= 0xAF
        and data[cut] == 0xED
        and 0xB0 <= data[cut + 1] <= 0xBF
    )


def _windows(start: int, end: int, settings: ChunkingSettings) -> Iterator[tuple[int, int]]:
    """Windows of window_lines overlapping by overlap_lines; the last one ends at ``end``."""
    step = settings.window_lines - settings.overlap_lines
    first = start
    while True:
        last = min(first + settings.window_lines - 1, end)
        yield first, last
        if last >= end:
            return
        first += step


def _trim(start: int, end: int, lines: Sequence[str]) -> tuple[int, int] | None:
    end = min(end, len(lines))
    while start <= end and not lines[start - 1].strip():
        start += 1
    while end >= start and not lines[end - 1].strip():
        end -= 1
    return (start, end) if start <= end else None


def _uncovered(
    start: int,
    end: int,
    spans: Iterable[_Span],
    lines: Sequence[str],
    kind: str,
    symbol: str | None,
) -> list[_Span]:
    """Runs of lines in [start, end] outside every span, dropping runs with no word character."""
    covered = [False] * (end - start + 1)
    for span in spans:
        for line in range(max(span.start, start), min(span.end, end) + 1):
            covered[line - start] = True
    runs: list[_Span] = []
    run_start: int | None = None
    for offset, is_covered in enumerate([*covered, True]):
        line = start + offset
        if not is_covered and run_start is None:
            run_start = line
        elif is_covered and run_start is not None:
            if any(_has_word(lines[i - 1]) for i in range(run_start, line)):
                runs.append(_Span(run_start, line - 1, kind, symbol))
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
        self, rules: _Rules, lines: Sequence[str], byte_lines: Sequence[bytes], settings: ChunkingSettings
    ) -> None:
        self.rules = rules
        self.lines = lines
        self.byte_lines = byte_lines
        self.window = settings.window_lines
        self.max_depth = settings.max_syntax_depth
        self.spans: list[_Span] = []

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
            self.spans.append(_Span(start, end, kind, symbol))
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


_FUNCTION_VALUES = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function"}
)


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
            _text(c.child_by_field_name("name"))
            for c in node.named_children
            if c.type in ("type_spec", "type_alias")
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


def _markdown_spans(root: Node, line_count: int) -> list[_Span]:
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
    spans: list[_Span] = []
    first = headings[0][0] if headings else line_count + 1
    if first > 1:
        spans.append(_Span(1, first - 1, KIND_SECTION, None))
    for index, (start, title) in enumerate(headings):
        end = headings[index + 1][0] - 1 if index + 1 < len(headings) else line_count
        spans.append(_Span(start, end, KIND_SECTION, title))
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
    """``text`` without an ATX closing sequence (`## Title ##` → `## Title`): trailing '#'s
    that start the text or follow whitespace, and the whitespace around them. Linear (a regex
    `(^|\s+)#+\s*$` is quadratic on a long run of spaces)."""
    body = text.rstrip()
    opened = body.rstrip("#")
    if opened == body or (opened and not opened[-1].isspace()):
        return text
    return opened.rstrip()
