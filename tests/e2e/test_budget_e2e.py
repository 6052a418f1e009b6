"""One key-wide budget above every virtual container, against a key-wide limit at the fake.

Time is compressed: the fake's rate window and the budget's are 5 s instead of 60 s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
import ray
from pydantic import SecretStr

from conftest import RayCluster

pytestmark = pytest.mark.ray

CANARY_KEY = "sk-or-v1-" + "5ca1ab1e" * 6
NAMESPACE = "budget"
WINDOW_S = 5.0
LIMIT = 30  # requests per window, for the whole key
PCS = ["pc1", "pc2", "pc3"]
LANES = 8


@pytest.fixture(scope="module")
def budget_settings(ray_cluster: RayCluster, fake_openrouter: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from cluster.settings import SamespaceSettings

    fake_openrouter.configure(
        keys={CANARY_KEY: {"label": "budget", "rpm_limit": LIMIT}},
        rpm_window_s=WINDOW_S,
        upstreams={"exact": {"vectors": "same", "latency_s": 0.2}},
    )
    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": tmp_path_factory.mktemp("budget-data")},
        budget={"window_s": WINDOW_S, "acquire_timeout_s": 60},
        cloud={"enabled": True, "base_url": fake_openrouter.base_url,
               "routes": {"code-embedding": {"model": "qwen/qwen3-embedding-4b", "upstream": "exact"}}},
    )
    yield settings
    for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
        ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


def containers(settings: Any) -> list[Any]:
    from actors.virtual_container import VirtualContainerActor
    from cluster.roles import Role

    handles = []
    for pc in PCS:
        name = f"{pc}-OR-CodeEmbedding"
        handle = VirtualContainerActor.options(
            name=name, namespace=NAMESPACE, lifetime="detached", get_if_exists=True, max_concurrency=64
        ).remote(name, Role.CODE_EMBEDDING, settings.cloud.routes[Role.CODE_EMBEDDING], settings, "aggregate")
        ray.get(handle.set_key.remote(SecretStr(CANARY_KEY)))
        handles.append(handle)
    return handles


async def hammer(handles: list[Any], seconds: float, project: str, priority: str) -> dict[str, int]:
    """Every container runs LANES concurrent callers for `seconds`; count what came back."""
    counts = {"ok": 0, "limited": 0}
    deadline = time.monotonic() + seconds

    async def lane(handle: Any) -> None:
        while time.monotonic() < deadline:
            try:
                await handle.embed.remote(["def f(x): return x"], project, priority)
                counts["ok"] += 1
            except Exception:  # noqa: BLE001 - a 429 or a budget wait: counted, the lane goes on
                counts["limited"] += 1

    await asyncio.gather(*(lane(h) for h in handles for _ in range(LANES)))
    return counts


def test_three_containers_of_eight_lanes_share_one_budget_under_a_key_wide_limit(
    budget_settings: Any, fake_openrouter: Any
) -> None:
    from actors.budget import get_budget_actor

    handles = containers(budget_settings)
    fake_openrouter.reset()
    started = time.monotonic()
    counts = asyncio.run(hammer(handles, 4 * WINDOW_S, "repo-a", "bulk"))
    elapsed = time.monotonic() - started
    arrivals = fake_openrouter.arrivals()
    admitted = [t for t, _, status in arrivals if status == 200]
    limited = [t for t, _, status in arrivals if status == 429]
    snapshot = ray.get(get_budget_actor(budget_settings).snapshot.remote())

    # The key's limit holds: never more than LIMIT admitted starts in any window.
    assert max(sum(1 for u in admitted if t - WINDOW_S < u <= t) for t in admitted) <= LIMIT
    # The budget learned the limit instead of drowning it: few 429s, most of the limit used.
    assert len(limited) <= 0.05 * len(arrivals) + 3, (len(limited), len(arrivals), snapshot)
    assert len(admitted) >= 0.6 * LIMIT * elapsed / WINDOW_S, (len(admitted), snapshot)
    # After a 429, no request starts during the cooldown (Retry-After ≥ 1 s here).
    for t429 in limited:
        assert not [t for t, _, _ in arrivals if t429 + 0.2 < t < t429 + 0.9], t429
    assert counts["ok"] > 0 and snapshot.rate_limited == len(limited)


def test_interactive_queries_of_another_project_are_not_queued_behind_a_bulk_backlog(budget_settings: Any) -> None:
    from actors.budget import get_budget_actor

    budget = get_budget_actor(budget_settings)
    snapshot = ray.get(budget.snapshot.remote())
    permits = snapshot.effective
    # Project A holds every permit and queues a backlog of 50 more bulk requests.
    held = ray.get([budget.acquire.remote("repo-a", "bulk", 30) for _ in range(permits)])
    backlog = [budget.acquire.remote("repo-a", "bulk", 30) for _ in range(50)]
    query = budget.acquire.remote("repo-b", "interactive", 30)
    time.sleep(0.5)
    ray.get(budget.release.remote(held[0], 0.2, "ok"))  # one permit turns over ...
    ticket = ray.get(query, timeout=5)  # ... and it goes to B's query, not to A's backlog
    ready, _ = ray.wait(backlog, num_returns=len(backlog), timeout=0.2)
    assert ready == []
    for t in held[1:] + [ticket]:
        ray.get(budget.release.remote(t, 0.2, "ok"))
    for ref in backlog:
        ray.get(budget.release.remote(ray.get(ref, timeout=30), 0.1, "ok"))


def test_local_lanes_never_touch_the_budget(budget_settings: Any) -> None:
    from actors import ensure_embedders
    from actors.budget import get_budget_actor

    budget = get_budget_actor(budget_settings)
    before = ray.get(budget.snapshot.remote()).requests
    (local,) = ensure_embedders(budget_settings)
    ray.get(local.encode_batch.remote(["def f(): pass"] * 8))
    assert ray.get(budget.snapshot.remote()).requests == before
