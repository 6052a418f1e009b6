"""The payload of a stored row: one typed schema for what a build writes and every reader.

A row's payload is its provenance (DESIGN §10): where the chunk is, what was embedded, the space,
the encoder and provider that wrote its vectors, and the build. `cluster.index.catalog.point_payload`
writes it through `RowPayload`; the catalogue, the fusion, the incremental plan, the code maps and
the search service read it through `RowPayload` too. A search hit's payload carries three keys more
that no row stores: the commit and ref of its build (`with_source`) and the other indexes holding
the same place (`also_in`, set by the fusion).

Stored data stays readable: the keys are those rows have always had, and a row written before a
key existed (`embed_hash`, `file_hash`, `defines`, the graph's `definitions`, `references`, `imports`,
`refs` and `categories`) loads with its default.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from cluster.ingest.git_state import SourceState
from cluster.types import Chunk, Definition, ImportBinding, Payload, Reference

__all__ = [
    "CATEGORIES_FIELD",
    "DEFINES_FIELD",
    "GRAPH_FACT_FIELDS",
    "HIT_FIELDS",
    "KEYWORD_FIELDS",
    "PAYLOAD_FIELDS",
    "REFS_FIELD",
    "RowPayload",
    "RowPlace",
    "with_source",
]

DEFINES_FIELD = "defines"  # the names a chunk defines: the definition leg of hybrid search filters on it
REFS_FIELD = "refs"  # the names a chunk uses (`references`): "who uses X" is one filtered query
CATEGORIES_FIELD = "categories"  # function, method, class, module, doc, test: the search tools' `kind` and `tests`
KEYWORD_FIELDS = (
    "repo",
    "path",
    "path_prefixes",
    "language",
    "symbol",
    "kind",
    "content_hash",
    "space",
    DEFINES_FIELD,
    REFS_FIELD,
    CATEGORIES_FIELD,
)


def _whole_number(value: object) -> object:
    """A line number as stored: an int, or a float with no fraction (never a bool or a string)."""
    if isinstance(value, bool | str):
        raise ValueError(f"a line number is a whole number, got {value!r}")
    return value


Line = Annotated[int, BeforeValidator(_whole_number)]


class RowPlace(BaseModel):
    """Where a row points and which build holds it: what a search's fusion and sourcing read of each
    hit, without validating the rest of its payload (a hit's code-graph facts alone are dozens of
    models). The same keys, defaults and checks as `RowPayload`, which extends it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    repo: str = Field(default="", description="The index the row belongs to.")
    path: str = Field(default="", description="Repository-relative POSIX path of the chunk.")
    start_line: Line | None = None
    end_line: Line | None = None
    content_hash: str = Field(default="", description="sha256 of the chunk's text.")
    build: str = Field(default="", description="The build collection holding the row.")

    @property
    def place(self) -> tuple[str, int, int, str]:
        """Where a row points: path, lines and the hash of its text (the same in every index of that code)."""
        return (self.path, self.start_line or 0, self.end_line or 0, self.content_hash)


class RowPayload(RowPlace):
    """The payload of one row. Unknown keys are ignored (a newer build's row still loads); a key a
    row lacks reads as its default: empty text, None for what may be absent (lines, text, hashes)."""

    path_prefixes: list[str] = Field(default_factory=list, description="Every folder above the path, and the path.")
    language: str = ""
    symbol: str | None = None
    kind: str = ""
    text: str | None = Field(default=None, description="The chunk's exact source text.")
    space: str = Field(default="", description="The encoder space the vectors live in.")
    encoder: dict[str, Any] = Field(default_factory=dict, description="The identity of the encoder that wrote them.")
    provider: str = Field(default="", description="The provider that embedded them.")
    embed_hash: str | None = Field(default=None, description="sha256 of the texts embedded (None: an older row).")
    file_hash: str | None = Field(default=None, description="sha256 of the file the chunk was cut from.")
    defines: list[str] = Field(default_factory=list, description="The names the chunk defines.")
    definitions: tuple[Definition, ...] = Field(default=(), description="The code graph's definitions on its lines.")
    references: tuple[Reference, ...] = Field(default=(), description="The code graph's references on its lines.")
    imports: tuple[ImportBinding, ...] = Field(default=(), description="The names its import statements bind.")
    refs: list[str] = Field(default_factory=list, description="The names of its references, once each (indexed).")
    categories: list[str] = Field(
        default_factory=list,
        description="What the chunk is for the search filters (`cluster.ingest.chunk_categories`, indexed). "
        "A row written before it existed lacks it: its build's record says so (`IndexRecord.categorised`).",
    )
    commit: str | None = Field(default=None, description="A hit's: the commit its build's files were at.")
    ref: str | None = Field(default=None, description="A hit's: the ref its build indexed, or the branch then.")
    also_in: list[str] = Field(default_factory=list, description="A hit's: other indexes holding the same place.")

    def stored(self) -> Payload:
        """The payload as a row stores it (no hit keys)."""
        return self.model_dump(exclude=set(HIT_FIELDS))

    def lacks(self, fields: frozenset[str]) -> bool:
        """True when the payload this was read from lacked any of `fields` (an older row)."""
        return not fields <= self.model_fields_set

    def chunk(self) -> Chunk:
        """The chunk the row was cut from (ValidationError when the row lacks its place or text)."""
        return Chunk.model_validate(self.model_dump(include=set(Chunk.model_fields)))


HIT_FIELDS = frozenset({"commit", "ref", "also_in"})  # set on a search hit, never stored per row
# A row's code-graph facts: what navigation reads (by scroll), never a search hit's reader (its place, text
# and provenance); a hit's payload is read without them, about half its size (a search's answer crosses
# from the index actor to the replica).
GRAPH_FACT_FIELDS = ("definitions", "references", "imports", DEFINES_FIELD, REFS_FIELD)
PAYLOAD_FIELDS = frozenset(RowPayload.model_fields) - HIT_FIELDS  # a row lacking one is rewritten by the next reindex


def with_source(payload: Payload, source: SourceState) -> Payload:
    """A hit's payload with the commit and ref (or branch) its build was made from."""
    return {**payload, "commit": source.commit, "ref": source.ref or source.branch}
