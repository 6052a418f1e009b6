"""`embedding.cpu_actors`: several CPU embedder processes, one encoder space, a reindex's batches spread."""

from __future__ import annotations

import numpy as np
import pytest
import ray

from tests.support.ray_cluster import RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NAMESPACE = "cpu-actors"


def test_two_cpu_embedders_share_the_space_and_the_batches(ray_cluster: RayCluster) -> None:
    from actors import ensure_embedders
    from actors.dispatcher import get_dispatcher
    from cluster.roles import Role
    from cluster.settings import SamespaceSettings

    settings = SamespaceSettings(ray={"namespace": NAMESPACE}, embedding={"cpu_actors": 2, "cpu_embedder": "always"})
    try:
        embedders = ensure_embedders(settings)
        assert len(embedders) == 2
        assert len(ensure_embedders(settings)) == 2  # found again, none started twice
        names = {e["name"] for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE}
        assert {"samespace-embedder-cpu0", "samespace-embedder-cpu1"} <= names, names
        first, second = ray.get([e.identity.remote() for e in embedders])
        assert first == second  # one encoder space: either writes into the same index
        text = ["def parse_date(text):\n    return text.split('-')\n"]
        left, right = ray.get([e.encode_batch.remote(text) for e in embedders])
        np.testing.assert_allclose(left, right, atol=1e-6)

        texts = [f"def handler_{k}(request):\n    return request.get('k{k}')\n" for k in range(600)]
        outcome = ray.get(get_dispatcher(settings, Role.CODE_EMBEDDING).embed.remote(texts))
        assert outcome.vectors.shape == (len(texts), first.width)
        assert set(outcome.served_by) == {"samespace-embedder-cpu0", "samespace-embedder-cpu1"}, outcome.batches
        assert not outcome.dropped
    finally:
        for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
            ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))
