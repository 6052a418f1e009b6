"""Key-wide budget vs a naive fixed concurrency, against the fake OpenRouter's key-wide limit.

    python -m bench.budget [--seconds 150] [--limit 90] [--window 15]

Three virtual containers of eight lanes each hammer one key whose limit is `--limit` requests
per `--window` seconds (time compressed from 60 s), with 0.3 s of upstream latency:
1. BudgetActor: every call through a virtual container actor, under the key-wide permit budget.
2. naive: the same 24 lanes calling OpenRouter directly with a fixed 8 in flight per provider,
   retrying at once on a 429 (what a per-provider cap does).
Goodput = admitted requests / (limit × duration / window). Results in bench/results/budget.json.
Compressing the window much below 15 s distorts the result: a Retry-After is at least 1 s, which
is then a large share of a window (5 s windows gave 73% goodput for the same controller).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from cluster.environment import set_local_env_defaults

set_local_env_defaults()

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
KEY = "sk-or-v1-" + "be7c4" * 9
PCS = ["pc1", "pc2", "pc3"]
LANES = 8
MODEL = "qwen/qwen3-embedding-4b"


def measure(fake: Any, started: float, ended: float, limit: int, window_s: float) -> dict[str, float]:
    arrivals = [(t, status) for t, _, status in fake.arrivals() if started <= t <= ended]
    admitted = sum(1 for _, status in arrivals if status == 200)
    limited = sum(1 for _, status in arrivals if status == 429)
    capacity = limit * (ended - started) / window_s
    return {
        "admitted": admitted,
        "answered_429": limited,
        "goodput_of_limit": round(admitted / capacity, 4),
        "share_429": round(limited / max(1, admitted + limited), 4),
    }


async def naive(base_url: str, seconds: float) -> None:
    from pydantic import SecretStr

    from cluster.cloud.openrouter import OpenRouterClient
    from cluster.errors import UpstreamError

    deadline = time.monotonic() + seconds
    clients = [OpenRouterClient(provider_name=f"{pc}-naive", key=SecretStr(KEY), base_url=base_url) for pc in PCS]

    async def lane(client: OpenRouterClient) -> None:
        while time.monotonic() < deadline:
            with contextlib.suppress(UpstreamError):  # retry at once: the per-provider cap is all it has
                await client.embed(MODEL, "exact", ["def f(x): return x"], 384)

    await asyncio.gather(*(lane(c) for c in clients for _ in range(LANES)))
    for client in clients:
        await client.aclose()


async def budgeted(handles: list[Any], seconds: float) -> None:
    deadline = time.monotonic() + seconds

    async def lane(handle: Any) -> None:
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):  # a 429 or a bounded budget wait; the lane goes on
                await handle.embed.remote(["def f(x): return x"], "bench", "bulk")

    await asyncio.gather(*(lane(h) for h in handles for _ in range(LANES)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.budget")
    parser.add_argument("--seconds", type=float, default=150.0)
    parser.add_argument("--limit", type=int, default=90, help="requests per window for the whole key")
    parser.add_argument("--window", type=float, default=15.0, help="rate window in seconds (60 s compressed)")
    args = parser.parse_args(argv)

    import ray
    from pydantic import SecretStr

    from actors.budget import get_budget_actor
    from actors.virtual_container import VirtualContainerActor
    from cluster.roles import Role
    from cluster.settings import SamespaceSettings
    from tests.support.fakes.openrouter_server import FakeOpenRouterServer

    results: dict[str, Any] = {
        "limit_per_window": args.limit,
        "window_s": args.window,
        "seconds": args.seconds,
        "lanes": f"{len(PCS)} providers x {LANES}",
        "latency_s": 0.3,
    }
    with FakeOpenRouterServer() as fake:
        config = {
            "keys": {KEY: {"label": "bench", "rpm_limit": args.limit}},
            "rpm_window_s": args.window,
            "upstreams": {"exact": {"vectors": "same", "latency_s": 0.3}},
        }
        fake.configure(**config)
        started = time.monotonic()
        asyncio.run(naive(fake.base_url, args.seconds))
        results["naive_fixed_8_per_provider"] = measure(fake, started, time.monotonic(), args.limit, args.window)
        print("naive:", results["naive_fixed_8_per_provider"], flush=True)

        fake.configure(**config)
        fake.reset()
        time.sleep(args.window)  # let the naive run's window drain
        settings = SamespaceSettings(
            ray={"namespace": "bench-budget", "address": "local"},
            budget={"window_s": args.window},
            cloud={
                "enabled": True,
                "base_url": fake.base_url,
                "routes": {"code-embedding": {"model": MODEL, "upstream": "exact"}},
            },
        )
        ray.init(address="local", num_cpus=2, namespace="bench-budget", include_dashboard=False, log_to_driver=False)
        try:
            handles = []
            for pc in PCS:
                name = f"{pc}-OR-CodeEmbedding"
                handle = VirtualContainerActor.options(name=name, max_concurrency=64).remote(
                    name, Role.CODE_EMBEDDING, settings.cloud.routes[Role.CODE_EMBEDDING], settings, "aggregate"
                )
                ray.get(handle.set_key.remote(SecretStr(KEY)))
                handles.append(handle)
            ray.get(get_budget_actor(settings).discover.remote())
            started = time.monotonic()
            asyncio.run(budgeted(handles, args.seconds))
            results["budget_actor"] = measure(fake, started, time.monotonic(), args.limit, args.window)
            results["budget_actor"]["state"] = ray.get(get_budget_actor(settings).snapshot.remote()).reason
            print("budget:", results["budget_actor"], flush=True)
        finally:
            ray.shutdown()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "budget.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
