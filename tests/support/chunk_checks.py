"""What the chunking tests check chunks with: the default settings, each chunk's span, kind and symbol,
and that a chunk's text is exactly its lines of the source."""

from __future__ import annotations

from cluster.settings import ChunkingSettings
from cluster.types import Chunk

SETTINGS = ChunkingSettings()


def spans(chunks: list[Chunk]) -> list[tuple[int, int, str, str | None]]:
    return [(c.start_line, c.end_line, c.kind, c.symbol) for c in chunks]


def assert_exact_text(chunks: list[Chunk], source: str) -> None:
    lines = source.split("\n")
    for chunk in chunks:
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
        assert chunk.text.strip()
