"""The incremental reindex plan (pure), the row keys and reusable vectors a build gives back,
and the progress meter's reused count."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cluster.index.catalog import IndexCatalog, PointKey, embed_hash, point_id, point_key, point_payload
from cluster.index.incremental import PlanMode, ReindexPlan, plan_reindex, reusable_rows
from cluster.index.keywords import chunk_keywords
from cluster.index.payload import PAYLOAD_FIELDS
from cluster.index.progress_meter import ProgressMeter
from cluster.index.records import IndexRecord
from cluster.index.representations import name_text
from cluster.index.store.engines import open_vector_store
from cluster.ingest.chunking import chunk_file
from cluster.settings import ChunkingSettings
from cluster.space import EncoderIdentity, embedding_text
from cluster.types import Chunk, StoredPoint, content_hash

WIDTH = 8
IDENTITY = EncoderIdentity(model="m", weights_sha256="a" * 64, width=WIDTH, max_seq_length=256)
ROOT = "/src/repo"

MATH = """import os


def alpha(x):
    return x + 1


def beta(y):
    return y * 2


class Gamma:
    def delta(self):
        return 3
"""
UTIL = """def slugify(text):
    return text.lower().replace(" ", "-")


def shout(text):
    return text.upper() + "!"
"""
V1 = {"pkg/math.py": MATH, "pkg/util.py": UTIL, "README.md": "# Repo\n\nTwo small modules.\n"}


def chunks_of(files: dict[str, str]) -> tuple[list[Chunk], list[PointKey]]:
    chunks: list[Chunk] = []
    keys: list[PointKey] = []
    for path, text in sorted(files.items()):
        for chunk in chunk_file(path, text, ChunkingSettings()):
            chunks.append(chunk)
            keys.append(point_key("repo", chunk, content_hash(text)))
    return chunks, keys


def serving(
    files: dict[str, str], identity: EncoderIdentity = IDENTITY, root: str = ROOT
) -> tuple[IndexRecord, list[PointKey | None]]:
    record = IndexRecord(name="repo", build="repo__b1", repo_root=root, identity=identity, started_at=0.0)
    return record, list(chunks_of(files)[1])


def plan(files: dict[str, str], against: dict[str, str], **kwargs: object) -> tuple[list[Chunk], ReindexPlan]:
    chunks, keys = chunks_of(files)
    record, rows = serving(against)
    options: dict[str, object] = {"serving": record, "serving_keys": rows, "repo_root": ROOT, **kwargs}
    return chunks, plan_reindex(keys, IDENTITY, **options)  # type: ignore[arg-type]


def symbols(chunks: list[Chunk], rows: list[int]) -> set[str | None]:
    return {chunks[i].symbol for i in rows}


def test_an_unchanged_repo_embeds_nothing_and_needs_no_build() -> None:
    chunks, result = plan(V1, V1)
    assert result.mode is PlanMode.UP_TO_DATE
    assert result.embed == [] and sorted(result.reuse) == list(range(len(chunks)))
    assert result.removed_files == [] and result.dropped_rows == 0


def test_an_edited_file_embeds_only_its_changed_chunks() -> None:
    edited = {**V1, "pkg/math.py": MATH.replace("return y * 2", "return y * 3  # tripled")}
    chunks, result = plan(edited, V1)
    assert result.mode is PlanMode.INCREMENTAL
    assert symbols(chunks, result.embed) == {"beta"} and len(result.embed) == 1
    assert result.changed_files == ["pkg/math.py"]
    assert len(result.reuse) == len(chunks) - 1  # alpha, Gamma, the import line, util.py and README
    assert "reused 6, embedding 1" in result.line()


def test_a_moved_function_keeps_its_vector_and_the_new_one_is_embedded() -> None:
    moved = {**V1, "pkg/util.py": "def added(n):\n    return n\n\n\n" + UTIL}  # slugify and shout move down 4 lines
    chunks, result = plan(moved, V1)
    assert result.mode is PlanMode.INCREMENTAL
    assert symbols(chunks, result.embed) == {"added"}
    reused = {chunks[i].symbol: chunks[i] for i in result.reuse}
    assert reused["slugify"].start_line == 5 and reused["shout"].start_line == 9  # new lines, old vectors
    assert result.dropped_rows == 2  # the rows at the old lines are not carried over


def test_reordered_functions_are_all_reused_and_rewritten_at_their_new_lines() -> None:
    swapped = {
        **V1,
        "pkg/util.py": 'def shout(text):\n    return text.upper() + "!"\n\n\n'
        'def slugify(text):\n    return text.lower().replace(" ", "-")\n',
    }
    chunks, result = plan(swapped, V1)
    assert result.mode is PlanMode.INCREMENTAL and result.embed == []
    assert sorted(result.reuse) == list(range(len(chunks)))


def test_a_deleted_file_is_gone_and_nothing_is_embedded() -> None:
    smaller = {k: v for k, v in V1.items() if k != "pkg/util.py"}
    chunks, result = plan(smaller, V1)
    assert result.mode is PlanMode.INCREMENTAL and result.embed == []
    assert result.removed_files == ["pkg/util.py"] and result.dropped_rows == 2
    assert result.reuse and all(chunks[i].path != "pkg/util.py" for i in result.reuse)


def test_a_new_file_is_embedded_and_the_rest_reused() -> None:
    bigger = {**V1, "pkg/new.py": "def fresh():\n    return 'new'\n"}
    chunks, result = plan(bigger, V1)
    assert result.mode is PlanMode.INCREMENTAL and symbols(chunks, result.embed) == {"fresh"}
    assert result.changed_files == ["pkg/new.py"] and result.dropped_rows == 0


def test_a_rename_of_the_file_changes_what_is_embedded() -> None:
    renamed = {("pkg/text.py" if k == "pkg/util.py" else k): v for k, v in V1.items()}
    chunks, result = plan(renamed, V1)  # the path is part of the embedded text (chunk text v2 header)
    assert symbols(chunks, result.embed) == {"slugify", "shout"}
    assert result.removed_files == ["pkg/util.py"]


def test_an_identity_change_embeds_everything() -> None:
    chunks, keys = chunks_of(V1)
    for other in [
        IDENTITY.model_copy(update={"weights_sha256": "b" * 64}),
        IDENTITY.model_copy(update={"chunk_text_version": 1}),
        IDENTITY.model_copy(update={"max_seq_length": 128}),
    ]:
        record, rows = serving(V1, identity=other)
        result = plan_reindex(keys, IDENTITY, serving=record, serving_keys=rows, repo_root=ROOT)
        assert result.mode is PlanMode.FULL and "encoder space changed" in result.reason
        assert result.embed == list(range(len(chunks))) and result.reuse == []


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"full": True}, "--full"),
        ({"reference_drifted": True}, "drifted"),
        ({"serving": None, "serving_keys": None}, "no serving index"),
        ({"serving_keys": None}, "not read"),
    ],
)
def test_full_plans(options: dict[str, object], reason: str) -> None:
    chunks, result = plan(V1, V1, **options)
    assert result.mode is PlanMode.FULL and reason in result.reason
    assert result.embed == list(range(len(chunks))) and result.reuse == []


def test_a_moved_repo_root_rewrites_the_rows_without_embedding() -> None:
    _, keys = chunks_of(V1)
    record, rows = serving(V1, root="/elsewhere/repo")
    result = plan_reindex(keys, IDENTITY, serving=record, serving_keys=rows, repo_root=ROOT)
    assert result.mode is PlanMode.INCREMENTAL and result.embed == [] and "repo root" in result.reason


def test_rows_of_an_older_payload_version_are_reused_but_rewritten() -> None:
    chunks, keys = chunks_of(V1)
    record, rows = serving(V1)
    older = [row.model_copy(update={"complete": False}) for row in rows if row is not None]
    result = plan_reindex(keys, IDENTITY, serving=record, serving_keys=older, repo_root=ROOT)
    assert result.mode is PlanMode.INCREMENTAL and result.embed == [] and len(result.reuse) == len(chunks)
    unreadable = plan_reindex(keys, IDENTITY, serving=record, serving_keys=[*rows[:-1], None], repo_root=ROOT)
    assert unreadable.mode is PlanMode.INCREMENTAL and unreadable.dropped_rows == 1


def test_a_whitespace_only_change_outside_chunks_rewrites_file_hashes_only() -> None:
    spaced = {**V1, "pkg/math.py": MATH + "\n\n"}
    _, result = plan(spaced, V1)
    assert result.mode is PlanMode.INCREMENTAL and result.embed == [] and result.dropped_rows == 0


# --- payloads, row keys and reusable vectors of a real (embedded) store ------------------------


def test_the_payload_carries_what_was_embedded_and_the_file_it_came_from() -> None:
    chunks, _ = chunks_of(V1)
    chunk = next(c for c in chunks if c.symbol == "alpha")
    payload = point_payload("repo", chunk, IDENTITY, IDENTITY, "p0", "repo__b1", file_hash="f" * 64)
    assert set(payload) == PAYLOAD_FIELDS
    assert payload["defines"] == ["alpha"]  # what the definition leg of search filters on
    assert payload["embed_hash"] == content_hash(embedding_text(chunk) + "\0" + name_text(chunk)) == embed_hash(chunk)
    assert payload["file_hash"] == "f" * 64
    assert PointKey.from_payload(point_id("repo", chunk), payload) == point_key("repo", chunk, "f" * 64)


@pytest.mark.parametrize("engine", ["embedded", "server"])
def test_a_catalog_gives_back_row_keys_and_vectors_by_embed_hash(tmp_path: Path, engine: str) -> None:
    store = open_vector_store(engine, data_dir=tmp_path, url=f"path:{tmp_path / 'qdrant'}")
    catalog = IndexCatalog(store, clock=lambda: 1.7e9)
    chunks, keys = chunks_of(V1)
    build = catalog.begin_build("repo", IDENTITY, ROOT)
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(len(chunks), WIDTH)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    names = np.roll(vectors, 1, axis=0)  # another unit vector per row
    cloud = IDENTITY.model_copy(update={"model": "cloud/m"})
    points = []
    for i, chunk in enumerate(chunks):
        payload = point_payload(
            "repo", chunk, IDENTITY, cloud if i % 2 else IDENTITY, f"p{i % 2}", build, file_hash=keys[i].file_hash
        )
        if i == 0:  # a row written before embed hashes and file hashes existed
            payload = {k: v for k, v in payload.items() if k not in ("embed_hash", "file_hash")}
        points.append(
            StoredPoint(
                id=point_id("repo", chunk),
                vector=vectors[i].tolist(),
                name_vector=names[i].tolist(),
                payload=payload,
                sparse=chunk_keywords(chunk.text, chunk.path, chunk.symbol),
            )
        )
    catalog.write(build, points)
    catalog.commit_build(build, files=3, providers=["p0", "p1"])

    got: list[PointKey | None] = []
    offset: str | None = None
    while True:
        page, offset = catalog.point_keys(build, offset, limit=3)
        got.extend(page)
        if offset is None:
            break
    by_id = {k.id: k for k in got if k is not None}
    assert len(by_id) == len(chunks)
    legacy = by_id[keys[0].id]  # its embed hash is recomputed from its text; it is not complete
    assert legacy.embed_hash == keys[0].embed_hash and not legacy.complete and legacy.file_hash is None
    assert all(by_id[k.id] == k for k in keys[1:])

    found: dict[str, tuple[np.ndarray, np.ndarray, str, dict[str, object]]] = {}
    offset = None
    while True:
        page, offset = catalog.points_page(build, offset, limit=4)
        rows = reusable_rows(page)
        assert rows.vectors.dtype == np.float32 and rows.vectors.shape == (len(rows.embed_hashes), WIDTH)
        assert rows.name_vectors.shape == rows.vectors.shape
        for j, hashed in enumerate(rows.embed_hashes):
            provider, writer = rows.writers[rows.writer_of[j]]
            found[hashed] = (rows.vectors[j], rows.name_vectors[j], provider, writer)
        if offset is None:
            break
    assert set(found) == {k.embed_hash for k in keys}
    for i, key in enumerate(keys):
        vector, name_vector, provider, writer = found[key.embed_hash]
        assert np.allclose(vector, vectors[i], atol=1e-6) and np.allclose(name_vector, names[i], atol=1e-6)
        assert provider == f"p{i % 2}" and writer == (cloud if i % 2 else IDENTITY).model_dump()


def test_the_meter_counts_reused_chunks_as_done_but_not_in_the_rate() -> None:
    now = [100.0]
    meter = ProgressMeter(files_total=4, chunks_total=100, clock=lambda: now[0])
    meter.advance(reused=60, files=2)
    now[0] += 10
    meter.advance(chunks=20, files=1)
    snap = meter.snapshot()
    assert (snap.chunks_done, snap.chunks_per_s, snap.eta_s) == (80, 2.0, 10.0)
    assert meter.line() == "progress: files 3/4 chunks 80/100 (reused 60) (80.0%) 2.0 chunks/s ETA 10s"
    meter.advance(reused=20, files=1)
    assert meter.line().endswith("ETA 0s")
