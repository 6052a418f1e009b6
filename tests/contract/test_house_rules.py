"""The shape of the repository stays readable: short modules, short functions, no import circles
anywhere, and a folder listing that docs/ARCHITECTURE.md's map describes one line per subpackage of
cluster/. Each rule is also run over a small tree that breaks it, so a rule that could never fail is
caught too.

Today's offenders are listed once, explicitly, and an entry that is no longer needed fails the test
too: the lists can only shrink. tests/ is held to the length rules like the code (its fixtures are
repositories the tests index: data, not our modules).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cluster", "actors", "serve_apps", "jobs", "sidecar", "samespace")  # the installed packages
TESTS = "tests"  # the tests, their support package and fakes: held to the length rules too
DATA = "fixtures"  # tests/fixtures: repositories the tests index, not modules of ours
MAX_MODULE_LINES = 500  # static assets (a page's JS and CSS) are not Python modules and are not counted
MAX_FUNCTION_LINES = 80  # from `def` to its last line, docstring and nested functions included
# The map in ARCHITECTURE.md: a line per subpackage starting with its folder, e.g. "- `cluster/gate/` — ...".
MAP_ENTRY = re.compile(r"^- `cluster/([a-z_]+)/`", re.MULTILINE)

# Modules allowed over MAX_MODULE_LINES, named one by one (none today; an entry fails once not needed).
LONG_MODULES_ALLOWED = frozenset({})
# Functions allowed over MAX_FUNCTION_LINES, the same way (none today; bench/ is exempt from this rule).
LONG_FUNCTIONS_ALLOWED = frozenset({})


def python_files(root: Path, folders: Iterable[str]) -> Iterator[Path]:
    """Every module under `folders` (each must exist: a rule over a folder that moved would hold of
    nothing), fixtures aside."""
    for folder in folders:
        assert (root / folder).is_dir(), f"{folder}/ is not a folder of this repository"
        yield from (p for p in sorted((root / folder).rglob("*.py")) if DATA not in p.relative_to(root).parts)


def long_modules(root: Path, folders: Iterable[str], limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    """Each module over `limit` lines, by its path from `root`."""
    lengths = {
        path.relative_to(root).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in python_files(root, folders)
    }
    return {path: n for path, n in sorted(lengths.items()) if n > limit}


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every function under `tree`, methods and nested functions too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                yield name, (node.end_lineno or node.lineno) - node.lineno + 1
            yield from _functions(node, f"{name}.")
        else:
            yield from _functions(node, prefix)


def long_functions(root: Path, folders: Iterable[str], limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """Each function over `limit` lines, as `path::Qualified.name`."""
    found = {}
    for path in python_files(root, folders):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, lines in _functions(tree):
            if lines > limit:
                found[f"{path.relative_to(root).as_posix()}::{name}"] = lines
    return dict(sorted(found.items()))


def beyond_the_allowance(found: dict[str, int], allowed: frozenset[str]) -> tuple[dict[str, int], list[str]]:
    """(offenders the allow-list does not name, entries of the allow-list that are no longer needed)."""
    return {k: n for k, n in found.items() if k not in allowed}, sorted(allowed - set(found))


def import_circles(*packages: str) -> list[tuple[str, ...]]:
    """Every import circle among `packages`' modules, imports inside functions and under
    TYPE_CHECKING included: each strongly connected component of two or more modules, sorted."""
    graph = grimp.build_graph(*packages, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[tuple[str, ...]] = []
    for root in sorted(graph.modules):  # Tarjan's algorithm, iterative (the graph is deep)
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, imports = work[-1]
            imported = next(imports, None)
            if imported is not None:
                if imported not in index:
                    index[imported] = low[imported] = len(index)
                    stack.append(imported)
                    on_stack.add(imported)
                    work.append((imported, iter(sorted(graph.find_modules_directly_imported_by(imported)))))
                elif imported in on_stack:
                    low[module] = min(low[module], index[imported])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    circles.append(tuple(sorted(component)))
    return sorted(circles)


def describe_circle(circle: tuple[str, ...], *packages: str) -> str:
    """One way round the circle, `a -> b -> ... -> a`, for the failure message."""
    graph = grimp.build_graph(*packages, cache_dir=None)
    start = circle[0]
    step = min(m for m in graph.find_modules_directly_imported_by(start) if m in circle)
    back = graph.find_shortest_chain(importer=step, imported=start) or (step, start)
    return " -> ".join((start, *back))


def unmapped_subpackages(root: Path) -> tuple[set[str], set[str]]:
    """(subpackages the map lacks, map entries with no subpackage)."""
    folders = {p.parent.name for p in (root / "cluster").glob("*/__init__.py")}
    mapped = set(MAP_ENTRY.findall((root / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")))
    return folders - mapped, mapped - folders


def importers_of(root: Path, folders: Iterable[str], package: str) -> list[str]:
    """Modules under `folders` outside `package` that import it (an `import` or `from` anywhere in
    the module, inside functions too)."""
    found = []
    for path in python_files(root, folders):
        if path.relative_to(root).parts[0] == package:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            if any(name == package or name.startswith(f"{package}.") for name in names):
                found.append(path.relative_to(root).as_posix())
                break
    return found


def test_nothing_outside_jobs_imports_a_job() -> None:
    """Jobs are entry points (`python -m jobs.reindex`): the pipeline they run lives in cluster/build."""
    assert importers_of(ROOT, (*PACKAGES, "bench", TESTS), "jobs") == []


def test_no_module_is_over_the_limit() -> None:
    unlisted, stale = beyond_the_allowance(long_modules(ROOT, (*PACKAGES, "bench", TESTS)), LONG_MODULES_ALLOWED)
    assert unlisted == {}, f"modules over {MAX_MODULE_LINES} lines: split them"
    assert stale == [], "no longer over the limit: remove from LONG_MODULES_ALLOWED"


def test_no_function_outside_bench_is_over_the_limit() -> None:
    unlisted, stale = beyond_the_allowance(long_functions(ROOT, (*PACKAGES, TESTS)), LONG_FUNCTIONS_ALLOWED)
    assert unlisted == {}, f"functions over {MAX_FUNCTION_LINES} lines: split them"
    assert stale == [], "no longer over the limit (or gone): remove from LONG_FUNCTIONS_ALLOWED"


def test_the_repository_has_no_import_circles() -> None:
    circles = import_circles(*PACKAGES)
    assert circles == [], "import circles:\n" + "\n".join(describe_circle(c, *PACKAGES) for c in circles)


def test_the_architecture_map_lists_exactly_the_subpackages() -> None:
    missing, stale = unmapped_subpackages(ROOT)
    assert (missing, stale) == (set(), set())


@pytest.fixture
def bad_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / "badpkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from badpkg import b\n")
    (package / "b.py").write_text("def f():\n    from badpkg import a\n" + "x = 1\n" * 600)
    (package / "c.py").write_text(
        "class K:\n    async def long(self):\n" + "        x = 1\n" * 80 + "def short():\n    pass\n"
    )
    (package / "sub" / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import badpkg.sub.e\n"
    )
    (package / "sub" / "e.py").write_text("import badpkg.sub.d\n")
    (tmp_path / "cluster" / "gate").mkdir(parents=True)
    (tmp_path / "cluster" / "gate" / "__init__.py").write_text("")
    (tmp_path / "cluster" / "fleet").mkdir()
    (tmp_path / "cluster" / "fleet" / "__init__.py").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ARCHITECTURE.md").write_text("- `cluster/gate/` — the gate\n- `cluster/old/` — gone\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "badpkg" or m.startswith("badpkg.")]:
        monkeypatch.delitem(sys.modules, name)
    return tmp_path


def test_each_rule_fails_on_a_tree_that_breaks_it(bad_tree: Path) -> None:
    assert long_modules(bad_tree, ["badpkg"]) == {"badpkg/b.py": 602}
    assert long_functions(bad_tree, ["badpkg"]) == {"badpkg/c.py::K.long": 81}
    assert import_circles("badpkg") == [("badpkg.a", "badpkg.b"), ("badpkg.sub.d", "badpkg.sub.e")]
    assert describe_circle(("badpkg.a", "badpkg.b"), "badpkg") == "badpkg.a -> badpkg.b -> badpkg.a"
    assert unmapped_subpackages(bad_tree) == ({"fleet"}, {"old"})
    (bad_tree / "jobs").mkdir()
    (bad_tree / "jobs" / "job.py").write_text("import jobs.other\n")
    (bad_tree / "badpkg" / "runs_a_job.py").write_text("def f():\n    from jobs.job import main\n")
    (bad_tree / "badpkg" / "names_it.py").write_text('ENTRY = "python -m jobs.job"\nimport jobsearch\n')
    assert importers_of(bad_tree, ["badpkg", "jobs"], "jobs") == ["badpkg/runs_a_job.py"]


def test_an_allowance_covers_only_what_it_names_and_goes_once_it_is_not_needed() -> None:
    found = {"a.py": 600, "b.py": 700}
    assert beyond_the_allowance(found, frozenset({"a.py", "gone.py"})) == ({"b.py": 700}, ["gone.py"])
    assert beyond_the_allowance(found, frozenset(found)) == ({}, [])


def test_a_rule_over_a_folder_that_is_not_there_fails_and_fixtures_are_not_modules(tmp_path: Path) -> None:
    (tmp_path / "tests" / "fixtures" / "repo").mkdir(parents=True)
    (tmp_path / "tests" / "fixtures" / "repo" / "big.py").write_text("x = 1\n" * 900)
    (tmp_path / "tests" / "test_big.py").write_text("x = 1\n" * 900)
    assert long_modules(tmp_path, ["tests"]) == {"tests/test_big.py": 900}
    with pytest.raises(AssertionError, match="tests/fakes/ is not a folder"):
        long_modules(tmp_path, ["tests/fakes"])
