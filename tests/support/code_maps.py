"""What the code-map tests build maps from: payloads of chunked files (the polyglot fixture repo, a small
tax module and a README) and hand-made rows with a chosen path, lines, symbol and kind."""

from __future__ import annotations

from typing import Any

from cluster.index.catalog import point_payload
from cluster.ingest.chunking import chunk_file
from cluster.search.models import SymbolHit
from cluster.settings import ChunkingSettings
from cluster.space import EncoderIdentity
from cluster.types import Chunk
from tests.support.ray_cluster import FIXTURES

POLYGLOT = FIXTURES / "polyglot"
SETTINGS = ChunkingSettings()
SMALL_WINDOWS = ChunkingSettings(window_lines=8, overlap_lines=2)
WIDTH = 8
IDENTITY = EncoderIdentity(model="m", weights_sha256="a" * 64, width=WIDTH, max_seq_length=256)

TAX_SOURCE = '''"""Tax tables."""


class TaxTable:
    """Rates by bracket."""

    RATE = 3

    def __init__(self, rows):
        self.rows = rows

    def lookup(self, income):
        for row in self.rows:
            if row.low <= income < row.high:
                return row.rate
        return None

    TRAILER = 1


def long_function(a, b):
    x = a
    x += 1
    x += 2
    x += 3
    x += 4
    x += 5
    x += 6
    x += 7
    x += 8
    x += 9
    x += 10
    x += 11
    x += 12
    return x + b


def parse_config(path):
    return TaxTable(path).lookup(3)
'''

README = """# Demo project

A tiny repository for tests.


## Usage

Call `parse_config` with a path.
"""


def payload(chunk: Chunk, repo: str = "demo", build: str = "demo__b1") -> dict[str, Any]:
    return point_payload(repo, chunk, IDENTITY, IDENTITY, "p0", build)


def payloads_of(
    files: dict[str, str], settings: ChunkingSettings = SETTINGS, repo: str = "demo"
) -> list[dict[str, Any]]:
    return [payload(c, repo) for path, text in files.items() for c in chunk_file(path, text, settings)]


def polyglot_files() -> dict[str, str]:
    return {
        f.relative_to(POLYGLOT).as_posix(): f.read_text(encoding="utf-8")
        for f in sorted(POLYGLOT.rglob("*"))
        if f.is_file() and f.name != ".gitignore"
    }


def row(
    path: str, start: int, end: int, symbol: str | None, kind: str, text: str | None = None, language: str = "python"
) -> dict[str, Any]:
    body = text if text is not None else "\n".join(f"line {n} of {symbol or kind}" for n in range(start, end + 1))
    return payload(
        Chunk(path=path, start_line=start, end_line=end, language=language, symbol=symbol, kind=kind, text=body)
    )


def hits(found: list[SymbolHit]) -> list[tuple[str | None, str, str, int]]:
    return [(h.symbol, h.match, h.path, h.start_line) for h in found]
