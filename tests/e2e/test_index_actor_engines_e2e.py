"""The index actor owns either engine: Qdrant Edge (embedded) or qdrant-client (server seam)."""

from __future__ import annotations

from pathlib import Path

import pytest
import ray

from tests.support.ray_cluster import RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.mark.parametrize("kind", ["embedded", "server"])
def test_the_index_actor_builds_switches_and_searches_on_both_engines(
    ray_cluster: RayCluster, tmp_path: Path, kind: str
) -> None:
    from actors import ensure_embedders, get_index_actor
    from cluster.errors import EncoderMismatch
    from cluster.index import SearchQuery
    from cluster.index.catalog import point_id, point_payload
    from cluster.ingest.chunking import chunk_file
    from cluster.settings import SamespaceSettings
    from cluster.space import embedding_text
    from cluster.types import StoredPoint

    store = (
        {"kind": "embedded", "data_dir": tmp_path}
        if kind == "embedded"
        else {"kind": "server", "url": f"path:{tmp_path}"}
    )
    settings = SamespaceSettings(store=store, ray={"namespace": f"engine-{kind}"})
    index = get_index_actor(settings)
    (embedder,) = ensure_embedders(ray_cluster.settings)  # type: ignore[arg-type]
    identity = ray.get(embedder.identity.remote())
    source = "def add(a, b):\n    return a + b\n\n\ndef parse_date(text):\n    return text.split('-')\n"
    chunks = chunk_file("m.py", source, settings.chunking)
    try:
        builds = []
        for _ in range(2):
            build = ray.get(index.begin_build.remote("engine", identity, str(tmp_path), None))
            vectors = ray.get(embedder.encode_batch.remote([embedding_text(c) for c in chunks]))
            points = [
                StoredPoint(
                    id=point_id("engine", c),
                    vector=v.tolist(),
                    payload=point_payload("engine", c, identity, identity, "test", build),
                )
                for c, v in zip(chunks, vectors, strict=True)
            ]
            ray.get(index.write.remote(build, points))
            record = ray.get(index.commit_build.remote(build, 1, ["test"]))
            assert record.chunks == len(chunks) == 2
            builds.append(build)
        assert ray.get(index.collections.remote()) == [builds[-1]]  # switched, old build dropped
        query, query_identity = ray.get(embedder.encode_query.remote("split a date string"))
        search = SearchQuery(scope="engine", vector=query.tolist(), identity=query_identity, limit=2)
        answer = ray.get(index.search.remote(search))
        hits, refused = answer.hits, answer.refused
        assert refused == [] and hits[0].payload["symbol"] == "parse_date"
        assert {h.payload["build"] for h in hits} == {builds[-1]}
        other = query_identity.model_copy(update={"width": 385})
        with pytest.raises(EncoderMismatch):
            ray.get(index.search.remote(search.model_copy(update={"identity": other})))
    finally:
        ray.kill(index)


def test_a_large_build_gets_its_graph_on_its_own_thread_while_searches_go_on(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    import numpy as np

    from actors import ensure_embedders, get_index_actor
    from cluster.index import SearchQuery
    from cluster.settings import SamespaceSettings
    from cluster.types import StoredPoint

    rows = 400
    settings = SamespaceSettings(
        store={"kind": "embedded", "data_dir": tmp_path, "vector_index": {"exact_below_rows": rows // 2}},
        ray={"namespace": "engine-graph"},
    )
    index = get_index_actor(settings)
    (embedder,) = ensure_embedders(ray_cluster.settings)  # type: ignore[arg-type]
    identity = ray.get(embedder.identity.remote())
    unit = np.random.default_rng(3).normal(size=(rows, identity.width))
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)

    def build_of(name: str, count: int) -> str:
        build = ray.get(index.begin_build.remote(name, identity, str(tmp_path), None))
        points = [
            StoredPoint(
                id=f"00000000-0000-4000-8000-{i:012d}",
                vector=unit[i].tolist(),
                name_vector=unit[i].tolist(),
                payload={"repo": name, "path": f"f{i}.py", "text": f"def f{i}(): ...", "build": build},
            )
            for i in range(count)
        ]
        ray.get(index.write.remote(build, points))
        return build

    def search(name: str) -> SearchQuery:
        return SearchQuery(scope=name, vector=unit[7].tolist(), identity=identity, limit=3)

    try:
        small = build_of("small", 20)
        assert ray.get(index.index_vectors.remote(small)) is False  # under the threshold: nothing to build
        ray.get(index.commit_build.remote(small, 1, ["test"]))
        large = build_of("large", rows)
        indexing = index.index_vectors.remote(large)  # a child process builds the graph meanwhile
        answer = ray.get(index.search.remote(search("small")))
        ready, _ = ray.wait([indexing], timeout=0)
        assert answer.hits[0].payload["path"] == "f7.py" and not ready  # served while the graph was built
        assert ray.get(indexing) is True
        ray.get(index.commit_build.remote(large, 1, ["test"]))
        hits = ray.get(index.search.remote(search("large"))).hits
        assert hits[0].payload == {"repo": "large", "path": "f7.py", "text": "def f7(): ...", "build": large}
    finally:
        ray.kill(index)
