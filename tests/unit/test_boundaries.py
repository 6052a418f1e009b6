"""The layers are contracts a tool checks (import-linter, `[tool.importlinter]` in pyproject.toml).

One test runs the contracts over this repository; the other runs the same contracts over a tiny
tree that crosses each boundary, so a contract that could never fail is caught too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def lint_imports(config: Path, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([str(LINT_IMPORTS), "--config", str(config), "--no-cache"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.timeout(300)
def test_every_layer_contract_holds_in_this_repository() -> None:
    result = lint_imports(ROOT / "pyproject.toml", ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in result.stdout


@pytest.mark.timeout(300)
def test_each_contract_breaks_when_its_boundary_is_crossed(tmp_path: Path) -> None:
    crossings = {
        "cluster/uses_ray.py": "import ray\nimport actors\n",
        "actors/uses_app.py": "import serve_apps\n",
        "jobs/uses_app.py": "import serve_apps\n",
        "sidecar/uses_cluster.py": "import cluster\n",
    }
    for package in ("cluster", "actors", "serve_apps", "jobs", "sidecar"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    for path, source in crossings.items():
        (tmp_path / path).write_text(source)
    config = tmp_path / "pyproject.toml"
    config.write_text((ROOT / "pyproject.toml").read_text())
    result = lint_imports(config, tmp_path, pythonpath=tmp_path)
    assert result.returncode != 0
    assert f"Contracts: 0 kept, {len(CONTRACTS)} broken." in result.stdout, result.stdout + result.stderr
