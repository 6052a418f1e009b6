"""Lint, format and types are checks a tool runs (`make lint`; pyproject.toml's [tool.ruff] and [tool.mypy]).

The first three tests run each check over this repository, exactly as `make lint` does. The others run the
same checks, with the same configuration, over a tiny tree that breaks each one, so a check that could never
fail (a rule set that selects nothing, a strictness that never applies to cluster/) is caught too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RUFF = BIN / "ruff"
MYPY = BIN / "mypy"
# The packages [tool.mypy] checks: a tree run under the same configuration needs each of them.
PACKAGES = ("cluster", "actors", "serve_apps", "jobs", "sidecar", "samespace")

CLEAN = '''"""A module every check accepts."""

from __future__ import annotations


def double(value: int) -> int:
    return value * 2
'''


def run(tool: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([str(tool), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def report(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A repository root with this project's pyproject.toml and one clean module in each checked package."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text('"""A package."""\n\nfrom __future__ import annotations\n')
        (tmp_path / package / "clean.py").write_text(CLEAN)
    return tmp_path


def test_ruff_finds_nothing_to_report_in_this_repository() -> None:
    result = run(RUFF, "check", "--no-cache", cwd=ROOT)
    assert result.returncode == 0, report(result)


def test_every_file_of_this_repository_is_formatted_as_ruff_format_writes_it() -> None:
    result = run(RUFF, "format", "--check", "--no-cache", cwd=ROOT)
    assert result.returncode == 0, report(result)


@pytest.mark.timeout(600)
def test_mypy_finds_no_type_error_in_this_repository_strict_on_cluster() -> None:
    result = run(MYPY, cwd=ROOT)
    assert result.returncode == 0, report(result)
    assert "Success: no issues found" in result.stdout, report(result)


def test_the_clean_tree_passes_every_check_so_the_failures_below_are_the_violations(tree: Path) -> None:
    for args in (("check", "--no-cache"), ("format", "--check", "--no-cache")):
        result = run(RUFF, *args, cwd=tree)
        assert result.returncode == 0, report(result)
    result = run(MYPY, "--cache-dir", str(tree / ".mypy_cache"), cwd=tree)
    assert result.returncode == 0, report(result)


def test_ruff_check_fails_on_an_unused_import_and_names_the_file(tree: Path) -> None:
    (tree / "actors" / "unused.py").write_text(
        '"""Imports what it never uses."""\n\nfrom __future__ import annotations\n\nimport os\n'
    )
    result = run(RUFF, "check", "--no-cache", cwd=tree)
    assert result.returncode == 1, report(result)
    assert "actors/unused.py" in result.stdout and "F401" in result.stdout, report(result)
    assert "clean.py" not in result.stdout


def test_ruff_check_fails_on_a_catch_all_handler_without_a_reason(tree: Path) -> None:
    (tree / "cluster" / "swallow.py").write_text(
        '"""Hides every fault."""\n\nfrom __future__ import annotations\n\n\n'
        "def quiet() -> None:\n    try:\n        int('x')\n    except Exception:\n        return None\n"
    )
    result = run(RUFF, "check", "--no-cache", cwd=tree)
    assert result.returncode == 1, report(result)
    assert "cluster/swallow.py" in result.stdout and "BLE001" in result.stdout, report(result)


def test_ruff_format_check_fails_on_badly_formatted_code_and_names_the_file(tree: Path) -> None:
    (tree / "jobs" / "cramped.py").write_text(
        '"""Valid Python, badly laid out."""\n\nfrom __future__ import annotations\n\n\n'
        "def add( a:int,b:int )->int :\n    return a+b\n"
    )
    result = run(RUFF, "format", "--check", "--no-cache", cwd=tree)
    assert result.returncode == 1, report(result)
    assert "jobs/cramped.py" in report(result), report(result)
    assert "clean.py" not in report(result)


def test_mypy_strict_on_cluster_fails_on_an_unannotated_function(tree: Path) -> None:
    untyped = "def double(value):\n    return value * 2\n"
    (tree / "cluster" / "untyped.py").write_text(untyped)
    (tree / "actors" / "untyped.py").write_text(untyped)  # the lighter check outside cluster/ allows it
    result = run(MYPY, "--cache-dir", str(tree / ".mypy_cache"), cwd=tree)
    assert result.returncode == 1, report(result)
    assert "cluster/untyped.py:1: error: Function is missing a type annotation  [no-untyped-def]" in result.stdout
    assert "actors/untyped.py" not in result.stdout, report(result)


def test_mypy_checks_the_bodies_of_unannotated_functions_outside_cluster(tree: Path) -> None:
    (tree / "serve_apps" / "body.py").write_text('def concat():\n    return 1 + "a"\n')
    result = run(MYPY, "--cache-dir", str(tree / ".mypy_cache"), cwd=tree)
    assert result.returncode == 1, report(result)
    assert "serve_apps/body.py:2: error: Unsupported operand types" in result.stdout, report(result)


def test_mypy_fails_on_a_type_ignore_without_its_error_code_and_on_one_no_longer_needed(tree: Path) -> None:
    (tree / "sidecar" / "ignores.py").write_text(
        "from __future__ import annotations\n\n"
        'WIDTH: int = "wide"  # type: ignore\n'
        "HEIGHT: int = 3  # type: ignore[assignment]\n"
    )
    result = run(MYPY, "--cache-dir", str(tree / ".mypy_cache"), cwd=tree)
    assert result.returncode == 1, report(result)
    assert "sidecar/ignores.py:3: error:" in result.stdout and "[ignore-without-code]" in result.stdout, report(result)
    unused = 'sidecar/ignores.py:4: error: Unused "type: ignore" comment  [unused-ignore]'
    assert unused in result.stdout, report(result)
