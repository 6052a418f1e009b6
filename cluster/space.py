"""The encoder space an index lives in, and the query-time guard (SPEC §10).

An index records the identity of the encoder that built it; a query vector is accepted only
when it was produced by an encoder with the same identity. The text that is embedded for a
chunk is part of the space too (CHUNK_TEXT_VERSION): changing it changes every vector.
"""

from __future__ import annotations

import hashlib

from pydantic import Field

from cluster.errors import EncoderMismatch
from cluster.types import Chunk, Strict

CHUNK_TEXT_VERSION = 1


class EncoderIdentity(Strict):
    """What makes two encoders interchangeable: same weights, width, normalisation, chunk text."""

    model: str = Field(description="Configured model name or path.")
    weights_sha256: str = Field(description="sha256 over the model's weight files.")
    width: int = Field(ge=1)
    normalized: bool = True
    max_seq_length: int = Field(ge=1, description="Token cap: a different cap is a different space.")
    chunk_text_version: int = CHUNK_TEXT_VERSION

    @property
    def space_id(self) -> str:
        """A short, stable name of the space, e.g. 'all-MiniLM-L6-v2@1a2b3c4d/384'."""
        digest = hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:12]
        name = self.model.rstrip("/").rsplit("/", 1)[-1] or self.model
        return f"{name}@{digest}/{self.width}"


def embedding_text(chunk: Chunk) -> str:
    """The text embedded for a chunk (version CHUNK_TEXT_VERSION): what it is, which file, the code.

    No line numbers: a span that only moved keeps its vector.
    """
    symbol = f" {chunk.symbol}" if chunk.symbol else ""
    return f"{chunk.language} {chunk.kind}{symbol} — {chunk.path}\n{chunk.text}"


def require_same_space(index: str, index_identity: EncoderIdentity, query_identity: EncoderIdentity) -> None:
    """Refuse a query vector that was not produced in the index's encoder space."""
    if index_identity != query_identity:
        raise EncoderMismatch(index, index_identity.space_id, query_identity.space_id)
