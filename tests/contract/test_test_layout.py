"""tests/ is laid out like the code: unit tests mirror cluster/'s concern packages (the outer layers'
unit tests sit beside them in folders of their own), end-to-end files end in `_e2e`, contract tests
(the store contract, boundaries, surfaces, house rules, lint, docs) have their folder, and shared
helpers live in the `tests.support` package, never as bare modules beside the tests. Each rule is also
run over a small tree that breaks it."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTEST_DEFAULT_NORECURSE = ["*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}"]
OUTER = {"apps", "cli", "sidecar", "bench", "fakes"}  # unit tests of what is not cluster/: actors are e2e


def layout_problems(root: Path) -> list[str]:
    tests = root / "tests"
    concerns = {p.parent.name for p in (root / "cluster").glob("*/__init__.py")}
    unit_folders = sorted(p for p in (tests / "unit").iterdir() if p.is_dir() and p.name != "__pycache__")
    problems = [
        f"tests/unit/{f.name}/ mirrors no cluster/ package" for f in unit_folders if f.name not in concerns | OUTER
    ]
    problems += [
        f"tests/e2e/{path.name}: an e2e file is test_*_e2e.py (helpers go in tests/support/)"
        for path in sorted((tests / "e2e").glob("*.py"))
        if path.name != "__init__.py" and not (path.name.startswith("test_") and path.stem.endswith("_e2e"))
    ]
    problems += [
        f"{path.relative_to(root)}: a helper beside the tests (move it to tests/support/)"
        for kind in ("unit", "contract", "e2e")
        for path in sorted((tests / kind).rglob("*.py"))
        if path.name not in {"__init__.py", "conftest.py"} and not path.name.startswith("test_")
    ]
    folders = [tests, *(p for p in tests.rglob("*") if p.is_dir() and any(p.glob("*.py")))]
    problems += [
        f"{folder.relative_to(root)}/ is not a package (bare modules import by file name)"
        for folder in folders
        if "fixtures" not in folder.parts and not (folder / "__init__.py").exists()
    ]
    skipped = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    patterns = skipped.get("norecursedirs", PYTEST_DEFAULT_NORECURSE)
    problems += [
        f"{folder.relative_to(root)}/ is never collected (norecursedirs)"
        for folder in folders
        if any(fnmatch.fnmatch(folder.name, pattern) for pattern in patterns)
    ]
    return problems


def test_tests_are_laid_out_like_the_code() -> None:
    assert layout_problems(ROOT) == []


def test_the_layout_rule_fails_on_a_tree_that_breaks_it(tmp_path: Path) -> None:
    (tmp_path / "cluster" / "gate").mkdir(parents=True)
    (tmp_path / "cluster" / "gate" / "__init__.py").write_text("")
    for folder in ("tests/unit/gate", "tests/unit/misc", "tests/e2e", "tests/contract", "tests/support"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "unit" / "__init__.py").write_text("")
    (tmp_path / "tests" / "unit" / "gate" / "test_gate.py").write_text("")
    (tmp_path / "tests" / "e2e" / "test_search_e2e.py").write_text("")
    (tmp_path / "tests" / "e2e" / "test_two_nodes.py").write_text("")
    (tmp_path / "tests" / "e2e" / "waiting.py").write_text("")
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n", encoding="utf-8")
    (tmp_path / "cluster" / "build").mkdir()
    (tmp_path / "cluster" / "build" / "__init__.py").write_text("")
    (tmp_path / "tests" / "unit" / "build").mkdir()
    (tmp_path / "tests" / "unit" / "build" / "__init__.py").write_text("")
    (tmp_path / "tests" / "unit" / "build" / "test_b.py").write_text("")
    (tmp_path / "tests" / "loose").mkdir()
    (tmp_path / "tests" / "loose" / "helper.py").write_text("")
    assert layout_problems(tmp_path) == [
        "tests/unit/misc/ mirrors no cluster/ package",
        "tests/e2e/test_two_nodes.py: an e2e file is test_*_e2e.py (helpers go in tests/support/)",
        "tests/e2e/waiting.py: an e2e file is test_*_e2e.py (helpers go in tests/support/)",
        "tests/e2e/waiting.py: a helper beside the tests (move it to tests/support/)",
        "tests/loose/ is not a package (bare modules import by file name)",
        "tests/unit/build/ is never collected (norecursedirs)",
    ]
