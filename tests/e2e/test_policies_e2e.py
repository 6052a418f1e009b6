"""Local actors and OpenRouter virtual containers serving side by side, per policy (DESIGN §3, §4).

A real local Ray, the real local embedder actor, virtual container actors talking HTTP to the
OpenRouter-compatible fake on 127.0.0.1 (which embeds with the same real model).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray
from pydantic import SecretStr

from tests.support.ray_cluster import CanaryScan, RayCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.ray, pytest.mark.slow]

CANARY_KEY = "sk-or-v1-" + "c0ffee" * 8  # a canary: must never show anywhere but the fake
NAMESPACE = "cloud-matrix"
TEXTS = [f"def handler_{i}(request):\n    return route(request, {i})" for i in range(160)]


@dataclass
class CloudCluster:
    settings: Any
    fake: Any
    dispatcher: Any
    local: Any
    containers: list[Any]


@pytest.fixture(scope="module")
def cloud(
    ray_cluster: RayCluster, fake_openrouter: Any, canary_scan: CanaryScan, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CloudCluster]:
    from actors import ensure_embedders, ensure_virtual_containers
    from actors.dispatcher import get_dispatcher
    from cluster.roles import Role
    from cluster.settings import SamespaceSettings

    fake_openrouter.configure(
        keys={CANARY_KEY: {"label": "matrix"}},
        upstreams={"pinned-same": {"vectors": "same"}},
    )
    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": tmp_path_factory.mktemp("cloud-data")},
        cloud={
            "enabled": True,
            "base_url": fake_openrouter.base_url,
            "routes": {
                "code-embedding": {"model": "qwen/qwen3-embedding-4b", "upstream": "pinned-same"},
                "reranker": {"model": "qwen/qwen3-reranker-8b"},
                "code-assistant": {"model": "poolside/laguna-s-2.1"},
            },
        },
    )
    # After every test here pushed and used the key: no Ray log, event file or store file may hold it.
    canary_scan.watch(CANARY_KEY, Path(settings.store.data_dir), ray_cluster.data_dir)
    containers = ensure_virtual_containers(settings)
    ray.get([c.set_key.remote(SecretStr(CANARY_KEY)) for c in containers])
    (local,) = ensure_embedders(settings)
    dispatcher = get_dispatcher(settings, Role.CODE_EMBEDDING)
    yield CloudCluster(settings, fake_openrouter, dispatcher, local, containers)
    for name in [c for c in ray.util.list_named_actors(all_namespaces=True) if c["namespace"] == NAMESPACE]:
        ray.kill(ray.get_actor(name["name"], namespace=NAMESPACE))


@pytest.fixture(autouse=True)
def fresh_gate_and_budget(cloud: CloudCluster) -> None:
    """Every test starts from the same state, whatever ran before: an untaught budget, and a gate
    that has just verified the healthy cloud lane (a probe answered 5xx or 429 by an earlier test
    would otherwise keep the lane out; with no verdict yet, a test's first embed would count the probe)."""
    from actors.config_push import push_policy
    from actors.dispatcher import get_dispatcher
    from cluster.naming import BUDGET_ACTOR_NAME, dispatcher_actor_name
    from cluster.roles import Role

    def stale() -> list[str]:
        names = {dispatcher_actor_name(Role.CODE_EMBEDDING), BUDGET_ACTOR_NAME}
        return [
            e["name"]
            for e in ray.util.list_named_actors(all_namespaces=True)
            if e["namespace"] == NAMESPACE and e["name"] in names
        ]

    for name in stale():
        ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
    wait_until(lambda: not stale(), what="the previous test's dispatcher and budget gone")
    cloud.dispatcher = get_dispatcher(cloud.settings, Role.CODE_EMBEDDING)
    push_policy(cloud.settings, Role.CODE_EMBEDDING, "aggregate")
    ray.get(cloud.dispatcher.embed.remote(TEXTS[:8]))
    verdicts = {r.key.provider: r.verdict for r in ray.get(cloud.dispatcher.gate_reports.remote())}
    assert any("-OR-" in name and verdict == "verified" for name, verdict in verdicts.items()), verdicts


def cloud_embeds(fake: Any, upstream: str | None = None) -> int:
    return int(fake.stats().total("ok", path="/embeddings", upstream=upstream))


def local_batches(cloud: CloudCluster) -> int:
    return int(ray.get(cloud.local.describe.remote()).served)


def run_policy(cloud: CloudCluster, policy: str) -> dict[str, Any]:
    """Embed TEXTS and one query under `policy`; count who served, at the fake and at the actor."""
    from actors.config_push import push_policy
    from cluster.roles import Role

    push_policy(cloud.settings, Role.CODE_EMBEDDING, policy)
    cloud_before, local_before = cloud_embeds(cloud.fake), local_batches(cloud)
    outcome = ray.get(cloud.dispatcher.embed.remote(TEXTS))
    _, _, query_provider = ray.get(cloud.dispatcher.encode_query.remote("route a request"))
    return {
        "outcome": outcome,
        "query_provider": query_provider,
        "cloud_requests": cloud_embeds(cloud.fake) - cloud_before,
        "local_batches": local_batches(cloud) - local_before,
    }


def test_a_virtual_container_is_named_pcname_or_role_and_needs_a_key(cloud: CloudCluster) -> None:
    import socket

    from cluster.naming import pc_name

    infos = {i.name: i for i in ray.get([c.describe.remote() for c in cloud.containers])}
    host = pc_name(socket.gethostname())
    assert set(infos) == {f"{host}-OR-CodeEmbedding", f"{host}-OR-Reranker", f"{host}-OR-CodeAssistant"}
    embedding = infos[f"{host}-OR-CodeEmbedding"]
    assert embedding.eligible and embedding.upstream == "pinned-same" and embedding.kind == "cloud"
    assert CANARY_KEY not in repr(embedding) and CANARY_KEY not in embedding.model_dump_json()


@pytest.mark.parametrize(
    ("policy", "local_serves", "cloud_serves", "query_by"),
    [
        ("local", True, False, "local"),
        ("cloud", False, True, "cloud"),
        ("aggregate", True, True, "local"),
        ("backup", True, False, "local"),
    ],
)
def test_each_policy_is_served_by_exactly_the_providers_spec_3_names(
    cloud: CloudCluster, policy: str, local_serves: bool, cloud_serves: bool, query_by: str
) -> None:
    got = run_policy(cloud, policy)
    outcome = got["outcome"]
    served = {name.split("-OR-")[0] if "-OR-" in name else name for name in set(outcome.served_by)}
    assert (got["local_batches"] > 0) is local_serves, got
    assert (got["cloud_requests"] > 0) is cloud_serves, got
    assert any("-OR-" in n for n in outcome.served_by) is cloud_serves
    assert any(n.startswith("samespace-embedder") for n in outcome.served_by) is local_serves, served
    assert ("-OR-" in got["query_provider"]) is (query_by == "cloud")
    assert outcome.vectors.shape == (len(TEXTS), 384)


def test_cloud_and_local_rows_are_the_same_vectors_in_input_order(cloud: CloudCluster) -> None:
    """The fake's 'same' upstream serves the local model: mixed rows must equal local-only rows."""
    mixed = run_policy(cloud, "aggregate")["outcome"]
    alone = run_policy(cloud, "local")["outcome"]
    assert len(set(mixed.served_by)) == 2
    cosines = np.sum(mixed.vectors * alone.vectors, axis=1)
    assert float(cosines.min()) > 0.999


def test_a_throttled_cloud_never_slows_the_local_lane(cloud: CloudCluster) -> None:
    cloud.fake.configure(
        keys={CANARY_KEY: {"label": "matrix"}},
        upstreams={"pinned-same": {"vectors": "same", "fail_rate_429": 1.0, "retry_after_s": 0.5}},
    )
    try:
        alone = run_policy(cloud, "local")
        throttled = run_policy(cloud, "aggregate")
    finally:
        cloud.fake.configure(keys={CANARY_KEY: {"label": "matrix"}}, upstreams={"pinned-same": {"vectors": "same"}})
    assert throttled["outcome"].served_by == alone["outcome"].served_by  # local served every text
    # How many batches it took is not compared: a lane's batch is sized by its measured rate, a timing.
    assert cloud.fake.stats().total("rate_limited", path="/embeddings") > 0  # the cloud lane did try


def test_a_failing_cloud_provider_is_dropped_and_its_work_served_by_local(cloud: CloudCluster) -> None:
    cloud.fake.configure(
        keys={CANARY_KEY: {"label": "matrix"}},
        upstreams={"pinned-same": {"vectors": "same", "fail_5xx_rate": 1.0}},
    )
    try:
        got = run_policy(cloud, "aggregate")
    finally:
        cloud.fake.configure(keys={CANARY_KEY: {"label": "matrix"}}, upstreams={"pinned-same": {"vectors": "same"}})
    outcome = got["outcome"]
    dropped = [name for name in outcome.dropped if "-OR-" in name]
    assert dropped and outcome.dropped[dropped[0]].startswith("dropped after 2 consecutive failures")
    assert "UpstreamUnavailable" in outcome.dropped[dropped[0]]
    assert len(outcome.served_by) == len(TEXTS) and all(n.startswith("samespace-embedder") for n in outcome.served_by)
    reference = run_policy(cloud, "local")["outcome"]
    assert float(np.sum(outcome.vectors * reference.vectors, axis=1).min()) > 0.9999  # complete, in order


def test_without_a_key_the_container_is_ineligible_and_sends_nothing(cloud: CloudCluster) -> None:
    from cluster.errors import AuthFailed

    embedding = next(c for c in cloud.containers if "CodeEmbedding" in ray.get(c.describe.remote()).name)
    ray.get(embedding.set_key.remote(None))
    try:
        info = ray.get(embedding.describe.remote())
        assert not info.eligible and "no OpenRouter key" in (info.reason or "")
        before = cloud.fake.stats().total_requests
        with pytest.raises(AuthFailed):
            ray.get(embedding.embed.remote(["x"]))
        assert cloud.fake.stats().total_requests == before
        got = run_policy(cloud, "aggregate")  # the pool carries on without it
        assert got["cloud_requests"] == 0 and got["local_batches"] > 0
    finally:
        ray.get(embedding.set_key.remote(SecretStr(CANARY_KEY)))


def test_the_registry_shows_policy_in_force_beside_policy_applied(cloud: CloudCluster) -> None:
    from actors.config_push import push_policy
    from cluster.roles import Role

    push_policy(cloud.settings, Role.CODE_EMBEDDING, "backup")
    views = ray.get(cloud.dispatcher.providers.remote())
    by_name = {v.provider.name: v for v in views}
    container = next(v for n, v in by_name.items() if "-OR-" in n)
    assert container.policy_in_force == "backup" and container.policy_applied == "backup"
    assert container.serves == "reserve"
    assert any(v.serves == "pool" and v.provider.kind == "local" for v in views)


def test_an_invalid_policy_is_refused_and_the_last_good_one_stays(cloud: CloudCluster) -> None:
    from actors.config_push import push_policy
    from cluster.roles import Role

    push_policy(cloud.settings, Role.CODE_EMBEDDING, "local")
    with pytest.raises(ValueError, match="sometimes"):
        push_policy(cloud.settings, Role.CODE_EMBEDDING, "sometimes")
    views = ray.get(cloud.dispatcher.providers.remote())
    assert {v.policy_in_force for v in views} == {"local"}


def test_the_code_assistant_is_served_by_its_virtual_container(cloud: CloudCluster) -> None:
    from actors.dispatcher import get_dispatcher
    from cluster.roles import Role

    assistant = get_dispatcher(cloud.settings, Role.CODE_ASSISTANT)
    result, provider = ray.get(assistant.chat.remote(messages=[{"role": "user", "content": "explain retry"}]))
    assert provider.endswith("-OR-CodeAssistant") and "explain retry" in result.content


def test_an_aggregate_reindex_records_rows_from_both_local_and_cloud_providers(
    cloud: CloudCluster, tmp_path: Path
) -> None:
    from actors import get_index_actor
    from actors.build_ports import run_reindex
    from actors.config_push import push_policy
    from cluster.index import SearchQuery
    from cluster.roles import Role

    repo = tmp_path / "agg"
    repo.mkdir()
    for f in range(8):
        (repo / f"m{f}.py").write_text("\n\n".join(f"def fn_{f}_{g}(x):\n    return x * {g} + {f}" for g in range(12)))
    push_policy(cloud.settings, Role.CODE_EMBEDDING, "aggregate")
    record = run_reindex(cloud.settings, repo, "agg", emit=lambda line: None)
    assert record.chunks == 96
    assert any(p.startswith("samespace-embedder") for p in record.providers)
    assert any("-OR-CodeEmbedding" in p for p in record.providers)
    assert record.identity.model == "all-MiniLM-L6-v2"  # the local reference defines the space
    index = get_index_actor(cloud.settings)
    vector, identity, _ = ray.get(cloud.dispatcher.encode_query.remote("fn_3_5"))
    hits = ray.get(
        index.search.remote(SearchQuery(scope="agg", vector=vector.tolist(), identity=identity, limit=96))
    ).hits
    writers = {h.payload["provider"] for h in hits}
    assert len(writers) == 2 and len(hits) == 96  # provenance per row names each writer
