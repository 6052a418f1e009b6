"""bench.navigation's truth and its simplest competitor: who calls and mentions a Python function,
as jedi (an inference engine we did not write) answers it, and as a grep for `name(` does.

A site is (path relative to the root, line): several calls on one line are one site.

Jedi's rules, and what this module adds to them:
- `get_references(scope="project")` on the def's name gives the definition, every use jedi infers
  to be that function, and the names of the imports that bring it in. A reference is kept when it
  is inside the root and `is_definition()` is False; it is a call when the next non-space character
  after the name on its line is "(".
- jedi counts `from m import f` as a definition of f (dropped by the rule above) but `from m import f
  as g` as a non-definition reference, and never follows `g` (it searches by name). The truth here
  follows such an alias with a second get_references on `g`, and drops every site on an import
  statement's lines from the references (the same drop is applied to our answers).
- A call of a class reaches its `__init__`/`__new__` (the code graph's rule): the truth of a
  constructor adds the class's call sites, found by get_references on the class name.
- Transitive callers (impact): from each call site, `get_context` gives the enclosing function
  (module- and class-level sites end the chain there), whose call sites are the next level.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jedi  # type: ignore[import-untyped]

__all__ = ["CONSTRUCTORS", "Grep", "JediTruth", "Site", "Target", "Truth", "import_lines", "is_call"]

Site = tuple[str, int]  # (path relative to the root, 1-based line)
CONSTRUCTORS = frozenset({"__init__", "__new__"})  # what a call of the class reaches (cluster.graph.python_spec)
NAME_SEARCH_LINES = 40  # a def's name is looked for from its recorded line on (decorators, long signatures)
_ALIAS = re.compile(r"\s+as\s+([A-Za-z_]\w*)")


@dataclass(frozen=True)
class Target:
    """A function or method: its file, the line it starts on, its name, and for a constructor the
    line and name of its class (a call of the class reaches it)."""

    path: str
    line: int
    name: str
    owner: tuple[int, str] | None = None


@dataclass
class Truth:
    """What jedi says reaches a target: its call sites, and every non-import reference (calls included)."""

    calls: set[Site] = field(default_factory=set)
    references: set[Site] = field(default_factory=set)


@dataclass(frozen=True)
class _Ref:
    path: str
    line: int
    column: int
    definition: bool


def is_call(text: str, column: int, name: str) -> bool:
    """True when `name`, at `column` of the line `text`, is followed by "(" (spaces allowed)."""
    return text[column + len(name) :].lstrip().startswith("(")


def import_lines(source: str) -> set[int]:
    """Every line of every import statement of a module (empty when it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


class _Sources:
    """The .py files under a root, read once: lines and import lines by relative path."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._lines: dict[str, list[str]] = {}
        self._imports: dict[str, set[int]] = {}

    def relative(self, path: Path | str) -> str | None:
        try:
            return Path(path).resolve().relative_to(self.root).as_posix()
        except ValueError:
            return None

    def lines(self, rel: str) -> list[str]:
        if rel not in self._lines:
            self._lines[rel] = (self.root / rel).read_text(encoding="utf-8", errors="replace").splitlines()
        return self._lines[rel]

    def text(self, rel: str, line: int) -> str:
        lines = self.lines(rel)
        return lines[line - 1] if 0 < line <= len(lines) else ""

    def imports(self, rel: str) -> set[int]:
        if rel not in self._imports:
            self._imports[rel] = import_lines("\n".join(self.lines(rel)))
        return self._imports[rel]


class JediTruth(_Sources):
    """jedi over one root (`jedi.Project(path=root)`), answering for targets in files under it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.project = jedi.Project(path=self.root)

    def script(self, rel: str) -> jedi.Script:
        """A fresh Script per question: one reused across questions answered differently in a
        trial (httpx: `self.jar.extract_cookies(...)`, a stdlib CookieJar, taken for Cookies')."""
        return jedi.Script(path=self.root / rel, project=self.project)

    def name_position(self, rel: str, line: int, name: str, keyword: str = "def") -> tuple[int, int] | None:
        """(line, column) of `name` in its `def name` (or `class name`) at or after `line`."""
        pattern = re.compile(rf"\b{keyword}\s+({re.escape(name)})\b")
        lines = self.lines(rel)
        for number in range(line, min(len(lines), line + NAME_SEARCH_LINES) + 1):
            found = pattern.search(lines[number - 1])
            if found:
                return number, found.start(1)
        return None

    def positions(self, target: Target) -> list[tuple[str, int, int]]:
        """Where get_references is asked: the def's name, and the class's for a constructor.
        ValueError when the def's name is not found from its line on."""
        at = self.name_position(target.path, target.line, target.name)
        if at is None:
            raise ValueError(f"no 'def {target.name}' from {target.path}:{target.line}")
        out = [(target.path, *at)]
        if target.owner is not None and target.name in CONSTRUCTORS:
            owner = self.name_position(target.path, target.owner[0], target.owner[1], keyword="class")
            if owner is not None:
                out.append((target.path, *owner))
        return out

    def _references(self, rel: str, line: int, column: int, scope: str = "project") -> list[_Ref]:
        out = []
        for name in self.script(rel).get_references(line, column, scope=scope):
            where = self.relative(name.module_path) if name.module_path else None
            if where is not None and name.line is not None and name.column is not None:
                out.append(_Ref(where, name.line, name.column, name.is_definition()))
        return out

    def uses(self, positions: Iterable[tuple[str, int, int]]) -> tuple[set[_Ref], set[_Ref]]:
        """(call sites, all non-definition references) of the names at `positions`, following
        `import f as g` aliases once. Sites on import lines are in neither."""
        calls: set[_Ref] = set()
        references: set[_Ref] = set()
        pending = [(rel, line, column, "project") for rel, line, column in positions]
        followed: set[tuple[str, int, int]] = set()
        while pending:
            rel, line, column, scope = pending.pop()
            name = _word_at(self.text(rel, line), column)
            for ref in self._references(rel, line, column, scope):
                if ref.definition:
                    continue
                text = self.text(ref.path, ref.line)
                if ref.line in self.imports(ref.path):
                    alias = _ALIAS.match(text, ref.column + len(name))
                    key = (ref.path, ref.line, alias.start(1) if alias else -1)
                    if alias and key not in followed:
                        followed.add(key)
                        pending.append((ref.path, ref.line, alias.start(1), "file"))
                    continue
                references.add(ref)
                if is_call(text, ref.column, _word_at(text, ref.column)):
                    calls.add(ref)
        return calls, references

    def truth(self, target: Target) -> Truth:
        calls, references = self.uses(self.positions(target))
        return Truth({(r.path, r.line) for r in calls}, {(r.path, r.line) for r in references})

    def transitive_calls(self, target: Target, depth: int) -> set[Site]:
        """Call sites of `target` and of the functions enclosing them, up to `depth` calls away."""
        found: set[Site] = set()
        seen: set[tuple[str, int]] = {(target.path, target.line)}
        frontier = [self.positions(target)]
        for _ in range(depth):
            following: list[list[tuple[str, int, int]]] = []
            for positions in frontier:
                calls, _ = self.uses(positions)
                for ref in sorted(calls, key=lambda r: (r.path, r.line, r.column)):
                    found.add((ref.path, ref.line))
                    context = self.script(ref.path).get_context(ref.line, ref.column)
                    if context.type != "function" or context.module_path is None:
                        continue  # module or class level: nothing calls it
                    rel = self.relative(context.module_path)
                    if rel is None or context.line is None or context.column is None:
                        continue
                    if (rel, context.line) in seen:
                        continue
                    seen.add((rel, context.line))
                    at = [(rel, context.line, context.column)]
                    parent = context.parent()
                    if context.name in CONSTRUCTORS and parent.type == "class" and parent.line and parent.column:
                        at.append((rel, parent.line, parent.column))
                    following.append(at)
            frontier = following
            if not frontier:
                break
        return found


def _word_at(text: str, column: int) -> str:
    found = re.match(r"[A-Za-z_]\w*", text[column:])
    return found.group(0) if found else ""


class Grep(_Sources):
    """The simplest competitor: a regular expression over every .py file under the root."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.files = sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*.py"))

    def _lines_matching(self, names: Sequence[str], pattern: re.Pattern[str]) -> set[Site]:
        defining = re.compile(r"\b(?:def|class)\s+(?:" + "|".join(map(re.escape, names)) + r")\b")
        out: set[Site] = set()
        for rel in self.files:
            for number, text in enumerate(self.lines(rel), 1):
                if any(n in text for n in names) and pattern.search(text) and not defining.search(text):
                    out.add((rel, number))
        return out

    def calls(self, names: Sequence[str]) -> set[Site]:
        """Lines with `name(` (spaces allowed) for any of `names`, but no `def name`/`class name`."""
        alternatives = "|".join(map(re.escape, names))
        return self._lines_matching(names, re.compile(rf"\b(?:{alternatives})\s*\("))

    def references(self, names: Sequence[str]) -> set[Site]:
        """Lines with any of `names` as a word, but no `def name`/`class name`."""
        alternatives = "|".join(map(re.escape, names))
        return self._lines_matching(names, re.compile(rf"\b(?:{alternatives})\b"))
