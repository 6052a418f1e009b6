"""Shared fixtures: one local Ray (with dashboard, for real job submission) and one Serve.

Everything talks to 127.0.0.1 only; every process started here is stopped here. No test sees
another's environment: the cluster's variables are set only while Ray starts (its processes keep
them; jobs get them in their runtime env), and `os.environ` is restored after every test.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from cluster.environment import set_local_env_defaults
from samespace.head import free_port

# Before any test module is imported: whatever they import reads these defaults.
set_local_env_defaults()

FIXTURES = Path(__file__).parent / "fixtures"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Whatever starts the session's Ray is in the slow tier, marked or not: `-m "not slow"` never starts it."""
    for item in items:
        if "ray_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """`os.environ` with `values` set, as it was before once the block ends."""
    saved = dict(os.environ)
    os.environ.update(values)
    try:
        yield
    finally:  # undo key by key: never an empty environment, even for a moment (Ray's threads read it)
        for key in set(os.environ) - set(saved):
            del os.environ[key]
        for key, value in saved.items():
            if os.environ.get(key) != value:
                os.environ[key] = value


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


@dataclass
class RayCluster:
    settings: object  # cluster.settings.SamespaceSettings
    dashboard_url: str
    env: dict[str, str]
    data_dir: Path
    metrics_port: int = 0  # Ray's Prometheus endpoint: http://127.0.0.1:<port>/metrics


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
    with environment(env):  # the processes ray.init starts inherit it; this one is left as it was
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
    _wait_for_job_api(dashboard_url)
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


def _wait_for_job_api(dashboard_url: str, timeout_s: float = 60.0) -> None:
    from ray.job_submission import JobSubmissionClient

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            JobSubmissionClient(dashboard_url).list_jobs()
            return
        except Exception:  # the dashboard agent starts a few seconds after ray.init returns
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@dataclass
class McpServer:
    url: str
    port: int


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


@dataclass
class CanaryScan:
    """Secrets that must never reach a file: Ray's session directory (logs, events, spilled
    objects) and the roots each module names. Scanned once, when the session's Ray stops, so
    after every test that used them, whatever the order the tests ran in."""

    session_dir: Path
    secrets: dict[str, list[Path]]

    def watch(self, secret: str, *roots: Path) -> None:
        self.secrets.setdefault(secret, []).extend(Path(root) for root in roots)

    def leaks(self, max_file_bytes: int = 50_000_000) -> list[str]:
        """`path: secret prefix` for every watched file that holds a watched secret."""
        roots = {self.session_dir, *(root for roots in self.secrets.values() for root in roots)}
        files = {path for root in roots for path in root.rglob("*") if path.is_file()}  # roots may nest
        found = []
        for path in sorted(files):
            try:
                if path.stat().st_size >= max_file_bytes:
                    continue
                blob = path.read_bytes()
            except FileNotFoundError:  # a log rotated away since the listing
                continue
            found += [f"{path}: {secret[:12]}..." for secret in self.secrets if secret.encode() in blob]
        return found


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


def reindex_entrypoint(repo: Path, name: str) -> str:
    return f"{sys.executable} -m jobs.reindex --repo {repo} --name {name}"


@pytest.fixture(scope="session")
def fake_openrouter() -> Iterator[object]:
    """The OpenRouter-compatible fake in its own process on 127.0.0.1, stopped by PID."""
    from fakes.openrouter_server import FakeOpenRouterServer

    with FakeOpenRouterServer() as server:
        yield server
