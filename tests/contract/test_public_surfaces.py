"""Each subpackage of cluster/ has a public surface, its `__init__.__all__`, and nothing else of it is
imported from outside: not by another subpackage, not by actors, Serve apps, jobs, the CLI or the
benchmarks. Tests may reach inside the package they test.

The check reads the source (ast), so it also sees imports inside functions. A second test runs
it over a small tree that breaks each rule, so a check that could never fail is caught too.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Code that must use the public surfaces (tests may test a package's insides).
CALLERS = ("cluster", "actors", "serve_apps", "jobs", "samespace", "bench")


def subpackages(root: Path) -> list[str]:
    """The concern packages: cluster/<name>/ with an __init__.py."""
    return sorted(p.parent.name for p in (root / "cluster").glob("*/__init__.py"))


def declared_all(init: Path) -> set[str] | None:
    """The names in a module's literal `__all__`, or None when it has none."""
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return {ast.literal_eval(element) for element in node.value.elts}  # type: ignore[attr-defined]
    return None


def imported_names(source: str) -> Iterator[tuple[int, str, str | None]]:
    """(line, module, name) for every import; name None for `import a.b`."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                yield node.lineno, node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None


def owner(module: str, packages: list[str]) -> str | None:
    """The concern package a dotted module belongs to (`cluster.index.store.edge` → `index`)."""
    parts = module.split(".")
    if len(parts) >= 2 and parts[0] == "cluster" and parts[1] in packages:
        return parts[1]
    return None


def private_imports(root: Path) -> list[str]:
    """Every import that reaches past a subpackage's public surface, as `path:line: reason`."""
    packages = subpackages(root)
    surfaces = {name: declared_all(root / "cluster" / name / "__init__.py") for name in packages}
    problems = [f"cluster/{name}/__init__.py: no __all__" for name, names in surfaces.items() if names is None]
    for caller in CALLERS:
        for path in sorted((root / caller).rglob("*.py")) if (root / caller).is_dir() else []:
            relative = path.relative_to(root)
            caller_package = owner(".".join(relative.with_suffix("").parts), packages)
            for line, module, name in imported_names(path.read_text(encoding="utf-8")):
                target = owner(module, packages)
                if target is None or target == caller_package:
                    continue
                where = f"{relative}:{line}"
                if name is None:
                    problems.append(f"{where}: `import {module}` (import names from cluster.{target})")
                elif name.startswith("_") or any(part.startswith("_") for part in module.split(".")):
                    problems.append(f"{where}: private `{name}` from {module}")
                elif name not in (surfaces[target] or set()):
                    problems.append(f"{where}: `{name}` from {module} is not in cluster.{target}.__all__")
    return problems


def test_every_subpackage_declares_a_surface_that_imports() -> None:
    packages = subpackages(ROOT)
    assert {"ask", "cloud", "config", "fleet", "gate", "index", "ingest", "local", "routing", "search"} <= set(packages)
    for name in packages:
        surface = declared_all(ROOT / "cluster" / name / "__init__.py")
        assert surface, f"cluster.{name} declares no __all__"
        module = importlib.import_module(f"cluster.{name}")
        missing = sorted(n for n in surface if not hasattr(module, n))
        assert not missing, f"cluster.{name}.__all__ names what it does not define: {missing}"


def test_no_code_imports_past_a_subpackage_surface() -> None:
    problems = private_imports(ROOT)
    assert not problems, "\n".join(problems)


@pytest.fixture
def crossing_tree(tmp_path: Path) -> Path:
    """cluster.alpha exports `open_thing`; every caller below breaks one rule."""
    (tmp_path / "cluster" / "alpha").mkdir(parents=True)
    (tmp_path / "cluster" / "beta").mkdir()
    (tmp_path / "cluster" / "alpha" / "__init__.py").write_text(
        'from cluster.alpha.things import open_thing\n__all__ = ["open_thing"]\n'
    )
    (tmp_path / "cluster" / "alpha" / "things.py").write_text("def open_thing(): ...\ndef helper(): ...\n_x = 1\n")
    (tmp_path / "cluster" / "beta" / "__init__.py").write_text("")  # no __all__
    (tmp_path / "cluster" / "beta" / "uses.py").write_text(
        "from cluster.alpha.things import helper\n"  # not public
        "def f():\n    from cluster.alpha.things import _x\n"  # private, inside a function
        "from cluster.alpha import open_thing\n"  # fine
        "from cluster.alpha.things import open_thing as o\n"  # fine: public, from its module
    )
    (tmp_path / "actors").mkdir()
    (tmp_path / "actors" / "a.py").write_text("import cluster.alpha.things\n")
    return tmp_path


def test_the_check_names_each_kind_of_crossing(crossing_tree: Path) -> None:
    problems = private_imports(crossing_tree)
    assert problems == [
        "cluster/beta/__init__.py: no __all__",
        "cluster/beta/uses.py:1: `helper` from cluster.alpha.things is not in cluster.alpha.__all__",
        "cluster/beta/uses.py:3: private `_x` from cluster.alpha.things",
        "actors/a.py:1: `import cluster.alpha.things` (import names from cluster.alpha)",
    ]


# The Serve apps and the command line's clients have one door each too, httpx-style: the package's
# `__init__` and its `__all__`; the modules behind it (a leading underscore) are the package's own.
DOORS = ("serve_apps.mcp", "serve_apps.admin", "samespace.clients")


def door_crossings(root: Path, doors: tuple[str, ...] = DOORS) -> list[str]:
    """Every import from outside a door's package that goes past its `__init__` or its `__all__`."""
    surfaces = {door: declared_all(root.joinpath(*door.split("."), "__init__.py")) or set() for door in doors}
    problems = []
    for caller in CALLERS:
        for path in sorted((root / caller).rglob("*.py")) if (root / caller).is_dir() else []:
            relative = path.relative_to(root)
            inside = ".".join(relative.with_suffix("").parts)
            for line, module, name in imported_names(path.read_text(encoding="utf-8")):
                door = next((d for d in doors if module == d or module.startswith(d + ".")), None)
                if door is None or inside == door or inside.startswith(door + "."):
                    continue
                if module != door:
                    problems.append(f"{relative}:{line}: `{module}` is behind the door (import from {door})")
                elif name is not None and name not in surfaces[door]:
                    problems.append(f"{relative}:{line}: `{name}` is not in {door}.__all__")
    return problems


def test_each_app_package_is_entered_by_its_door_only() -> None:
    for door in DOORS:
        surface = declared_all(ROOT.joinpath(*door.split("."), "__init__.py"))
        assert surface, f"{door} declares no __all__"
        module = importlib.import_module(door)
        assert not [n for n in surface if not hasattr(module, n)], f"{door}.__all__ names what it does not define"
    assert door_crossings(ROOT) == []
    # Serve deploys an app by its import path: the door's builder.
    import yaml

    config = yaml.safe_load((ROOT / "serve_config.yaml").read_text(encoding="utf-8"))
    for app in config["applications"]:
        door, builder = app["import_path"].split(":")
        assert door in DOORS and builder in (declared_all(ROOT.joinpath(*door.split("."), "__init__.py")) or set())


def test_the_door_check_names_each_kind_of_crossing(tmp_path: Path) -> None:
    (tmp_path / "serve_apps" / "mcp").mkdir(parents=True)
    (tmp_path / "serve_apps" / "mcp" / "__init__.py").write_text('from serve_apps.mcp._app import a\n__all__ = ["a"]\n')
    (tmp_path / "serve_apps" / "mcp" / "_app.py").write_text("from serve_apps.mcp._tools import t\na = 1\nb = 2\n")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "b.py").write_text(
        "from serve_apps.mcp import a\n"  # fine
        "from serve_apps.mcp import b\n"  # not on the surface
        "from serve_apps.mcp._app import a as c\n"  # behind the door
    )
    assert door_crossings(tmp_path, ("serve_apps.mcp",)) == [
        "bench/b.py:2: `b` is not in serve_apps.mcp.__all__",
        "bench/b.py:3: `serve_apps.mcp._app` is behind the door (import from serve_apps.mcp)",
    ]
