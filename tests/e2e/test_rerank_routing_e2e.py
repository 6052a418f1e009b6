"""Single-call routing for the reranker: a local cross-encoder first, the cloud in reserve."""

from __future__ import annotations

from typing import Any

import pytest
import ray
from pydantic import SecretStr

from tests.support.ray_cluster import RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.slow]

CANARY_KEY = "sk-or-v1-" + "feed" * 12
NAMESPACE = "rerank-routing"
DOCS = ["the weather is sunny today", "retry a failing request with exponential backoff", "parse a date string"]


@pytest.fixture(scope="module")
def rerank_settings(ray_cluster: RayCluster, fake_openrouter: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from cluster.settings import SamespaceSettings
    from tests.support.fakes.models import build_local_cross_encoder

    fake_openrouter.configure(keys={CANARY_KEY: {"label": "rerank"}})
    model_dir = build_local_cross_encoder(tmp_path_factory.mktemp("ce"))
    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": tmp_path_factory.mktemp("rerank-data")},
        reranker={"model": str(model_dir)},
        cloud={
            "enabled": True,
            "base_url": fake_openrouter.base_url,
            "routes": {"reranker": {"model": "qwen/qwen3-reranker-8b"}},
        },
    )
    yield settings
    for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
        ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


def test_the_local_reranker_serves_first_and_the_cloud_takes_over_when_it_is_gone(rerank_settings: Any) -> None:
    from actors import ensure_rerankers, ensure_virtual_containers
    from actors.config_push import push_policy
    from actors.dispatcher import get_dispatcher
    from cluster.roles import Role

    (container,) = ensure_virtual_containers(rerank_settings)
    ray.get(container.set_key.remote(SecretStr(CANARY_KEY)))
    (local,) = ensure_rerankers(rerank_settings)
    ray.get(local.describe.remote())  # loaded: a reranker still loading is rightly passed over
    dispatcher = get_dispatcher(rerank_settings, Role.RERANKER)
    query = "retry with backoff"

    scores, provider = ray.get(dispatcher.rerank.remote(query, DOCS))
    assert provider == "samespace-reranker-cpu0" and len(scores) == 3  # aggregate acts as backup: local first

    push_policy(rerank_settings, Role.RERANKER, "cloud")
    scores, provider = ray.get(dispatcher.rerank.remote(query, DOCS))
    assert "-OR-Reranker" in provider
    assert max(range(3), key=lambda i: scores[i]) == 1  # the fake reranks with the real model

    push_policy(rerank_settings, Role.RERANKER, "local")
    scores, provider = ray.get(dispatcher.rerank.remote(query, DOCS))
    assert provider == "samespace-reranker-cpu0"
    assert ray.get(local.describe.remote()).served >= 2
