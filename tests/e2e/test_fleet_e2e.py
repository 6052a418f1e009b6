"""A fleet of two reference sidecars on 127.0.0.1 serving a real reindex, end to end.

Each sidecar (`python -m sidecar`, a child process) fronts its own OpenAI-compatible embedding
server backed by the packaged MiniLM: one serves exact vectors, one vectors perturbed past the
gate. Real Ray, real Serve (the `/sidecar` WebSocket, or with WebSocket disabled the HTTP
fallback), the real store; what each server embedded is counted at the server, and which
provider wrote each row is read back from the index. Serving a reindex runs on both transports;
a kill and rejoin on the WebSocket only (the HTTP fallback's loss of an agent is
tests/e2e/test_fleet_endpoint_protocol_e2e.py's stale-agent case).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray

from tests.support.fakes.embedding_server import FakeEmbeddingServer
from tests.support.fakes.repos import function_repo
from tests.support.fakes.sidecar_process import SidecarProcess, serve_arg
from tests.support.index_rows import rows_by_writer
from tests.support.ray_cluster import McpServer, RayCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.ray, pytest.mark.slow]

FLEET_TOKEN = "fleet-token-e2e-5c2a"
ADMIN_TOKEN = "admin-token-e2e-5c2a"
UPSTREAM_KEY = "sk-upstream-" + "c4n4ry" * 6
EMBEDDER = "samespace-embedder-cpu0"


@dataclass
class Fleet:
    settings: Any
    admin: httpx.Client
    exact: SidecarProcess
    perturbed: SidecarProcess
    exact_server: FakeEmbeddingServer
    perturbed_server: FakeEmbeddingServer
    repo: Path
    transport: str

    def sidecars(self) -> dict[str, Any]:
        response = self.admin.get("/sidecars")
        response.raise_for_status()
        return {s["agent_url"]: s for s in response.json()["sidecars"]}

    def wait_serving(self, sidecar: SidecarProcess, timeout_s: float = 60.0) -> dict[str, Any]:
        def serving() -> dict[str, Any] | None:
            host = self.sidecars().get(sidecar.agent_url)
            role = host["roles"].get("code-embedding") if host else None
            return host if host and host["fresh"] and role and role["eligible"] else None

        try:
            return wait_until(serving, timeout_s=timeout_s, interval_s=0.2, what=f"{sidecar.agent_url} serving")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{sidecar.log()[-3000:]}") from None

    def reindex(self, name: str, **kwargs: Any) -> tuple[Any, list[str]]:
        from actors.build_ports import run_reindex

        lines: list[str] = []
        record = run_reindex(self.settings, self.repo, name, emit=lines.append, **kwargs)
        return record, lines

    def writers(self, build: str) -> Counter[str]:
        """Rows of a build by the provider that wrote them."""
        return rows_by_writer(self.settings, build)

    def provider_of(self, sidecar: SidecarProcess) -> str:
        """The provider the sidecar is now: its name carries the agent id the master issued at its
        latest registration (a restarted sidecar is a new agent, probed afresh)."""
        name = self.sidecars()[sidecar.agent_url]["roles"]["code-embedding"]["provider"]
        assert isinstance(name, str) and name.startswith("sidecar-127.0.0.1:"), name
        return name


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[FakeEmbeddingServer, FakeEmbeddingServer]]:
    with (
        FakeEmbeddingServer(api_key=UPSTREAM_KEY) as exact,
        FakeEmbeddingServer(perturb=0.5, api_key=UPSTREAM_KEY) as perturbed,
    ):
        yield exact, perturbed


@pytest.fixture(scope="module", params=["ws", "http"])
def fleet(
    request: pytest.FixtureRequest,
    ray_cluster: RayCluster,
    mcp_server: McpServer,
    servers: tuple[FakeEmbeddingServer, FakeEmbeddingServer],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Fleet]:
    from ray import serve

    from cluster.settings import SamespaceSettings
    from serve_apps.admin import AdminIngress
    from serve_apps.mcp import McpIngress

    transport = request.param
    namespace, prefix = f"fleet-{transport}", f"/fleet-{transport}"
    settings = SamespaceSettings(
        ray={"namespace": namespace},
        store={"data_dir": tmp_path_factory.mktemp(f"fleet-{transport}-data")},
        admin={
            "token": ADMIN_TOKEN,
            "config_path": tmp_path_factory.mktemp(f"fleet-{transport}-config") / "config.json",
        },
        policies={"code-embedding": "local"},
        fleet_token=FLEET_TOKEN,
        # WebSocket disabled: the sidecars (transport auto) are refused at the handshake and fall back to HTTP.
        fleet={"websocket": transport == "ws", "ping_interval_s": 1, "stale_after_s": 3, "command_timeout_s": 30},
    )
    serve.run(McpIngress.options(num_replicas=1).bind(settings), name=namespace, route_prefix=prefix)
    serve.run(AdminIngress.bind(settings), name=f"{namespace}-admin", route_prefix=f"{prefix}-admin")
    master = f"http://127.0.0.1:{mcp_server.port}{prefix}"
    exact_server, perturbed_server = servers
    sidecars = [
        SidecarProcess(
            master=master,
            serves=[serve_arg("code-embedding", server.base_url)],
            fleet_token=FLEET_TOKEN,
            upstream_key=UPSTREAM_KEY,
            agent_url=f"http://127.0.0.1:{port}",
            hostname=f"ws-{port}",
            poll_wait_s=1.0,
            log_level="INFO",
        )
        for server, port in ((exact_server, 9301), (perturbed_server, 9302))
    ]
    admin = httpx.Client(
        base_url=f"http://127.0.0.1:{mcp_server.port}{prefix}-admin",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        timeout=60,
    )
    try:
        for sidecar in sidecars:
            sidecar.start()
        yield Fleet(
            settings,
            admin,
            sidecars[0],
            sidecars[1],
            exact_server,
            perturbed_server,
            function_repo(tmp_path_factory.mktemp(f"fleet-{transport}-repo") / "shop", files=30),
            transport,
        )
    finally:
        admin.close()
        for sidecar in sidecars:
            sidecar.close()
        serve.delete(namespace)
        serve.delete(f"{namespace}-admin")
        for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == namespace]:
            ray.kill(ray.get_actor(entry["name"], namespace=namespace))


def test_both_register_the_exact_one_serves_part_of_a_reindex_and_the_perturbed_one_serves_nothing(
    fleet: Fleet,
) -> None:
    from cluster.gate.probe import PROBE_TEXTS

    fleet.exact.wait_for_log("registered with the master", timeout_s=30)
    fleet.perturbed.wait_for_log("registered with the master", timeout_s=30)
    hosts = {url: fleet.wait_serving(s) for url, s in ((s.agent_url, s) for s in (fleet.exact, fleet.perturbed))}
    assert {h["transport"] for h in hosts.values()} == {fleet.transport}
    fleet.exact_server.reset()
    fleet.perturbed_server.reset()

    record, lines = fleet.reindex("shop", full=True)  # embeds every chunk, whatever an earlier test indexed

    writers = fleet.writers(record.build)
    print(f"[{fleet.transport}] rows by writer: {dict(writers)}")
    assert sum(writers.values()) == record.chunks == 360
    assert writers[fleet.provider_of(fleet.exact)] > 0 and writers[EMBEDDER] > 0, (writers, lines)
    assert writers[fleet.provider_of(fleet.perturbed)] == 0
    # Counted at the servers: the exact one embedded its rows (plus one drift probe per batch);
    # the perturbed one saw only the gate's probe texts, never a chunk.
    assert fleet.exact_server.stats().texts >= writers[fleet.provider_of(fleet.exact)]
    assert set(fleet.perturbed_server.stats().texts_by_request) <= {len(PROBE_TEXTS)}

    sidecars = fleet.sidecars()
    exact_role = sidecars[fleet.exact.agent_url]["roles"]["code-embedding"]
    perturbed_role = sidecars[fleet.perturbed.agent_url]["roles"]["code-embedding"]
    assert exact_role["gate"]["verdict"] == "verified" and exact_role["served"] > 0
    # One call: the gate's probe. Refused, it is never called again.
    assert perturbed_role["gate"]["verdict"] == "vector-incompatible" and perturbed_role["served"] == 1
    assert perturbed_role["eligible"] and "cosine" in perturbed_role["gate"]["detail"]
    assert sidecars[fleet.exact.agent_url]["hostname"] == "ws-9301" and sidecars[fleet.exact.agent_url]["fresh"]

    # The upstream key stays on the workstation: never in the master's answers or its registry.
    config_text = Path(fleet.settings.admin.config_path).read_text()
    assert UPSTREAM_KEY not in config_text and UPSTREAM_KEY not in fleet.admin.get("/sidecars").text
    assert fleet.exact.agent_url in config_text  # the registry is on disk


@pytest.mark.parametrize("fleet", ["ws"], indirect=True)  # one transport: the requeue is the dispatcher's
def test_a_sidecar_killed_mid_reindex_is_requeued_the_index_completes_and_it_rejoins(fleet: Fleet) -> None:
    fleet.wait_serving(fleet.exact)
    served_before = fleet.exact_server.stats().requests
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["record"], outcome["lines"] = fleet.reindex("shop", full=True)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            outcome["error"] = exc

    job = threading.Thread(target=run)
    job.start()
    # It is serving this reindex now (or the job ended without it: reported below).
    wait_until(
        lambda: fleet.exact_server.stats().requests >= served_before + 2 or not job.is_alive(),
        interval_s=0.05,
        what="the sidecar serving the reindex",
    )
    assert job.is_alive(), f"the sidecar never served the reindex: {outcome}"
    fleet.exact.kill()
    job.join(timeout=240)
    assert not job.is_alive() and "error" not in outcome, outcome.get("error")

    record = outcome["record"]
    writers = fleet.writers(record.build)
    print(f"[{fleet.transport}] killed mid-reindex, rows by writer: {dict(writers)}")
    assert sum(writers.values()) == record.chunks == 360  # complete: the lost batches were re-queued
    assert writers[EMBEDDER] > 0 and writers[fleet.provider_of(fleet.perturbed)] == 0

    registrations = fleet.exact.registrations()
    fleet.exact.start()  # the workstation comes back: it dials in and rejoins the lanes
    fleet.exact.wait_for_log("registered with the master", timeout_s=30, count=registrations + 1)
    fleet.wait_serving(fleet.exact)
    record, lines = fleet.reindex("shop", full=True)
    print(f"[{fleet.transport}] after rejoining, rows by writer: {dict(fleet.writers(record.build))}")
    assert fleet.writers(record.build)[fleet.provider_of(fleet.exact)] > 0, lines
