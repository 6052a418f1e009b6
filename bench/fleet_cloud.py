"""`bench.fleet`'s cloud row: a sidecar-hosted virtual container against an in-cluster one and against
OpenRouter called directly, on the project's OpenRouter fake, same batches, same run.

1. direct: each batch POSTed to the fake's /embeddings with the pin, as a 20-line script would;
2. in-cluster: the batch to the node's virtual container actor (`embed`: a key-wide permit, then the
   same request);
3. sidecar: the batch to the fleet actor's `virtual_embed` for `<host>-OR-CodeEmbedding` on a
   reference sidecar (`python -m sidecar --serve code-embedding=openrouter:<model>@<upstream>`):
   the permit, a `virtual-embed` command over the /sidecar WebSocket, the sidecar's request, the
   result and the charges back.
The fake answers after `UPSTREAM_LATENCY_S`, as a remote upstream would; what is left is our overhead.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

KEY = "sk-or-v1-" + "b3nch" * 10
MODEL, UPSTREAM = "qwen/qwen3-embedding-4b", "bench-exact"
UPSTREAM_LATENCY_S = 0.05
HOST = "benchws"
FLEET_TOKEN = "bench-fleet-cloud-token"


def measure_cloud_lane(port: int, work: Path, texts: list[list[str]]) -> dict[str, Any]:
    """p50 per batch of the three paths, and their ratios. Serve runs on `port`; the caller shuts it down."""
    import httpx
    import ray
    from pydantic import SecretStr
    from ray import serve

    from actors import ensure_virtual_containers
    from actors.fleet import get_fleet_actor
    from cluster.naming import virtual_container_name
    from cluster.roles import Role
    from cluster.settings import SamespaceSettings
    from serve_apps.mcp import McpIngress
    from tests.support.fakes.openrouter_server import FakeOpenRouterServer
    from tests.support.fakes.sidecar_process import SidecarProcess, openrouter_serve_arg

    with FakeOpenRouterServer() as fake:
        fake.configure(keys={KEY: {"label": "bench"}}, upstreams={UPSTREAM: {"latency_s": UPSTREAM_LATENCY_S}})
        settings = SamespaceSettings(
            ray={"namespace": "bench-fleet-cloud", "address": "local"},
            store={"data_dir": work / "data-cloud"},
            admin={"config_path": work / "config-cloud.json"},
            cloud={
                "enabled": True,
                "base_url": fake.base_url,
                "routes": {"code-embedding": {"model": MODEL, "upstream": UPSTREAM}},
            },
            policies={"code-embedding": "cloud"},
            fleet_token=FLEET_TOKEN,
            fleet={"virtual_discovery_s": 1},
        )
        serve.run(McpIngress.options(num_replicas=1).bind(settings), name="fleet-cloud", route_prefix="/cloud")
        (container,) = ensure_virtual_containers(settings)
        ray.get(container.set_key.remote(SecretStr(KEY)))
        sidecar = SidecarProcess(
            master=f"http://127.0.0.1:{port}/cloud",
            serves=[openrouter_serve_arg("code-embedding", MODEL, UPSTREAM)],
            fleet_token=FLEET_TOKEN,
            openrouter_base_url=fake.base_url,
            hostname=HOST,
            agent_url="http://127.0.0.1:9402",
            log_level="INFO",
        ).start()
        try:
            fleet = get_fleet_actor(settings)
            name = virtual_container_name(HOST, Role.CODE_EMBEDDING)
            agent = _wait_for_host(fleet, sidecar.agent_url)
            ray.get(fleet.push_key.remote(SecretStr(KEY), {agent: None}))
            _wait_eligible(fleet, name)
            body = {
                "model": MODEL,
                "encoding_format": "float",
                "provider": {"order": [UPSTREAM], "allow_fallbacks": False},
            }
            direct_s: list[float] = []
            in_cluster_s: list[float] = []
            sidecar_s: list[float] = []
            with httpx.Client(base_url=fake.base_url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as client:
                for batch in [texts[0], *texts]:  # the first round warms every path up, and is dropped
                    t0 = time.perf_counter()
                    client.post("/embeddings", json={**body, "input": batch}).raise_for_status()
                    t1 = time.perf_counter()
                    ray.get(container.embed.remote(batch))
                    t2 = time.perf_counter()
                    ray.get(fleet.virtual_embed.remote(name, batch))
                    t3 = time.perf_counter()
                    direct_s.append(t1 - t0)
                    in_cluster_s.append(t2 - t1)
                    sidecar_s.append(t3 - t2)
        finally:
            sidecar.close()
            serve.delete("fleet-cloud")
    direct, in_cluster, via_sidecar = (statistics.median(x[1:]) for x in (direct_s, in_cluster_s, sidecar_s))
    return {
        "upstream_latency_ms": UPSTREAM_LATENCY_S * 1000,
        "direct_batch_ms_p50": round(direct * 1000, 1),
        "in_cluster_batch_ms_p50": round(in_cluster * 1000, 1),
        "sidecar_batch_ms_p50": round(via_sidecar * 1000, 1),
        "in_cluster_over_direct": round(in_cluster / direct, 3),
        "sidecar_over_direct": round(via_sidecar / direct, 3),
        "sidecar_over_in_cluster": round(via_sidecar / in_cluster, 3),
    }


def _wait_for_host(fleet: Any, agent_url: str, timeout_s: float = 60.0) -> str:
    import ray

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for host in ray.get(fleet.virtual_hosts.remote()):
            if host.agent_url == agent_url and host.containers:
                return str(host.agent_id)
        time.sleep(0.2)
    raise RuntimeError(f"the sidecar {agent_url} announced no virtual container within {timeout_s:g} s")


def _wait_eligible(fleet: Any, name: str, timeout_s: float = 60.0) -> None:
    import ray

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(info.name == name and info.eligible for info in ray.get(fleet.providers.remote())):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{name} did not become eligible within {timeout_s:g} s")
