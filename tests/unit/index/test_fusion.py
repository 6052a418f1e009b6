"""Hybrid scoring (cluster.index.fusion): the weighted sum, keyword scores normalised over the whole
search, one hit per place across indexes, and scores comparable between indexes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from cluster.index.catalog import IndexCatalog, point_id, point_payload
from cluster.index.fusion import ALSO_IN, fuse_candidates
from cluster.index.keywords import chunk_keywords, query_keywords
from cluster.index.payload import GRAPH_FACT_FIELDS
from cluster.index.query import SearchQuery
from cluster.index.store.engines import open_vector_store
from cluster.index.store.protocol import VectorStore
from cluster.space import EncoderIdentity
from cluster.types import CandidateHit, Chunk, FusionParams, StoredPoint

WIDTH = 8
IDENTITY = EncoderIdentity(model="m", weights_sha256="b" * 64, width=WIDTH, max_seq_length=256)
PARAMS = FusionParams(dense_weight=1.0, name_weight=0.5, keyword_weight=0.25, definition_weight=1.0)


def candidate(
    repo: str,
    path: str,
    dense: float | None,
    name: float | None = None,
    keyword: float = 0.0,
    *,
    definition: bool = False,
    line: int = 1,
) -> CandidateHit:
    payload = {"repo": repo, "path": path, "start_line": line, "end_line": line + 2, "content_hash": f"h-{path}"}
    return CandidateHit(
        id=f"{repo}:{path}:{line}", payload=payload, dense=dense, name=name, keyword=keyword, definition=definition
    )


def test_the_score_is_the_weighted_sum_with_keywords_divided_by_the_best_of_the_search() -> None:
    found = [candidate("r", "a.py", 0.5, 0.2, 4.0), candidate("r", "b.py", 0.6, 0.1, 1.0), candidate("r", "c.py", 0.3)]
    hits = fuse_candidates(found, PARAMS, 10)
    scores = {h.payload["path"]: h.score for h in hits}
    assert scores["a.py"] == pytest.approx(0.5 + 0.5 * 0.2 + 0.25 * 4.0 / 4.0)
    assert scores["b.py"] == pytest.approx(0.6 + 0.5 * 0.1 + 0.25 * 1.0 / 4.0)
    assert scores["c.py"] == pytest.approx(0.3)
    assert [h.payload["path"] for h in hits] == ["a.py", "b.py", "c.py"]
    assert [h.payload["path"] for h in fuse_candidates(found, PARAMS, 2)] == ["a.py", "b.py"]


def test_keyword_only_candidates_rank_by_keyword_score_and_a_definition_goes_first() -> None:
    found = [candidate("r", "a.py", None, None, 2.0), candidate("r", "b.py", None, None, 5.0)]
    assert [h.payload["path"] for h in fuse_candidates(found, PARAMS, 5)] == ["b.py", "a.py"]
    found.append(candidate("r", "c.py", None, None, 0.5, definition=True))
    assert fuse_candidates(found, PARAMS, 5)[0].payload["path"] == "c.py"


def test_the_same_place_in_two_indexes_is_returned_once_naming_the_other() -> None:
    found = [candidate("fork", "a.py", 0.8), candidate("main", "a.py", 0.9), candidate("main", "b.py", 0.85)]
    hits = fuse_candidates(found, PARAMS, 10)
    assert [(h.payload["repo"], h.payload["path"]) for h in hits] == [("main", "a.py"), ("main", "b.py")]
    assert hits[0].payload[ALSO_IN] == ["fork"] and ALSO_IN not in hits[1].payload
    moved = candidate("fork", "a.py", 0.95, line=40)  # same file, other lines: another place
    assert len(fuse_candidates([*found, moved], PARAMS, 10)) == 3


def test_equal_scores_order_by_repo_then_path() -> None:
    found = [candidate("b", "x.py", 0.5, line=7), candidate("a", "y.py", 0.5), candidate("a", "x.py", 0.5)]
    assert [(h.payload["repo"], h.payload["path"]) for h in fuse_candidates(found, PARAMS, 5)] == [
        ("a", "x.py"),
        ("a", "y.py"),
        ("b", "x.py"),
    ]


# --- through the catalog: several indexes on a real store ------------------------------------------

DOCS = [
    ("src/config.py", "parse_config", "def parse_config(path):\n    return load_yaml(path)"),
    ("src/http.py", "fetch", "def fetch(url):\n    return client.get(url, timeout=5)"),
    ("src/retry.py", "retry", "def retry(call, attempts):\n    for _ in range(attempts): call()"),
]


def _index(catalog: IndexCatalog, repo: str, docs: list[tuple[str, str, str]], seed: int, pooled: bool = False) -> None:
    """A committed index of `docs`; `pooled`: its rows in the store's shared pool, as a small build's are."""
    rng = np.random.default_rng(seed)
    build = catalog.begin_build(repo, IDENTITY, f"/{repo}", rows=len(docs) if pooled else None)
    rows = []
    for path, symbol, text in docs:
        chunk = Chunk(path=path, start_line=1, end_line=2, language="python", kind="function", symbol=symbol, text=text)
        code, name = rng.normal(size=(2, WIDTH))
        rows.append(
            StoredPoint(
                id=point_id(repo, chunk),
                vector=(code / np.linalg.norm(code)).tolist(),
                name_vector=(name / np.linalg.norm(name)).tolist(),
                payload=point_payload(repo, chunk, IDENTITY, IDENTITY, "p0", build),
                sparse=chunk_keywords(chunk.text, chunk.path, chunk.symbol),
            )
        )
    catalog.write(build, rows)
    catalog.commit_build(build, files=len(docs), providers=["p0"])


@pytest.fixture
def catalog(tmp_path: Path) -> IndexCatalog:
    return IndexCatalog(open_vector_store("embedded", data_dir=tmp_path, url=None), clock=lambda: 1.7e9)


@pytest.mark.parametrize("pooled", [False, True], ids=["own", "pooled"])
def test_a_search_over_two_indexes_of_the_same_code_returns_each_place_once(
    catalog: IndexCatalog, pooled: bool
) -> None:
    _index(catalog, "main", DOCS, seed=1, pooled=pooled)
    _index(catalog, "mirror", DOCS, seed=1, pooled=pooled)  # the same code, the same vectors
    query = np.random.default_rng(9).normal(size=WIDTH).tolist()
    search = SearchQuery(vector=query, identity=IDENTITY, limit=10, keywords=query_keywords("parse config"))
    hits, refused = catalog.search_all(search)
    assert not refused
    assert sorted(h.payload["path"] for h in hits) == sorted(path for path, _, _ in DOCS)
    assert all(h.payload["repo"] == "main" and h.payload[ALSO_IN] == ["mirror"] for h in hits)
    one = catalog.search("mirror", search)
    assert [h.score for h in one] == pytest.approx([h.score for h in hits])  # the same scores, either index


def test_scores_of_separate_indexes_are_comparable(tmp_path: Path) -> None:
    store = open_vector_store("embedded", data_dir=tmp_path, url=None)
    catalog = IndexCatalog(store, clock=lambda: 1.7e9)
    caller = ("src/app.py", "main", "def main():\n    settings = parse_config('app.yaml')\n    run(settings)")
    _index(catalog, "defines", DOCS[:1], seed=2)  # one chunk, defining parse_config
    _index(catalog, "calls", [caller, *DOCS[1:]], seed=3)  # three chunks, one calling it
    query = np.random.default_rng(4).normal(size=WIDTH).tolist()
    search = SearchQuery(vector=query, identity=IDENTITY, limit=10, keywords=query_keywords("parse_config"))
    candidates = {name: store.query(catalog.record(name).build, search) for name in ("defines", "calls")}
    raw = {name: {c.payload["path"]: c.keyword for c in found} for name, found in candidates.items()}
    # Raw BM25 is not comparable across collections: IDF is per collection, and the mere caller in
    # the larger index outscores the definition.
    assert raw["calls"]["src/app.py"] > raw["defines"]["src/config.py"] > 0
    merged = {h.payload["path"]: h.score for h in catalog.search_all(search)[0]}
    alone = {h.payload["path"]: h.score for name in ("defines", "calls") for h in catalog.search(name, search)}
    assert merged == pytest.approx(alone)  # each hit scores as in its own index, whatever else is searched
    keyword_only = FusionParams(dense_weight=0.0, name_weight=0.0, keyword_weight=1.0)
    fused = {
        h.payload["path"]: h.score
        for h in fuse_candidates([*candidates["defines"], *candidates["calls"]], keyword_only, 10)
    }
    assert fused["src/config.py"] == pytest.approx(1.0) and fused["src/app.py"] == pytest.approx(1.0)
    assert fused["src/http.py"] == 0.0


class _CountingStore:
    """The real store, counting the payloads a search reads."""

    def __init__(self, store: VectorStore) -> None:
        self.store, self.read = store, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def payloads(
        self, collection: str, ids: Sequence[str], *, leave_out: Sequence[str] = ()
    ) -> dict[str, dict[str, Any]]:
        self.read += len(ids)
        return self.store.payloads(collection, ids, leave_out=leave_out)


def test_only_the_payloads_of_the_places_kept_are_read_and_a_place_in_two_indexes_is_one_hit(tmp_path: Path) -> None:
    counting = _CountingStore(open_vector_store("embedded", data_dir=tmp_path, url=None))
    catalog = IndexCatalog(cast(VectorStore, counting), clock=lambda: 1.7e9)
    many = [(f"src/m{i}.py", f"f{i}", f"def f{i}(config):\n    return parse(config, {i})") for i in range(30)]
    _index(catalog, "main", many, seed=5)
    _index(catalog, "mirror", many[:3], seed=5)  # the first three places again, the same vectors
    query = np.random.default_rng(6).normal(size=WIDTH).tolist()
    search = SearchQuery(vector=query, identity=IDENTITY, limit=2, keywords=query_keywords("parse config"))

    one, _ = catalog.search_all(search, ["main"])
    assert len(one) == 2 and counting.read == 2  # of ~30 candidates, the two kept
    assert all(hit.payload["text"].startswith("def f") and "\0read" not in hit.payload for hit in one)
    assert all(not set(GRAPH_FACT_FIELDS) & set(hit.payload) for hit in one)  # navigation's, not a hit's
    stored = counting.store.payloads(one[0].payload["build"], [one[0].id])[one[0].id]
    assert stored["defines"] == [one[0].payload["symbol"]]  # the row holds them
    both, _ = catalog.search_all(search)
    assert [h.payload["path"] for h in both] == [h.payload["path"] for h in one]  # each place once
    mirrored = {path for path, _, _ in many[:3]}
    assert all((h.payload.get(ALSO_IN) == ["mirror"]) == (h.payload["path"] in mirrored) for h in both)
