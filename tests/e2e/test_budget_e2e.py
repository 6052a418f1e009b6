"""One key-wide budget above every virtual container, against a key-wide limit at the fake.

Time is compressed: the fake's rate window and the budget's are 5 s instead of 60 s. Each test gets
its own namespace, so its own budget actor: no test starts from what another one taught the budget.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from pydantic import SecretStr

from tests.support.ray_cluster import RayCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.ray, pytest.mark.slow]

CANARY_KEY = "sk-or-v1-" + "5ca1ab1e" * 6
WINDOW_S = 5.0
LIMIT = 30  # requests per window, for the whole key
PCS = ["pc1", "pc2", "pc3"]
LANES = 8


@pytest.fixture
def budget_settings(ray_cluster: RayCluster, fake_openrouter: Any, tmp_path: Path) -> Iterator[Any]:
    """Settings in a namespace of this test's own (a fresh budget actor), against the shared fake."""
    from cluster.settings import SamespaceSettings

    fake_openrouter.configure(
        keys={CANARY_KEY: {"label": "budget", "rpm_limit": LIMIT}},
        rpm_window_s=WINDOW_S,
        upstreams={"exact": {"vectors": "same", "latency_s": 0.2}},
    )
    namespace = f"budget-{uuid.uuid4().hex[:8]}"
    settings = SamespaceSettings(
        ray={"namespace": namespace},
        store={"data_dir": tmp_path / "budget-data"},
        budget={"window_s": WINDOW_S, "acquire_timeout_s": 60},
        # Local only for code-embedding: a cloud lane joins only the calls that name a container.
        policies={"code-embedding": "local"},
        cloud={
            "enabled": True,
            "base_url": fake_openrouter.base_url,
            "routes": {"code-embedding": {"model": "qwen/qwen3-embedding-4b", "upstream": "exact"}},
        },
    )
    yield settings
    for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == namespace]:
        ray.kill(ray.get_actor(entry["name"], namespace=namespace))


def containers(settings: Any) -> list[Any]:
    from actors.handles import get_or_start
    from actors.virtual_container import VirtualContainerActor
    from cluster.roles import Role

    handles = []
    for pc in PCS:
        name = f"{pc}-OR-CodeEmbedding"
        route = settings.cloud.routes[Role.CODE_EMBEDDING]
        args = (name, Role.CODE_EMBEDDING, route, settings, "aggregate")
        handle = get_or_start(VirtualContainerActor, settings, name, *args, max_concurrency=64)
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
    # Not a speed check: the bound is the fake's own limit over the time the lanes ran, so a slow
    # machine lowers it too; it fails only if the budget starved the key (used under 60 % of it).
    assert len(admitted) >= 0.6 * LIMIT * elapsed / WINDOW_S, (len(admitted), snapshot)
    # After a 429, no request starts during the cooldown (Retry-After ≥ 1 s here).
    for t429 in limited:
        assert not [t for t, _, _ in arrivals if t429 + 0.2 < t < t429 + 0.9], t429
    assert counts["ok"] > 0 and snapshot.rate_limited == len(limited)


def test_interactive_queries_of_another_project_are_not_queued_behind_a_bulk_backlog(budget_settings: Any) -> None:
    from actors.budget import get_budget_actor

    budget = get_budget_actor(budget_settings)
    permits = ray.get(budget.snapshot.remote()).effective
    ray.get(budget.set_override.remote(permits))  # pinned: discovery cannot change the permits mid-test
    # Project A holds every permit and queues a backlog of 50 more bulk requests.
    held = ray.get([budget.acquire.remote("repo-a", "bulk", 60) for _ in range(permits)])
    backlog = [budget.acquire.remote("repo-a", "bulk", 60) for _ in range(50)]
    query = budget.acquire.remote("repo-b", "interactive", 60)
    queued = {"repo-a": {"bulk": 50}, "repo-b": {"interactive": 1}}
    wait_until(lambda: ray.get(budget.snapshot.remote()).waiting == queued, what="the backlog and the query queued")
    ray.get(budget.release.remote(held[0], 0.2, "ok"))  # one permit turns over ...
    ticket = ray.get(query, timeout=60)  # ... and it goes to B's query, not to A's backlog
    snapshot = ray.get(budget.snapshot.remote())
    assert snapshot.in_flight == permits and snapshot.waiting == {"repo-a": {"bulk": 50}}, snapshot
    ready, _ = ray.wait(backlog, num_returns=len(backlog), timeout=0.2)
    assert ready == []
    for t in [*held[1:], ticket]:
        ray.get(budget.release.remote(t, 0.2, "ok"))
    for ref in backlog:
        ray.get(budget.release.remote(ray.get(ref, timeout=30), 0.1, "ok"))


def test_local_lanes_never_touch_the_budget(budget_settings: Any, fake_openrouter: Any) -> None:
    """Through the real dispatch path, with keyed cloud lanes standing by: under `local` the
    dispatcher serves from the local embedder, and the budget sees no request."""
    from actors import ensure_embedders
    from actors.budget import get_budget_actor
    from actors.dispatcher import get_dispatcher
    from cluster.roles import Role

    # A cold embedder loads its model before it answers discovery: wait for it here.
    embedders = ensure_embedders(budget_settings)
    ray.get([h.describe.remote() for h in embedders], timeout=budget_settings.embedding.startup_timeout_s)
    containers(budget_settings)  # cloud lanes that could serve: the key is set
    budget = get_budget_actor(budget_settings)
    before = ray.get(budget.snapshot.remote())
    fake_openrouter.reset()
    dispatcher = get_dispatcher(budget_settings, Role.CODE_EMBEDDING)
    outcome = ray.get(dispatcher.embed.remote(["def f(): pass"] * 8, "repo-local", "interactive"))
    assert len(outcome.served_by) == 8 and all(p.startswith("samespace-embedder") for p in outcome.served_by), outcome
    after = ray.get(budget.snapshot.remote())
    assert (after.requests, after.in_flight, after.waiting) == (before.requests, 0, {}), after
    assert [label for _, label, _ in fake_openrouter.arrivals() if label == "budget"] == []
