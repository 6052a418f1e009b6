"""The shape of cluster/ stays readable: short modules, no import cycles, and a folder listing that
docs/ARCHITECTURE.md's map describes one line per subpackage. Each rule is also run over a small
tree that breaks it, so a rule that could never fail is caught too.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_MODULE_LINES = 500
# The map in ARCHITECTURE.md: a line per subpackage starting with its folder, e.g. "- `cluster/gate/` — ...".
MAP_ENTRY = re.compile(r"^- `cluster/([a-z_]+)/`", re.MULTILINE)


def long_modules(package_dir: Path, limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    lengths = {
        str(p.relative_to(package_dir.parent)): len(p.read_text(encoding="utf-8").splitlines())
        for p in package_dir.rglob("*.py")
    }
    return {path: n for path, n in sorted(lengths.items()) if n > limit}


def import_cycles(package: str) -> list[tuple[str, ...]]:
    """Every module-level import cycle inside `package` (imports inside functions count too)."""
    graph = grimp.build_graph(package, cache_dir=None)
    cycles: set[tuple[str, ...]] = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back:
                cycles.add(tuple(sorted(set(back))))
    return sorted(cycles)


def unmapped_subpackages(root: Path) -> tuple[set[str], set[str]]:
    """(subpackages the map lacks, map entries with no subpackage)."""
    folders = {p.parent.name for p in (root / "cluster").glob("*/__init__.py")}
    mapped = set(MAP_ENTRY.findall((root / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")))
    return folders - mapped, mapped - folders


def test_no_module_in_cluster_is_over_the_limit() -> None:
    assert long_modules(ROOT / "cluster") == {}


def test_cluster_has_no_import_cycles() -> None:
    assert import_cycles("cluster") == []


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
    (tmp_path / "cluster" / "gate").mkdir(parents=True)
    (tmp_path / "cluster" / "gate" / "__init__.py").write_text("")
    (tmp_path / "cluster" / "fleet").mkdir()
    (tmp_path / "cluster" / "fleet" / "__init__.py").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ARCHITECTURE.md").write_text("- `cluster/gate/` — the gate\n- `cluster/old/` — gone\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "badpkg", raising=False)
    return tmp_path


def test_each_rule_fails_on_a_tree_that_breaks_it(bad_tree: Path) -> None:
    assert long_modules(bad_tree / "badpkg") == {"badpkg/b.py": 602}
    assert import_cycles("badpkg") == [("badpkg.a", "badpkg.b")]
    assert unmapped_subpackages(bad_tree) == ({"fleet"}, {"old"})
