"""Incremental reindex end to end: real Ray, the real model and store, its own namespace.

What reaches the encoder is counted at the embedder itself (`encode_count` of each chunk's
embedded text): an unchanged chunk is never encoded again, a changed one exactly once more.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray

from tests.support.ray_cluster import RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NAMESPACE = "incremental"
EMBEDDER = "samespace-embedder-cpu0"
TOPICS = ["invoice", "shipment", "customer", "warehouse", "payment", "refund", "coupon", "catalog"]


@dataclass
class Env:
    settings: Any
    tmp: pytest.TempPathFactory

    @property
    def index(self) -> Any:
        from actors import get_index_actor

        return get_index_actor(self.settings)

    @property
    def embedder(self) -> Any:
        return ray.get_actor(EMBEDDER, namespace=NAMESPACE)

    def reindex(self, repo: Path, name: str, **kwargs: Any) -> tuple[Any, list[str]]:
        from actors.build_ports import run_reindex

        lines: list[str] = []
        record = run_reindex(self.settings, repo, name, emit=lines.append, **kwargs)
        return record, lines

    def texts(self, repo: Path) -> dict[str, str]:
        """Embedded text of every chunk of `repo`, by 'path:symbol'."""
        from cluster.build import collect_chunks
        from cluster.space import embedding_text

        chunks, _, _ = collect_chunks(repo, self.settings)
        return {f"{c.path}:{c.symbol}": embedding_text(c) for c in chunks}

    def counts(self, texts: dict[str, str]) -> dict[str, int]:
        """How often the embedder encoded each text."""
        return dict(zip(texts, ray.get([self.embedder.encode_count.remote(t) for t in texts.values()]), strict=True))

    def builds(self, name: str) -> list[str]:
        return [c for c in ray.get(self.index.collections.remote()) if c.startswith(f"{name}__b")]

    def query(self, name: str, text: str, limit: int = 3, **filters: str) -> list[Any]:
        from cluster.index import SearchQuery
        from cluster.types import PayloadFilter

        vector, identity = ray.get(self.embedder.encode_query.remote(text))
        where = PayloadFilter(equals=filters) if filters else None
        search = SearchQuery(scope=name, vector=vector.tolist(), identity=identity, limit=limit, filter=where)
        hits = ray.get(self.index.search.remote(search)).hits
        return list(hits)

    def vectors(self, build: str) -> dict[str, tuple[np.ndarray, str]]:
        """A build's vectors and their providers by embed hash."""
        found: dict[str, tuple[np.ndarray, str]] = {}
        offset = None
        while True:
            rows, offset = ray.get(self.index.reusable_vectors.remote(build, offset, 256))
            for i, hashed in enumerate(rows.embed_hashes):
                found[hashed] = (rows.vectors[i], rows.writers[rows.writer_of[i]][0])
            if offset is None:
                return found


@pytest.fixture(scope="module")
def env(ray_cluster: RayCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    from cluster.settings import SamespaceSettings

    settings = SamespaceSettings(ray={"namespace": NAMESPACE}, store={"data_dir": tmp_path_factory.mktemp("incr-data")})
    try:
        yield Env(settings, tmp_path_factory)
    finally:
        for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
            ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


def function(topic: str, i: int, body: str = "") -> str:
    return (
        f"def {topic}_step_{i}(record, limit={i}):\n"
        f'    """Step {i} of the {topic} pipeline: validate the {topic} record and clamp it."""\n'
        f"    value = record.get('{topic}_{i}', {i}) {body or '* 2'}\n"
        f"    return min(value, limit)\n"
    )


def module(topic: str, functions: int = 3) -> str:
    return "\n\n".join(function(topic, i) for i in range(functions))


def write_repo(root: Path, topics: list[str] = TOPICS[:4]) -> Path:
    root.mkdir(parents=True)
    for topic in topics:
        (root / f"{topic}.py").write_text(module(topic))
    (root / "README.md").write_text("# Shop\n\nThe pipelines of a small shop, one module per topic.\n")
    return root


def embedded(before: dict[str, int], after: dict[str, int]) -> set[str]:
    """The chunks whose text was encoded between two counts of the same texts."""
    return {key for key, n in after.items() if n > before[key]}


def test_an_unchanged_repo_is_up_to_date_embeds_nothing_and_gets_no_new_build(env: Env) -> None:
    """What makes it fast is checked here (nothing embedded, no build); how fast is bench/'s business."""
    repo = write_repo(env.tmp.mktemp("same") / "shop", TOPICS)
    first, _ = env.reindex(repo, "same")
    texts = env.texts(repo)
    counts = env.counts(texts)
    assert min(counts.values()) >= 1 and first.chunks == len(texts)

    second, lines = env.reindex(repo, "same")
    assert f"up to date: {len(texts)} chunks, nothing to embed" in lines
    assert second == first and env.builds("same") == [first.build]  # no build was created
    assert env.counts(texts) == counts  # nothing reached the encoder


def test_an_edited_file_embeds_only_its_changed_chunks_and_search_finds_the_new_text(env: Env) -> None:
    from cluster.index import SearchQuery
    from cluster.index.keywords import query_keywords

    repo = write_repo(env.tmp.mktemp("edit") / "shop")
    first, _ = env.reindex(repo, "edit")
    (repo / "invoice.py").write_text(
        module("invoice").replace(
            "* 2", "* 2\n    value += compute_zebra_surcharge(value)  # the zebra surcharge of overdue invoices", 1
        )
    )
    texts = env.texts(repo)
    before = env.counts(texts)
    second, lines = env.reindex(repo, "edit")
    after = env.counts(texts)
    assert embedded(before, after) == {"invoice.py:invoice_step_0"}  # one changed chunk, nothing else
    assert f"plan: incremental (sources changed): reused {len(after) - 1}, embedding 1; 1 files to embed" in lines
    assert second.build != first.build and env.builds("edit") == [second.build]
    assert second.chunks == len(after)

    top = env.query("edit", "zebra surcharge of overdue invoices")[0]
    assert top.payload["symbol"] == "invoice_step_0" and "compute_zebra_surcharge" in top.payload["text"]
    by_keywords = SearchQuery(scope="edit", limit=3, keywords=query_keywords("compute_zebra_surcharge"))
    hits = ray.get(env.index.search.remote(by_keywords)).hits
    assert hits and hits[0].payload["symbol"] == "invoice_step_0"  # reused rows carry keyword terms too
    by_keywords = SearchQuery(scope="edit", limit=3, keywords=query_keywords("shipment_step_2"))
    keyword_hits = ray.get(env.index.search.remote(by_keywords)).hits
    assert keyword_hits and keyword_hits[0].payload["symbol"] == "shipment_step_2"


def test_a_deleted_file_has_no_points_and_read_code_refuses_it(env: Env) -> None:
    from cluster.errors import ReadRefused

    repo = write_repo(env.tmp.mktemp("delete") / "shop")
    env.reindex(repo, "delete")
    assert env.query("delete", "customer record", path="customer.py")
    before = env.counts(env.texts(repo))
    (repo / "customer.py").unlink()
    record, lines = env.reindex(repo, "delete")
    assert any(line.startswith("plan: incremental") and line.endswith("embedding 0; 1 removed") for line in lines), (
        lines
    )
    assert env.query("delete", "customer record", path="customer.py") == []
    assert record.chunks == len(before) - 3 and record.files == 4
    with pytest.raises(ReadRefused):
        ray.get(env.index.read_lines.remote("delete", "customer.py", 1, 3))
    assert ray.get(env.index.read_lines.remote("delete", "invoice.py", 1, 1)).text.startswith("def invoice_step_0")


def test_a_moved_function_keeps_its_vector_and_provider_at_its_new_lines(env: Env) -> None:
    from cluster.build import collect_chunks
    from cluster.index.catalog import embed_hash

    repo = write_repo(env.tmp.mktemp("move") / "shop")
    first, _ = env.reindex(repo, "move")
    old_vectors = env.vectors(first.build)
    shipment = [function("shipment", i) for i in range(3)]
    (repo / "shipment.py").write_text(
        "\n\n".join([function("shipment", 9, "+ 7"), shipment[2], shipment[0], shipment[1]])
    )
    texts = env.texts(repo)
    before = env.counts(texts)
    second, _ = env.reindex(repo, "move")
    after = env.counts(texts)
    assert embedded(before, after) == {"shipment.py:shipment_step_9"}  # only the new one

    chunks = {c.symbol: c for c in collect_chunks(repo, env.settings)[0]}
    moved = chunks["shipment_step_2"]
    hits = env.query("move", "step 2 of the shipment pipeline", limit=1, path="shipment.py", symbol="shipment_step_2")
    assert (hits[0].payload["start_line"], hits[0].payload["end_line"]) == (moved.start_line, moved.end_line) == (7, 10)
    new_vectors = env.vectors(second.build)
    vector, provider = new_vectors[embed_hash(moved)]
    assert np.array_equal(vector, old_vectors[embed_hash(moved)][0])  # the very vector, reused
    assert provider == old_vectors[embed_hash(moved)][1] == hits[0].payload["provider"] == EMBEDDER
    assert hits[0].payload["build"] == second.build


def test_full_embeds_everything_again(env: Env) -> None:
    repo = write_repo(env.tmp.mktemp("full") / "shop")
    first, _ = env.reindex(repo, "full")
    texts = env.texts(repo)
    before = env.counts(texts)
    second, lines = env.reindex(repo, "full", full=True)
    assert embedded(before, env.counts(texts)) == set(texts)
    assert any(line.startswith("plan: full (--full)") for line in lines)
    assert second.build != first.build and env.builds("full") == [second.build]


def test_queries_during_an_incremental_update_never_fail(env: Env) -> None:
    from cluster.index import SearchQuery

    repo = write_repo(env.tmp.mktemp("live") / "shop", TOPICS)
    old, _ = env.reindex(repo, "live")
    vector, identity = ray.get(env.embedder.encode_query.remote("validate the payment record"))
    search = SearchQuery(scope="live", vector=vector.tolist(), identity=identity, limit=5)
    seen: list[set[str]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def query_loop() -> None:
        while not stop.is_set():
            try:
                answer = ray.get(env.index.search.remote(search))
                hits, refused = answer.hits, answer.refused
                assert hits and not refused
                seen.append({h.payload["build"] for h in hits})
            except BaseException as exc:  # noqa: BLE001  a thread's failure, whatever it is, goes to the assertion below
                errors.append(exc)
            time.sleep(0.01)

    for topic in TOPICS[:3]:
        (repo / f"{topic}.py").write_text(module(topic).replace("* 2", "* 3"))
    for i in range(4):
        (repo / f"extra_{i}.py").write_text(module(f"extra{i}", 4))
    thread = threading.Thread(target=query_loop, daemon=True)
    thread.start()
    try:
        new, lines = env.reindex(repo, "live")
        done = len(seen)
        deadline = time.monotonic() + 20
        while len(seen) < done + 3 and not errors and time.monotonic() < deadline:
            time.sleep(0.02)  # a few queries after the switch
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not errors, errors[:3]
    assert len(seen) >= 10, len(seen)
    assert all(len(builds) == 1 for builds in seen)  # never a mix of old and new rows
    assert {b for builds in seen for b in builds} == {old.build, new.build} and seen[-1] == {new.build}
    assert any(line.startswith("progress: files") and "reused" in line for line in lines), lines


def test_an_index_in_another_encoder_space_is_rebuilt_in_full(env: Env) -> None:
    from cluster.build import collect_repository
    from cluster.index.catalog import embed_hash, point_id, point_payload
    from cluster.types import StoredPoint

    repo = write_repo(env.tmp.mktemp("space") / "shop")
    first, _ = env.reindex(repo, "space")
    vectors = env.vectors(first.build)
    # The same rows, committed under an encoder identity that differs only in its weights.
    other = first.identity.model_copy(update={"weights_sha256": "0" * 64})
    index = env.index
    build = ray.get(index.begin_build.remote("space", other, str(repo.resolve()), None, None))
    found = collect_repository(repo.resolve(), env.settings)
    points = [
        StoredPoint(
            id=point_id("space", c),
            vector=vectors[embed_hash(c)][0].tolist(),
            payload=point_payload("space", c, other, other, "elsewhere", build, file_hash=found.file_hashes[o]),
        )
        for c, o in zip(found.chunks, found.owners, strict=True)
    ]
    ray.get(index.write.remote(build, points))
    ray.get(index.commit_build.remote(build, found.files, ["elsewhere"]))
    texts = env.texts(repo)
    before = env.counts(texts)

    record, lines = env.reindex(repo, "space")
    assert any(line.startswith("plan: full (encoder space changed") for line in lines), lines
    assert embedded(before, env.counts(texts)) == set(texts)
    assert record.identity == first.identity and record.build != build
    assert record.providers == [EMBEDDER]
