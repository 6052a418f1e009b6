"""Scale by adding nodes: a joining node gets its embedder and a lane; a leaving one loses no work.

The second node is a real raylet on this machine (tests/support/fakes/ray_worker_node.py), with a custom
resource `fake_gpu` standing in for a GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray

from tests.support.ray_cluster import RayCluster
from tests.support.second_node import SecondNode
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NAMESPACE = "two-nodes"
TEXTS = [f"def step_{i}(state):\n    return transition(state, {i}) + cost_{i % 7}" for i in range(900)]


def alive_nodes() -> list[dict[str, Any]]:
    return [n for n in ray.nodes() if n["Alive"]]


@pytest.fixture
def settings(ray_cluster: RayCluster, tmp_path: Path) -> Iterator[Any]:
    from cluster.settings import SamespaceSettings

    yield SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": tmp_path / "data"},
        embedding={"accelerator_resource": "fake_gpu", "cpu_embedder": "always"},
    )
    for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
        ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


def test_a_joining_node_gets_an_embedder_and_a_lane_and_a_leaving_node_loses_no_work(
    settings: Any, tmp_path: Path
) -> None:
    from actors import ensure_embedders
    from actors.dispatcher import get_dispatcher
    from cluster.roles import Role

    (local,) = ensure_embedders(settings)
    ray.get(local.describe.remote(), timeout=600)  # the model loaded first (the machine may be busy)
    dispatcher = get_dispatcher(settings, Role.CODE_EMBEDDING)
    alone = ray.get(dispatcher.embed.remote(TEXTS[:64]))
    assert set(alone.served_by) == {"samespace-embedder-cpu0"}

    nodes_before = len(alive_nodes())
    node = SecondNode(ray.get_runtime_context().gcs_address, tmp_path / "node2.log")
    try:
        wait_until(lambda: len(alive_nodes()) == nodes_before + 1, 60, what="the second node joining")
        new_node = next(n for n in alive_nodes() if n["Resources"].get("fake_gpu"))
        handles = ensure_embedders(settings)  # what every dispatch does; nothing restarts
        infos = ray.get([h.describe.remote() for h in handles], timeout=180)
        joined = next(i for i in infos if i.node_id == new_node["NodeID"])
        assert joined.name.endswith("-gpu0") and joined.eligible

        reference = ray.get(dispatcher.embed.remote(TEXTS[:200]))
        assert {"samespace-embedder-cpu0", joined.name} <= set(reference.served_by)  # it joined the lanes

        running = dispatcher.embed.remote(TEXTS)
        (joined_handle,) = [h for h, i in zip(handles, infos, strict=True) if i.name == joined.name]
        served_before = ray.get(joined_handle.describe.remote()).served
        wait_until(
            lambda: ray.get(joined_handle.describe.remote()).served > served_before,
            120,
            what="the new node's lane serving during the run",
        )
        node.stop()  # the node leaves mid-run
        outcome = ray.get(running, timeout=600)
    finally:
        node.stop()

    assert outcome.vectors.shape == (len(TEXTS), 384)
    assert len(outcome.served_by) == len(TEXTS) and all(outcome.served_by)  # every text served: nothing lost
    assert joined.name in outcome.dropped  # its lane was dropped, its batches re-queued
    local_only = ray.get(dispatcher.embed.remote(TEXTS))
    assert float(np.sum(outcome.vectors * local_only.vectors, axis=1).min()) > 0.9999  # complete, in order
    wait_until(lambda: len(alive_nodes()) == nodes_before, 90, what="the stopped node leaving")
