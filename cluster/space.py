"""The encoder space an index lives in, and the query-time guard (DESIGN §10).

An index records the identity of the encoder that built it; a query vector is accepted only
when it was produced by an encoder with the same identity. The text that is embedded for a
chunk is part of the space too (CHUNK_TEXT_VERSION): changing it changes every vector.
"""

from __future__ import annotations

import hashlib

from pydantic import Field

from cluster.errors import EncoderMismatch
from cluster.types import Chunk, Strict

CHUNK_TEXT_VERSION = 3  # 2: a header (path, owner, kind, signature); 3: a second, name vector per chunk
# (cluster.index.representations.name_text) beside the code vector
SIGNATURE_MAX_CHARS = 200


class EncoderIdentity(Strict):
    """What makes two encoders interchangeable: same weights, width, normalisation, chunk text."""

    model: str = Field(description="Configured model name or path.")
    weights_sha256: str = Field(description="sha256 over the model's weight files.")
    width: int = Field(ge=1)
    normalized: bool = True
    max_seq_length: int = Field(ge=1, description="Token cap: a different cap is a different space.")
    chunk_text_version: int = CHUNK_TEXT_VERSION
    precision: str = Field(default="fp32", description="Arithmetic of the encoder (fp32, bf16, int8).")

    @property
    def model_label(self) -> str:
        """The model as the gate keys its verdicts: another precision is another check."""
        return self.model if self.precision == "fp32" else f"{self.model} ({self.precision})"

    @property
    def space_id(self) -> str:
        """A short, stable name of the space, e.g. 'all-MiniLM-L6-v2@1a2b3c4d/384'."""
        digest = hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:12]
        name = self.model.rstrip("/").rsplit("/", 1)[-1] or self.model
        return f"{name}@{digest}/{self.width}"


def embedding_text(chunk: Chunk) -> str:
    """The text embedded for a chunk (version CHUNK_TEXT_VERSION), the same for every encoder:
    a short header of what a reader sees around the code — its file, the class it sits in, its
    kind and name, its signature — then the code. No line numbers: a span that only moved keeps
    its vector (and is reused by an incremental reindex)."""
    header = [f"file: {chunk.path}"]
    name = chunk.symbol
    if chunk.symbol and "." in chunk.symbol and chunk.kind != "section":
        owner, name = chunk.symbol.rsplit(".", 1)
        header.append(f"in: {owner}")
    header.append(f"{chunk.language} {chunk.kind}" + (f": {name}" if name else ""))
    signature = signature_line(chunk.text, name)
    if signature:
        header.append(f"signature: {signature}")
    return "\n".join(header) + "\n\n" + chunk.text


def signature_line(text: str, name: str | None) -> str | None:
    """The line that declares `name` (a def/func/fn/class line), skipping decorators and comments."""
    if not name:
        return None
    for line in text.splitlines()[:12]:
        stripped = line.strip()
        if not stripped or stripped.startswith(("@", "#", "//", "/*", "*", "///")):
            continue
        return stripped[:SIGNATURE_MAX_CHARS] if name in stripped else None
    return None


def require_same_space(index: str, index_identity: EncoderIdentity, query_identity: EncoderIdentity) -> None:
    """Refuse a query vector that was not produced in the index's encoder space."""
    if index_identity != query_identity:
        raise EncoderMismatch(index, index_identity.space_id, query_identity.space_id)
