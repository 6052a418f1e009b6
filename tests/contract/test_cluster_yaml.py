"""cluster.yaml is a valid `ray up` config that installs and starts samespace like the Makefile."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import ray.autoscaler
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_YAML = ROOT / "cluster.yaml"
NODE_TOKEN = ".samespace/ray-token"  # under the node user's home
SCHEMA = Path(ray.autoscaler.__file__).parent / "ray-schema.json"


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return yaml.safe_load(CLUSTER_YAML.read_text())


@pytest.fixture(scope="module")
def prepared(raw: dict[str, Any]) -> dict[str, Any]:
    # What `ray up` does before talking to the cloud: merge provider defaults and setup commands.
    return prepare_config(copy.deepcopy(raw))


def _env_before_ray_start(command: str) -> dict[str, str]:
    before = command.split("ray start", 1)[0]
    return dict(re.findall(r"\b([A-Z][A-Z0-9_]*)=(\S+?)(?=[\s;]|$)", before))


def test_the_config_passes_rays_own_launcher_schema_and_validation(
    raw: dict[str, Any], prepared: dict[str, Any]
) -> None:
    jsonschema.validate(raw, json.loads(SCHEMA.read_text()))
    validate_config(prepared)
    assert raw["provider"]["type"] == "aws" and raw["provider"]["region"] == "us-east-1"
    assert raw["head_node_type"] == "head_cpu"
    assert raw["file_mounts"]["~/samespace"] == "."


def test_a_gpu_worker_type_offers_a_gpu_and_the_head_type_offers_none(raw: dict[str, Any]) -> None:
    types = raw["available_node_types"]
    gpu_workers = [name for name, spec in types.items() if spec["resources"].get("GPU", 0) >= 1]
    assert "gpu_worker" in gpu_workers and raw["head_node_type"] not in gpu_workers
    worker = types["gpu_worker"]
    assert worker.get("min_workers", 0) == 0 and worker["max_workers"] >= 1
    assert types["head_cpu"]["resources"].get("GPU", 0) == 0 and types["head_cpu"]["max_workers"] == 0


def test_every_node_installs_torch_before_the_requirements_then_the_project_without_deps(
    prepared: dict[str, Any],
) -> None:
    for key in ("head_setup_commands", "worker_setup_commands"):
        commands = prepared[key]

        def index_of(fragment: str, commands: list[str] = commands, key: str = key) -> int:
            hits = [i for i, command in enumerate(commands) if fragment in command]
            assert hits, f"{key} lacks {fragment!r}"
            return hits[0]

        torch = index_of("pip install torch==2.13.0")
        requirements = index_of("pip install -r requirements.txt")
        project = index_of("pip install --no-deps -e .")
        assert torch < requirements < project, key
        assert "python3 -m venv .venv" in commands[torch]


def test_every_ray_start_exports_usage_stats_off_and_token_auth(raw: dict[str, Any]) -> None:
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        commands = raw[key]
        assert commands[0] == "~/samespace/.venv/bin/ray stop", key
        starts = [command for command in commands if "ray start" in command]
        assert len(starts) == 1, key
        assert "~/samespace/.venv/bin/ray start" in starts[0]
        env = _env_before_ray_start(starts[0])
        assert env.get("RAY_USAGE_STATS_ENABLED") == "0", key
        assert env.get("RAY_AUTH_MODE") == "token", key
        assert env.get("RAY_AUTH_TOKEN_PATH") == f"$HOME/{NODE_TOKEN}", key
        assert env.get("HF_HUB_OFFLINE") == "1", key
        assert "--disable-usage-stats" in starts[0], key
    head = " ".join(raw["head_start_ray_commands"])
    assert "--head --port=6379" in head and "--dashboard-host=127.0.0.1" in head
    assert "--autoscaling-config=~/ray_bootstrap_config.yaml" in head
    assert "--address=$RAY_HEAD_IP:6379" in " ".join(raw["worker_start_ray_commands"])


def test_every_node_gets_the_token_file_make_run_uses_and_reads_it_from_a_0600_file(
    raw: dict[str, Any], prepared: dict[str, Any]
) -> None:
    # The same file `make run` and `make ray-token` write (Makefile: STATE/ray-token) ...
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^STATE := \$\(CURDIR\)/\.samespace$", makefile, re.MULTILINE)
    assert re.search(r"^RAY_TOKEN := \$\(STATE\)/ray-token$", makefile, re.MULTILINE)
    assert raw["file_mounts"][f"~/{NODE_TOKEN}"] == NODE_TOKEN
    # ... reaches the head from here and every worker from the head (the launcher's own merge) ...
    assert prepared["file_mounts"][f"~/{NODE_TOKEN}"] == NODE_TOKEN
    # ... is tightened before `ray start` reads it, and the token itself is never inlined.
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        (start,) = [command for command in raw[key] if "ray start" in command]
        before = start.split("ray start", 1)[0]
        assert f"chmod 600 ~/{NODE_TOKEN}" in before and "chmod 700 ~/.samespace" in before, key
        assert before.index("chmod 600") < before.index("export"), key
    everything = yaml.safe_dump(raw)
    assert "RAY_AUTH_TOKEN=" not in everything and "RAY_AUTH_MODE=disabled" not in everything
