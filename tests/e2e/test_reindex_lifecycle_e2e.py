"""Reindex while serving, and reindex killed midway: the serving index is never disturbed."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.job_submission import JobStatus, JobSubmissionClient

from samespace.clients import call_tool, result_text
from tests.support.jobs import TERMINAL, reindex, submit_reindex, wait_for_job
from tests.support.ray_cluster import FIXTURES, McpServer, RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def copy_fixture(tmp_path: Path, name: str) -> Path:
    repo = tmp_path / name
    shutil.copytree(FIXTURES / "polyglot", repo)
    return repo


def write_generated_module(repo: Path, files: int, functions: int) -> None:
    """Enough plain Python to keep a reindex busy for a while on 2 cores."""
    for f in range(files):
        body = []
        for g in range(functions):
            body.append(f"def handler_{f}_{g}(request, retries={g}):")
            body.append(f'    """Handle request number {g} of module {f}: validate, route and respond."""')
            body.extend(f"    step_{i} = request.get('field_{i}', {i}) * retries" for i in range(8))
            body.append(f"    return {{'status': 'ok', 'module': {f}, 'function': {g}}}\n")
        (repo / f"gen_{f:03d}.py").write_text("\n".join(body))


def index_collections(cluster: RayCluster, name: str) -> list[str]:
    from actors import get_index_actor

    index = get_index_actor(cluster.settings)  # type: ignore[arg-type]
    return [c for c in ray.get(index.collections.remote()) if c.startswith(f"{name}__b")]


async def search_builds(server: McpServer, repo: str) -> set[str]:
    result = await call_tool(server.url, "search_code", {"query": "retry with backoff", "k": 10, "repo": repo})
    assert not result.is_error, result_text(result)
    assert result.structured_content is not None
    hits: list[dict[str, Any]] = result.structured_content["hits"]
    assert hits
    return {h["build"] for h in hits}


async def test_queries_during_a_reindex_never_fail_and_never_mix_builds(
    ray_cluster: RayCluster, mcp_server: McpServer, tmp_path: Path
) -> None:
    v1 = copy_fixture(tmp_path, "v1")
    reindex(ray_cluster, v1, "live")
    (old_build,) = await search_builds(mcp_server, "live")

    v2 = copy_fixture(tmp_path, "v2")
    write_generated_module(v2, files=4, functions=6)
    client, job_id = submit_reindex(ray_cluster, v2, "live")
    seen: list[set[str]] = []
    while client.get_job_status(job_id) not in TERMINAL:
        seen.append(await search_builds(mcp_server, "live"))
        await asyncio.sleep(0.05)
    assert client.get_job_status(job_id) == JobStatus.SUCCEEDED, client.get_job_logs(job_id)
    seen.append(await search_builds(mcp_server, "live"))

    assert len(seen) >= 5
    assert all(len(builds) == 1 for builds in seen), seen  # never a mix of old and new rows
    assert seen[0] == {old_build}
    (new_build,) = seen[-1]
    assert new_build != old_build
    assert {b for builds in seen for b in builds} == {old_build, new_build}
    assert index_collections(ray_cluster, "live") == [new_build]


@pytest.mark.parametrize("how", ["ray job stop", "SIGKILL of the driver"])
async def test_a_reindex_killed_midway_leaves_the_old_index_answering_and_the_next_run_cleans_up(
    ray_cluster: RayCluster, mcp_server: McpServer, tmp_path: Path, how: str
) -> None:
    name = "killme-stop" if how == "ray job stop" else "killme-sigkill"
    small = copy_fixture(tmp_path, "small")
    reindex(ray_cluster, small, name)
    (serving,) = await search_builds(mcp_server, name)

    big = copy_fixture(tmp_path, "big")
    write_generated_module(big, files=30, functions=10)
    client, job_id = submit_reindex(ray_cluster, big, name)
    _wait_for_log(client, job_id, "progress: files")
    if how == "ray job stop":
        client.stop_job(job_id)
    else:
        driver = client.get_job_info(job_id).driver_info
        assert driver is not None and driver.pid
        os.kill(int(driver.pid), signal.SIGKILL)
    status = wait_for_job(client, job_id, timeout_s=60)
    assert status in {JobStatus.STOPPED, JobStatus.FAILED}
    logs = client.get_job_logs(job_id)
    assert "committed" not in logs

    assert await search_builds(mcp_server, name) == {serving}  # the old index keeps answering
    leftovers = [c for c in index_collections(ray_cluster, name) if c != serving]
    if how == "SIGKILL of the driver":
        assert leftovers, "a driver killed with SIGKILL cannot clean up; its partial build stays until the next run"

    reindex(ray_cluster, small, name)
    (rebuilt,) = await search_builds(mcp_server, name)
    assert index_collections(ray_cluster, name) == [rebuilt]  # partial and superseded builds are gone


def _wait_for_log(client: JobSubmissionClient, job_id: str, needle: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if needle in client.get_job_logs(job_id):
            return
        assert client.get_job_status(job_id) not in TERMINAL, client.get_job_logs(job_id)
        time.sleep(0.2)
    raise TimeoutError(f"{needle!r} never appeared in the log of {job_id}")
