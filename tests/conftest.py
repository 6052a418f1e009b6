"""Shared fixtures: one local Ray (with dashboard, for real job submission) and one Serve; on it, the
master's sidecar endpoints for each module that asks for `master`.

Everything talks to 127.0.0.1 only; every process started here is stopped here. No test sees
another's environment: the cluster's variables are set only while Ray starts (its processes keep
them; jobs get them in their runtime env), and `os.environ` is restored after every test.
"""

from __future__ import annotations

import gc
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cluster.environment import set_local_env_defaults
from samespace.head import free_port
from tests.support.ray_cluster import (
    FIXTURES,
    CanaryScan,
    McpServer,
    RayCluster,
    environment,
    wait_for_job_api,
)

if TYPE_CHECKING:
    from tests.support.fleet_endpoint import Master

# Before any test module is imported: whatever they import reads these defaults.
set_local_env_defaults()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Whatever starts the session's Ray is in the slow tier, marked or not: `-m "not slow"` never starts it."""
    for item in items:
        if "ray_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Whatever a test does to `os.environ`, the next test starts from the environment before it."""
    with environment({}):
        yield


@pytest.fixture
def polyglot_repo(tmp_path: Path) -> Path:
    """A copy of the multi-language fixture repo plus a file its .gitignore excludes."""
    repo = tmp_path / "polyglot"
    shutil.copytree(FIXTURES / "polyglot", repo)
    (repo / "ignored_secret.py").write_text('API_TOKEN = "must never be indexed"\n')
    return repo


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    import ray

    from cluster.settings import SamespaceSettings

    data_dir = tmp_path_factory.mktemp("samespace-data")
    dashboard_port = free_port()
    metrics_port = free_port()
    env = {
        "SAMESPACE_STORE__DATA_DIR": str(data_dir),
        "SAMESPACE_RAY__NAMESPACE": "samespace-test",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    # The dashboard lists at most 10,000 tasks by default (read as it starts); a whole suite's session
    # runs more, and the canary test reads every task's arguments.
    listing = {"RAY_MAX_LIMIT_FROM_API_SERVER": "200000", "RAY_MAX_LIMIT_FROM_DATA_SOURCE": "200000"}
    with environment({**env, **listing}):  # the processes ray.init starts inherit it; this one is left as it was
        context = ray.init(
            address="local",
            num_cpus=4,  # logical: room for a second namespace's embedder beside the default one
            namespace="samespace-test",
            include_dashboard=True,
            dashboard_host="127.0.0.1",
            dashboard_port=dashboard_port,
            _metrics_export_port=metrics_port,
            log_to_driver=False,
            runtime_env={"env_vars": env},
        )
    settings = SamespaceSettings(store={"data_dir": data_dir}, ray={"namespace": "samespace-test"})
    dashboard_url = f"http://{context.dashboard_url}"
    wait_for_job_api(dashboard_url)
    try:
        yield RayCluster(
            settings=settings, dashboard_url=dashboard_url, env=env, data_dir=data_dir, metrics_port=metrics_port
        )
    finally:
        try:
            from ray import serve

            serve.shutdown()
        finally:
            ray.shutdown()


@pytest.fixture(scope="session")
def mcp_server(ray_cluster: RayCluster) -> Iterator[McpServer]:
    from ray import serve

    from serve_apps.mcp import McpIngress

    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    app = McpIngress.options(num_replicas=2).bind(ray_cluster.settings)
    serve.run(app, name="mcp", route_prefix="/")
    try:
        yield McpServer(url=f"http://127.0.0.1:{port}/mcp/", port=port)
    finally:
        serve.delete("mcp")


@pytest.fixture(scope="session")
def canary_scan(ray_cluster: RayCluster) -> Iterator[CanaryScan]:
    """Register a canary with `canary_scan.watch(secret, *roots)`; the session fails if one leaked."""
    import ray

    session_dir = Path(ray._private.worker._global_node.get_session_dir_path())  # noqa: SLF001  no public accessor
    scan = CanaryScan(session_dir=session_dir, secrets={})
    yield scan
    if scan.secrets:
        leaks = scan.leaks()
        assert leaks == [], f"canary secrets reached files: {leaks}"


@pytest.fixture(scope="session")
def fake_openrouter() -> Iterator[object]:
    """The OpenRouter-compatible fake in its own process on 127.0.0.1, stopped by PID."""
    from tests.support.fakes.openrouter_server import FakeOpenRouterServer

    with FakeOpenRouterServer() as server:
        yield server


@pytest.fixture(scope="module")
def master(
    ray_cluster: RayCluster, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Master]:
    """The master's sidecar endpoints on real Serve, one per module that asks (tests/support/fleet_endpoint.py)."""
    from tests.support.fleet_endpoint import serving_master

    with serving_master(ray_cluster, mcp_server, tmp_path_factory) as served:
        yield served


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported lives for the whole run: out of the collector's sight, each full
    collection scans only what the tests made."""
    gc.freeze()
