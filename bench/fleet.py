"""The cost of the sidecar path, and a reindex with a sidecar lane, against baselines in the same run.

    python -m bench.fleet [--files 40] [--batches 20]

1. direct: batches of 32 texts POSTed straight to an OpenAI-compatible embedding server (the
   packaged MiniLM) — what a workstation's own client would see.
2. fleet: the same batches as `embed` commands to a reference sidecar (python -m sidecar, over
   the /sidecar WebSocket on Serve, through the fleet actor) fronting that same server — the
   master↔sidecar overhead is the difference.
3. reindex of a synthetic repository under policy `local`: the CPU embedder actor alone vs the
   actor plus the sidecar's lane (on this one machine both share the same cores, so the second
   number measures scheduling, not added capacity).
4. the cloud lane a sidecar hosts (`--serve code-embedding=openrouter:<model>@<upstream>`) against an
   in-cluster virtual container and against OpenRouter called directly, on the OpenRouter fake
   (`bench/fleet_cloud.py`).
Results: printed, and written to bench/results/fleet.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.fleet_cloud import measure_cloud_lane
from cluster.environment import set_local_env_defaults

set_local_env_defaults()

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
TOKEN = "bench-fleet-token"
BATCH = 32


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet")
    parser.add_argument("--files", type=int, default=40, help="files of 12 functions in the synthetic repo")
    parser.add_argument("--batches", type=int, default=20, help="batches of 32 texts per side")
    args = parser.parse_args(argv)

    import httpx
    import ray
    from ray import serve

    from actors.build_ports import run_reindex
    from actors.fleet import get_fleet_actor
    from cluster.naming import sidecar_provider_name
    from cluster.roles import Role
    from cluster.settings import SamespaceSettings
    from serve_apps.mcp import McpIngress
    from tests.support.fakes.embedding_server import FakeEmbeddingServer
    from tests.support.fakes.openrouter_server import free_port
    from tests.support.fakes.repos import function_repo
    from tests.support.fakes.sidecar_process import SidecarProcess, serve_arg

    work = Path(tempfile.mkdtemp(prefix="samespace-bench-fleet-"))
    repo = function_repo(work / "repo", args.files)
    texts = [
        [f"def bench_{b}_{i}(x):\n    return x * {i} + {b}  # batch {b}" for i in range(BATCH)]
        for b in range(args.batches)
    ]
    report: dict[str, Any] = {"batch": BATCH, "batches": args.batches}
    # Logical CPUs: two namespaces' CPU embedder actors (1 CPU each) and the index actors fit side by side.
    ray.init(address="local", namespace="bench-fleet", num_cpus=4, include_dashboard=False, log_to_driver=False)
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})

    def settings_for(namespace: str) -> SamespaceSettings:
        return SamespaceSettings(
            ray={"namespace": namespace, "address": "local"},
            store={"data_dir": work / f"data-{namespace}"},
            admin={"config_path": work / f"config-{namespace}.json"},
            policies={"code-embedding": "local"},
            fleet_token=TOKEN,
        )

    try:
        with FakeEmbeddingServer() as server:
            # 1 and 2: direct vs through the fleet, same server, same batches, alternating.
            settings = settings_for("bench-fleet")
            serve.run(McpIngress.options(num_replicas=1).bind(settings), name="fleet", route_prefix="/")
            sidecar = SidecarProcess(
                master=f"http://127.0.0.1:{port}",
                serves=[serve_arg("code-embedding", server.base_url)],
                fleet_token=TOKEN,
                agent_url="http://127.0.0.1:9401",
                log_level="INFO",
            ).start()
            try:
                sidecar.wait_for_log("registered with the master", timeout_s=60)
                fleet = get_fleet_actor(settings)
                agent_id = next(h.agent_id for h in ray.get(fleet.hosts.remote()) if h.agent_url == sidecar.agent_url)
                provider = sidecar_provider_name(sidecar.agent_url, agent_id, Role.CODE_EMBEDDING)
                while not any(i.name == provider and i.eligible for i in ray.get(fleet.providers.remote())):
                    time.sleep(0.2)
                direct_s: list[float] = []
                fleet_s: list[float] = []
                with httpx.Client(base_url=server.base_url, timeout=60) as client:
                    client.post("/embeddings", json={"model": "m", "input": texts[0]}).raise_for_status()  # warm-up
                    ray.get(fleet.embed.remote(provider, texts[0]))
                    for batch in texts:
                        t0 = time.perf_counter()
                        client.post("/embeddings", json={"model": "m", "input": batch}).raise_for_status()
                        direct_s.append(time.perf_counter() - t0)
                        t0 = time.perf_counter()
                        ray.get(fleet.embed.remote(provider, batch))
                        fleet_s.append(time.perf_counter() - t0)
                report["direct_batch_ms_p50"] = round(statistics.median(direct_s) * 1000, 1)
                report["fleet_batch_ms_p50"] = round(statistics.median(fleet_s) * 1000, 1)
                report["fleet_over_direct"] = round(statistics.median(fleet_s) / statistics.median(direct_s), 3)
                report["fleet_overhead_ms_p50"] = round(
                    (statistics.median(fleet_s) - statistics.median(direct_s)) * 1000, 1
                )

                # 3: a reindex with the sidecar's lane beside the CPU actor (actors started first).
                run_reindex(settings, function_repo(work / "warm", 2), "warm", emit=lambda line: None)
                lines: list[str] = []
                t0 = time.perf_counter()
                record = run_reindex(settings, repo, "bench", emit=lines.append, full=True)
                with_sidecar_s = time.perf_counter() - t0
                report["reindex_with_sidecar"] = {
                    "seconds": round(with_sidecar_s, 2),
                    "chunks": record.chunks,
                    "served_by": next((x for x in lines if x.startswith("served by")), ""),
                }
            finally:
                sidecar.close()
            # The baseline: a namespace without a sidecar, the same repository.
            alone = settings_for("bench-fleet-alone")
            run_reindex(alone, work / "warm", "warm", emit=lambda line: None)  # start the actors
            lines = []
            t0 = time.perf_counter()
            record = run_reindex(alone, repo, "bench", emit=lines.append, full=True)
            alone_s = time.perf_counter() - t0
            report["reindex_actor_only"] = {
                "seconds": round(alone_s, 2),
                "chunks": record.chunks,
                "served_by": next((x for x in lines if x.startswith("served by")), ""),
            }
            report["reindex_with_sidecar_over_actor_only"] = round(with_sidecar_s / alone_s, 3)
        report["sidecar_cloud_lane"] = measure_cloud_lane(port, work, texts)
    finally:
        serve.shutdown()
        ray.shutdown()
    print(json.dumps(report, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fleet.json").write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
