"""The lever sweep of bench.quality_levers: its BM25 is the store's, and it refuses the test packages."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from bench.quality_corpus import TEST_PACKAGES, Query
from bench.quality_levers import bm25_scores, main
from cluster.index.keywords import chunk_keywords, query_keywords
from cluster.index.query import SearchQuery
from cluster.index.store.engines import open_vector_store
from cluster.types import Chunk, StoredPoint

SOURCES = [
    ("src/config.py", "parse_config", "def parse_config(path):\n    return load_yaml(path)"),
    ("src/app.py", "main", "def main():\n    settings = parse_config('app.yaml')\n    run(settings)"),
    ("src/http.py", "fetch", "def fetch(url):\n    return client.get(url, timeout=5)"),
    ("src/retry.py", "retry", "def retry(call, attempts):\n    for _ in range(attempts): call()"),
]
QUESTIONS = ["parse the config file", "retry a call several times", "fetch a url with a timeout"]


def test_the_sweeps_bm25_is_the_stores_keyword_score(tmp_path: Path) -> None:
    chunks = [
        Chunk(path=path, start_line=1, end_line=2, language="python", kind="function", symbol=symbol, text=text)
        for path, symbol, text in SOURCES
    ]
    queries = [Query(query=q, path="x.py", symbol="x", start_line=1, end_line=1) for q in QUESTIONS]
    store = open_vector_store("embedded", data_dir=tmp_path, url=None)
    store.create_collection("c", 4, ["path"])
    store.upsert(
        "c",
        [
            StoredPoint(
                id=str(uuid.uuid4()),
                vector=[1.0, 0.0, 0.0, 0.0],
                payload={"path": c.path},
                sparse=chunk_keywords(c.text, c.path, c.symbol),
            )
            for c in chunks
        ],
    )
    swept = bm25_scores(chunks, queries)
    assert swept.shape == (len(QUESTIONS), len(SOURCES))
    for i, question in enumerate(QUESTIONS):
        stored = {
            h.payload["path"]: h.keyword
            for h in store.query("c", SearchQuery(keywords=query_keywords(question), limit=10))
        }
        expected = {c.path: float(swept[i, j]) for j, c in enumerate(chunks) if swept[i, j] > 0}
        assert stored.keys() == expected.keys() and stored
        for path, score in expected.items():
            assert stored[path] == pytest.approx(score, rel=1e-3)
    assert int(np.argmax(swept[0])) == 0 and int(np.argmax(swept[1])) == 3


def test_the_sweep_refuses_the_held_out_packages() -> None:
    with pytest.raises(SystemExit):
        main(["--packages", TEST_PACKAGES[0]])
