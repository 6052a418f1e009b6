"""A docstring → function retrieval evaluation built from installed packages this project does not contain.

Pure: no Ray, no model. `bench.quality` indexes the corpus and runs the queries through MCP.

    queries = build_corpus(DEV_PACKAGES, out_dir)  # every eligible query
    queries = build_corpus(DEV_PACKAGES, out_dir, max_queries=300, seed=0)  # a seeded sample

0. Two package sets, each its own corpus: DEV_PACKAGES, the set search is tuned on, and
   TEST_PACKAGES, held out (other domains and docstring styles: an HTTP client with reST
   docstrings, terminal rendering with Google-style ones, version/specifier parsing). No tuning
   decision may look at the test set's numbers; the bench reports both, dev first.

1. Every `.py` file of each package is copied to `out_dir/corpus/<package>/...` with the docstrings
   of its functions, methods and classes removed (module docstrings stay). Only the docstring's own
   lines are deleted; every other byte is kept. A docstring that is the only statement of its body
   becomes `pass` at its indentation; one that shares a line with code (`def f(): "doc"`) is
   replaced in place by `pass`. Every copy is re-parsed; a file whose cut would not parse is cut the
   conservative way instead (the string literal replaced by `...`), and one that still would not is
   left out (none in the default packages).
2. Queries: one per documented function or method, the query being its docstring's first paragraph
   (whitespace collapsed, Sphinx roles reduced to their text, at most 300 characters, cut at a word),
   the target being the def's range (first decorator to last line) in the COPY, computed by parsing
   the copy. Rules, chosen to keep queries a user could have written about code they can find:
   - only module-level functions and methods of (possibly nested) classes; functions defined inside
     functions are not targets (their docstrings are still removed);
   - no name with a leading underscore anywhere in the qualified name (private helpers, private
     classes, and dunders such as `__init__`, whose docstrings mostly restate the class's);
   - no `@overload` stubs (the implementation carries the meaning);
   - the first paragraph has at least 5 words and does not start with "Deprecated", "Alias",
     "Same as" or "See ";
   - a query text that is the docstring of more than one function (sync/async twins such as
     `Client.get` / `AsyncClient.get`) has no single right answer: every such candidate is dropped.
3. All remaining candidates, or a seeded sample of `max_queries` of them (all when there are fewer).

`out_dir/queries.json` holds the queries and the corpus facts (packages and versions, files,
candidates, drops). A hit matches a query when its path equals the target's and its line range
overlaps the target's range (chunks of long functions are windows).
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import random
import re
import shutil
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict

DEV_PACKAGES = ("httpx", "click", "jinja2", "markdown_it")  # tuned on
TEST_PACKAGES = ("requests", "rich", "packaging")  # held out: no tuning decision looks at these
PACKAGE_SETS: dict[str, tuple[str, ...]] = {"dev": DEV_PACKAGES, "test": TEST_PACKAGES}  # reported in this order
DEFAULT_SEED = 0
CORPUS_FOLDER = "corpus"
QUERIES_FILE = "queries.json"
MIN_WORDS = 5
MAX_QUERY_CHARS = 300
SKIPPED_DIRS = frozenset({"tests", "test", "__pycache__"})
TRIVIAL_START = re.compile(r"^(deprecated|alias\b|same as\b|see\s)", re.IGNORECASE)
_ROLE = re.compile(r":[\w.-]+(?::[\w.-]+)*:`(~?)([^`]+)`")
_LOCALS = "<locals>"

Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


class Query(BaseModel):
    """One docstring query and the def it was taken from (path relative to the corpus folder)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    query: str
    path: str
    symbol: str
    start_line: int
    end_line: int
    package: str = ""


@dataclass(frozen=True)
class DefSite:
    """A function, method or class definition, in traversal order."""

    qualname: str
    node: Def
    in_function: bool  # defined inside a function body (a local, never a target)

    @property
    def start_line(self) -> int:
        return min([self.node.lineno, *(d.lineno for d in self.node.decorator_list)])

    @property
    def end_line(self) -> int:
        return self.node.end_lineno or self.node.lineno


# --- definitions -----------------------------------------------------------------------------


def iter_defs(tree: ast.Module) -> Iterator[DefSite]:
    """Every def and class of a module, depth first in source order, with its qualified name."""

    def walk(node: ast.AST, scope: list[str], in_function: bool) -> Iterator[DefSite]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                qualname = ".".join([*scope, child.name])
                yield DefSite(qualname, child, in_function)
                is_function = not isinstance(child, ast.ClassDef)
                inner = [*scope, child.name, _LOCALS] if is_function else [*scope, child.name]
                yield from walk(child, inner, in_function or is_function)
            else:
                yield from walk(child, scope, in_function)

    return walk(tree, [], False)


def docstring_node(node: ast.AST) -> ast.Expr | None:
    body = getattr(node, "body", None)
    if not body or not isinstance(body[0], ast.Expr):
        return None
    value = body[0].value
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return body[0]
    return None


# --- docstring removal -------------------------------------------------------------------------


def _line_ending(line: bytes) -> bytes:
    for ending in (b"\r\n", b"\n", b"\r"):
        if line.endswith(ending):
            return ending
    return b""


def _cut(lines: list[bytes], expr: ast.Expr, only_statement: bool, conservative: bool) -> None:
    """Remove one docstring from `lines` (bytes, line ends kept) in place. Offsets are UTF-8 bytes."""
    first, last = expr.lineno - 1, (expr.end_lineno or expr.lineno) - 1
    start, end = expr.col_offset, expr.end_col_offset or 0
    prefix, suffix = lines[first][:start], lines[last][end:]
    rest = suffix.strip()
    owns_lines = prefix.strip() == b"" and (rest == b"" or rest.startswith(b"#"))
    if conservative:
        lines[first : last + 1] = [prefix + b"..." + suffix]
    elif owns_lines and only_statement:
        lines[first : last + 1] = [prefix + b"pass" + _line_ending(lines[last])]
    elif owns_lines:
        del lines[first : last + 1]
    else:
        lines[first : last + 1] = [prefix + b"pass" + suffix]


def _strip_once(source: bytes, conservative: bool) -> tuple[bytes, int]:
    tree = ast.parse(source)
    cuts: list[tuple[ast.Expr, bool]] = []
    for site in iter_defs(tree):
        expr = docstring_node(site.node)
        if expr is not None:
            cuts.append((expr, len(site.node.body) == 1))
    if not cuts:
        return source, 0
    lines = source.splitlines(keepends=True)
    for expr, only in sorted(cuts, key=lambda c: (c[0].lineno, c[0].col_offset), reverse=True):
        _cut(lines, expr, only, conservative)
    return b"".join(lines), len(cuts)


def strip_docstrings(source: bytes | str) -> bytes:
    """The source without the docstrings of its functions, methods and classes; everything else kept.

    Raises SyntaxError when the source itself does not parse, ValueError when no cut parses.
    """
    data = source.encode("utf-8") if isinstance(source, str) else source
    ast.parse(data)
    for conservative in (False, True):
        out = data
        try:
            for _ in range(4):  # a string right after a removed docstring becomes the next docstring
                out, cut = _strip_once(out, conservative)
                if cut == 0:
                    return out
        except SyntaxError:
            continue
    raise ValueError("removing the docstrings leaves a file that does not parse")


# --- queries ------------------------------------------------------------------------------------


def query_text(docstring: str) -> str | None:
    """A docstring's first paragraph as a query, or None when it is too short or trivial."""
    paragraph: list[str] = []
    for line in docstring.strip().splitlines():
        if not line.strip():
            break
        paragraph.append(line.strip())
    text = " ".join(" ".join(paragraph).split())
    text = _ROLE.sub(lambda m: m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2), text)
    text = text.replace("``", "").replace("`", "")
    text = " ".join(text.split())
    if len(text.split()) < MIN_WORDS or TRIVIAL_START.match(text):
        return None
    if len(text) > MAX_QUERY_CHARS:
        text = text[:MAX_QUERY_CHARS].rsplit(" ", 1)[0]
    return text


def _is_overload(node: Def) -> bool:
    for decorator in node.decorator_list:
        name = decorator.attr if isinstance(decorator, ast.Attribute) else getattr(decorator, "id", "")
        if name == "overload":
            return True
    return False


def eligible(site: DefSite) -> bool:
    return (
        not isinstance(site.node, ast.ClassDef)
        and not site.in_function
        and not any(part.startswith("_") for part in site.qualname.split("."))
        and not _is_overload(site.node)
    )


def file_queries(original: bytes | str, stripped: bytes | str, path: str, package: str = "") -> list[Query]:
    """Candidate queries of one file: docstrings read from the original, targets from the stripped copy."""
    before, after = list(iter_defs(ast.parse(original))), list(iter_defs(ast.parse(stripped)))
    if [s.qualname for s in before] != [s.qualname for s in after]:
        raise ValueError(f"{path}: the stripped copy does not define the same names")
    queries = []
    for old, new in zip(before, after, strict=True):
        if not eligible(old):
            continue
        docstring = ast.get_docstring(old.node)
        text = query_text(docstring) if docstring else None
        if text is None:
            continue
        queries.append(
            Query(
                query=text,
                path=path,
                symbol=old.qualname,
                start_line=new.start_line,
                end_line=new.end_line,
                package=package,
            )
        )
    return queries


def drop_ambiguous(candidates: Sequence[Query]) -> tuple[list[Query], int]:
    """Candidates whose query text is unique; and how many were dropped for sharing one."""
    counts = Counter(q.query for q in candidates)
    kept = [q for q in candidates if counts[q.query] == 1]
    return kept, len(candidates) - len(kept)


def sample_queries(candidates: Sequence[Query], max_queries: int | None, seed: int) -> list[Query]:
    """A seeded sample (None: all), independent of the candidates' order, returned in (path, line) order."""
    ordered = sorted(candidates, key=lambda q: (q.path, q.start_line, q.symbol))
    if max_queries is None or max_queries >= len(ordered):
        return ordered
    picked = random.Random(seed).sample(range(len(ordered)), max_queries)
    return [ordered[i] for i in sorted(picked)]


# --- corpus -------------------------------------------------------------------------------------


def package_root(package: str) -> Path:
    """The folder of an importable top-level package, without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"{package!r} is not an installed package (a folder with modules)")
    return Path(next(iter(spec.submodule_search_locations)))


def package_version(package: str) -> str:
    for dist in importlib.metadata.packages_distributions().get(package, []):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def corpus_dir(out_dir: Path) -> Path:
    """The folder to index (queries.json sits beside it, not in it)."""
    return out_dir / CORPUS_FOLDER


def _sources(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*.py")):
        if not SKIPPED_DIRS.intersection(path.relative_to(root).parts[:-1]):
            yield path


def build_corpus(
    packages: Sequence[str],
    out_dir: Path,
    max_queries: int | None = None,
    seed: int = DEFAULT_SEED,
    test_suites: Path | None = None,
) -> list[Query]:
    """Copy the packages' sources without docstrings into corpus_dir(out_dir); write and return the queries.

    max_queries None keeps every eligible query; a number keeps a seeded sample of that many.
    `test_suites`: a folder holding each package's own test suite as `<package>/` (e.g. the `tests/`
    of its sdist), copied unchanged under `tests/<package>/` as distractors: they make no query and
    no target, so the truth is the same with or without them.
    """
    if max_queries is not None and max_queries < 1:
        raise ValueError("max_queries must be at least 1")
    target = corpus_dir(out_dir)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    candidates: list[Query] = []
    facts: dict[str, Any] = {"packages": {}, "files": 0, "skipped_files": []}
    for package in packages:
        root = package_root(package)
        facts["packages"][package] = package_version(package)
        for source in _sources(root):
            rel = str(PurePosixPath(package, *source.relative_to(root).parts))
            original = source.read_bytes()
            try:
                stripped = strip_docstrings(original)
            except (SyntaxError, ValueError) as exc:
                facts["skipped_files"].append(f"{rel}: {type(exc).__name__}")
                continue
            dest = target / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(stripped)
            facts["files"] += 1
            candidates.extend(file_queries(original, stripped, rel, package))
    facts["test_files"] = copy_test_suites(packages, test_suites, target) if test_suites is not None else 0
    unique, ambiguous = drop_ambiguous(candidates)
    queries = sample_queries(unique, max_queries, seed)
    facts.update(
        candidates=len(candidates), dropped_ambiguous=ambiguous, eligible=len(unique), sampled=len(queries), seed=seed
    )
    manifest = {"facts": facts, "queries": [q.model_dump() for q in queries]}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / QUERIES_FILE).write_text(json.dumps(manifest, indent=1))
    return queries


def copy_test_suites(packages: Sequence[str], suites: Path, target: Path) -> int:
    """Copy each package's test suite (`suites/<package>/**/*.py`, as it is) to `target/tests/<package>/`;
    how many files. A package without a suite there is an error: the run would measure less than it says."""
    copied = 0
    for package in packages:
        root = suites / package
        if not root.is_dir():
            raise ValueError(f"no test suite for {package!r} under {suites} (expected {root}/)")
        for source in sorted(root.rglob("*.py")):
            dest = target / "tests" / package / source.relative_to(root)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(source.read_bytes())
            copied += 1
    return copied


def read_facts(out_dir: Path) -> dict[str, Any]:
    facts: dict[str, Any] = json.loads((out_dir / QUERIES_FILE).read_text())["facts"]
    return facts


def load_queries(out_dir: Path) -> list[Query]:
    return [Query.model_validate(q) for q in json.loads((out_dir / QUERIES_FILE).read_text())["queries"]]


# --- metrics ------------------------------------------------------------------------------------


def hit_matches(hit: Mapping[str, Any], query: Query) -> bool:
    """Same file, and the hit's line range overlaps the target def's range."""
    return (
        hit.get("path") == query.path
        and int(hit["start_line"]) <= query.end_line
        and int(hit["end_line"]) >= query.start_line
    )


def first_match_rank(hits: Sequence[Mapping[str, Any]], query: Query) -> int | None:
    """1-based rank of the first hit on the target, None when no hit is."""
    return next((rank for rank, hit in enumerate(hits, 1) if hit_matches(hit, query)), None)


def recall_at(ranks: Sequence[int | None], k: int) -> float:
    """Share of queries whose target is within the top k."""
    if not ranks:
        raise ValueError("no ranks")
    return sum(1 for r in ranks if r is not None and r <= k) / len(ranks)


def mrr_at(ranks: Sequence[int | None], k: int = 10) -> float:
    """Mean reciprocal rank, a target below rank k counting 0."""
    if not ranks:
        raise ValueError("no ranks")
    return sum(1.0 / r for r in ranks if r is not None and r <= k) / len(ranks)
