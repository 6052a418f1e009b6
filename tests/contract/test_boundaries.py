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
IMPORTLINTER = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
CONTRACTS = IMPORTLINTER["contracts"]


_LAYERS = next(c for c in CONTRACTS if c["type"] == "layers" and c.get("containers") == ["cluster"])
CLUSTER_LAYERS = [name.strip() for layer in _LAYERS["layers"] for name in layer.split("|")]
CLUSTER_TOP = _LAYERS["exhaustive_ignores"]
# Every layered container but cluster (whose concerns are packages): its layers, as empty modules.
LAYERED_MODULES = [
    f"{container}/{name.strip()}.py"
    for contract in CONTRACTS
    if contract["type"] == "layers" and contract.get("containers", ["cluster"]) != ["cluster"]
    for container in contract["containers"]
    for layer in contract["layers"]
    for name in layer.split("|")
]


def lint_imports(config: Path, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.timeout(300)
def test_every_layer_contract_holds_in_this_repository() -> None:
    result = lint_imports(ROOT / "pyproject.toml", ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in result.stdout


def make_tree(root: Path, sources: dict[str, str]) -> Path:
    """A tiny repository with our root packages, cluster's concern packages and actors' layered
    modules (empty), the one door into the sidecar (cluster.fleet.frames → sidecar.wire, which the
    contracts name), `sources` and our pyproject."""
    door = {
        "cluster/fleet/__init__.py": "",
        "cluster/fleet/frames.py": "import sidecar.wire\n",
        "sidecar/wire.py": "",
    }
    for package in IMPORTLINTER["root_packages"]:
        (root / package).mkdir()
        (root / package / "__init__.py").write_text("")
    for concern in CLUSTER_LAYERS:  # cluster's concern packages and its top-level modules, empty
        (root / "cluster" / concern).mkdir()
        (root / "cluster" / concern / "__init__.py").write_text("")
    for module in CLUSTER_TOP:
        (root / "cluster" / f"{module}.py").write_text("")
    for module in LAYERED_MODULES:  # the layered containers' modules, empty
        (root / module).write_text("")
    for path, source in {**door, **sources}.items():
        (root / path).write_text(source)
    config = root / "pyproject.toml"
    config.write_text((ROOT / "pyproject.toml").read_text())
    return config


@pytest.mark.timeout(300)
def test_each_contract_breaks_when_its_boundary_is_crossed(tmp_path: Path) -> None:
    crossings = {
        "cluster/uses_ray.py": "import ray\nimport actors\n",
        "actors/uses_app.py": "import serve_apps\n",
        "jobs/uses_app.py": "import serve_apps\n",
        "sidecar/uses_cluster.py": "import cluster\n",
        "sidecar/wire.py": "import httpx\n",
        "actors/uses_cli.py": "import samespace\n",
        "actors/handles.py": "import actors.dispatcher\n",  # the floor of actors/ importing a floor above
        "samespace/uses_actors.py": "import actors\n",  # the command line reaching an actor itself
        "cluster/ingest/uses_index.py": "import cluster.index\n",  # a lower concern importing a higher one
        "cluster/errors.py": "import cluster.gate\n",  # the vocabulary importing a concern
        "serve_apps/auth.py": "import serve_apps.mcp\n",  # a shared module importing a surface
        "sidecar/errors.py": "import sidecar.agent\n",  # the sidecar's floor importing its agent
        "samespace/state.py": "import samespace.cli\n",  # the CLI's floor importing its parser
    }
    result = lint_imports(make_tree(tmp_path, crossings), tmp_path, pythonpath=tmp_path)
    assert result.returncode != 0
    assert f"Contracts: 0 kept, {len(CONTRACTS)} broken." in result.stdout, result.stdout + result.stderr


@pytest.mark.timeout(300)
def test_the_cluster_reaches_the_sidecar_only_through_its_wire_door(tmp_path: Path) -> None:
    door, agent = tmp_path / "door", tmp_path / "agent"
    through_the_door = {
        "cluster/fleet/hub.py": "import cluster.fleet.frames\n",
        "actors/fleet.py": "import cluster.fleet.hub\n",
    }
    door.mkdir()
    kept = lint_imports(make_tree(door, through_the_door), door, pythonpath=door)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in kept.stdout

    past_the_door = {
        "cluster/fleet/registry.py": "import sidecar.wire\n",
        "sidecar/agent.py": "",
        "cluster/naming.py": "import sidecar.agent\n",
    }
    agent.mkdir()
    broken = lint_imports(make_tree(agent, past_the_door), agent, pythonpath=agent)
    assert broken.returncode != 0
    assert (
        "cluster.fleet.registry -> sidecar.wire" in broken.stdout and "cluster.naming -> sidecar.agent" in broken.stdout
    )
    assert f"Contracts: {len(CONTRACTS) - 1} kept, 1 broken." in broken.stdout, broken.stdout
