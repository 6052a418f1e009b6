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
