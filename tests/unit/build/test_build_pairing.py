"""The order a build's texts go to the encoders, and each chunk's two vectors paired as they land."""

from __future__ import annotations

import numpy as np

from cluster.build.pairing import EMBED_BLOCK, Half, VectorPairs, embedding_slots, slot_texts
from cluster.index import name_text
from cluster.routing import LandedBatch
from cluster.space import embedding_text
from cluster.types import Chunk
from tests.support.fakes.build_ports import IDENTITY

OTHER = IDENTITY.model_copy(update={"model": "cloud-m"})


def chunk(i: int, lines: int) -> Chunk:
    text = f"def f{i}():\n" + "    x = 1\n" * lines
    return Chunk(
        path="a.py", start_line=1, end_line=lines + 1, language="python", symbol=f"f{i}", kind="function", text=text
    )


def test_texts_go_longest_first_a_block_of_code_texts_then_its_name_texts() -> None:
    chunks = [chunk(i, lines=i % 7) for i in range(EMBED_BLOCK + 10)]
    rows = list(range(len(chunks)))
    slots = embedding_slots(chunks, rows)
    assert len(slots) == 2 * len(rows)
    first = slots[: 2 * EMBED_BLOCK]
    assert [half for _, half in first] == [Half.CODE] * EMBED_BLOCK + [Half.NAME] * EMBED_BLOCK
    assert [row for row, _ in first[:EMBED_BLOCK]] == [row for row, _ in first[EMBED_BLOCK:]]
    lengths = [len(chunks[row].text) for row, half in slots if half is Half.CODE]
    assert lengths == sorted(lengths, reverse=True)
    assert {row for row, _ in slots[2 * EMBED_BLOCK :]} == set(rows) - {row for row, _ in first}
    texts = slot_texts(chunks, slots[:1] + slots[EMBED_BLOCK : EMBED_BLOCK + 1])
    assert texts == [embedding_text(chunks[slots[0][0]]), name_text(chunks[slots[0][0]])]
    assert embedding_slots(chunks, []) == []


def test_a_row_is_done_once_both_vectors_landed_and_the_code_vector_names_its_writer() -> None:
    slots = [(7, Half.CODE), (8, Half.CODE), (7, Half.NAME), (8, Half.NAME)]
    pairs = VectorPairs(slots, IDENTITY)
    vectors = np.eye(4, dtype=np.float32)

    assert pairs.land(LandedBatch([2, 1], vectors[[2, 1]], "cloud", OTHER)) == []  # name of 7, code of 8
    assert pairs.waiting == 2
    done = pairs.land(LandedBatch([0, 3], vectors[[0, 3]], "local", None))  # code of 7, name of 8
    assert [(d.row, d.provider, d.writer) for d in done] == [(7, "local", IDENTITY), (8, "cloud", OTHER)]
    assert np.array_equal(done[0].vectors[0], vectors[0]) and np.array_equal(done[0].vectors[1], vectors[2])
    assert np.array_equal(done[1].vectors[0], vectors[1]) and np.array_equal(done[1].vectors[1], vectors[3])
    assert pairs.waiting == 0
