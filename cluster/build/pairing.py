"""Embed: the order a build's texts go to the encoders, and the pairing of each chunk's two vectors.

Every chunk has two texts, its code under a header (`embedding_text`) and its name text
(`name_text`), and a row is written once both vectors landed. Similar lengths go side by side (a
batch pads to its longest text, so mixing wastes compute), longest first (the early rate is the
pessimistic one, so the ETA only improves). Per block of rows the code texts go first, then the
short name texts, so a batch rarely pads a name to a code text's length and a row lands a block
after it starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from cluster.index import name_text
from cluster.routing import LandedBatch
from cluster.space import EncoderIdentity, embedding_text
from cluster.types import Chunk

EMBED_BLOCK = 256  # rows whose code texts, then name texts, go to the encoders side by side


class Half(IntEnum):
    """Which of a chunk's two texts a slot sends."""

    CODE = 0
    NAME = 1


Slot = tuple[int, Half]  # per text sent: (chunk row, which text)


def embedding_slots(chunks: Sequence[Chunk], rows: Sequence[int]) -> list[Slot]:
    """The texts of `rows` in the order they go to the encoders (see the module's docstring)."""
    order = sorted(rows, key=lambda i: len(chunks[i].text), reverse=True)
    slots: list[Slot] = []
    for start in range(0, len(order), EMBED_BLOCK):
        block = order[start : start + EMBED_BLOCK]
        slots += [(row, Half.CODE) for row in block] + [(row, Half.NAME) for row in block]
    return slots


def slot_texts(chunks: Sequence[Chunk], slots: Sequence[Slot]) -> list[str]:
    """The text each slot sends."""
    return [embedding_text(chunks[row]) if half is Half.CODE else name_text(chunks[row]) for row, half in slots]


@dataclass(frozen=True)
class PairedRow:
    """A chunk whose two vectors have landed; the code vector's provider and encoder wrote the row."""

    row: int
    vectors: tuple[np.ndarray, np.ndarray]  # (code, name)
    writer: EncoderIdentity
    provider: str


class VectorPairs:
    """Pairs each chunk's code and name vectors as batches land, in any order and from any provider."""

    def __init__(self, slots: Sequence[Slot], reference: EncoderIdentity) -> None:
        self._slots = slots
        self._reference = reference
        self._code: dict[int, tuple[np.ndarray, EncoderIdentity, str]] = {}
        self._name: dict[int, np.ndarray] = {}

    @property
    def waiting(self) -> int:
        """Rows with one vector landed and the other still out."""
        return len(self._code) + len(self._name)

    def land(self, batch: LandedBatch) -> list[PairedRow]:
        """The rows this batch completes, in the batch's order."""
        writer = batch.identity or self._reference
        done: list[PairedRow] = []
        for i, vector in zip(batch.indices, batch.vectors, strict=True):
            row, half = self._slots[i]
            if half is Half.CODE:
                self._code[row] = (vector, writer, batch.provider)
            else:
                self._name[row] = vector
            if row in self._code and row in self._name:
                code, code_writer, provider = self._code.pop(row)
                done.append(PairedRow(row, (code, self._name.pop(row)), code_writer, provider))
        return done
