"""Shared value types and aliases: chunks, stored points, filters, hits."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cluster.errors import CursorExpired

Clock = Callable[[], float]
Payload = dict[str, Any]


def utc_day(now: float) -> str:
    """The UTC date of a Unix time, as daily ledgers key their days ('2026-12-02')."""
    return datetime.fromtimestamp(now, UTC).date().isoformat()


def next_utc_midnight(now: float) -> float:
    """The Unix time at which the UTC day of `now` ends (when a daily cap or quota starts again)."""
    day = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return (day + timedelta(days=1)).timestamp()


class Strict(BaseModel):
    """Base for every boundary model: unknown fields are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fingerprint(value: Any) -> str:
    """A short digest of a JSON-able value (keys sorted): what a page cursor is bound to."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


MAX_CURSOR_CHARS = 2000  # a page cursor as a tool argument: far above any cursor's encoding


class PageCursor(Strict):
    """Base of the tools' page cursors: opaque to the caller (URL-safe base64 of its JSON, unpadded);
    a text that does not decode as the tool's own cursor is refused whole (CursorExpired)."""

    def encode(self) -> str:
        return base64.urlsafe_b64encode(self.model_dump_json().encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str, tool: str) -> Self:
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            return cls.model_validate_json(raw)
        except (binascii.Error, ValueError, ValidationError):
            raise CursorExpired(f"not a {tool} cursor") from None


class Definition(Strict):
    """A symbol a chunk defines (`cluster.graph`): its bare name, its name qualified by the definitions
    around it in the file (`Class.method`), its kind and lines, and the bases a class names."""

    name: str
    qualified: str
    kind: str
    line: int = Field(ge=1)
    end_line: int = Field(ge=1)
    bases: tuple[str, ...] = ()


class Reference(Strict):
    """A use of a name inside a chunk: a call (`call`) or another mention, its receiver or module as
    written (`qualifier`: `self`, `os.path`, `Foo`; None when bare) and the definition enclosing it."""

    name: str
    line: int = Field(ge=1)
    qualifier: str | None = None
    enclosing: str | None = None
    call: bool = False


class ImportBinding(Strict):
    """A name an import statement binds in its file (`alias`) and what it names (`target`): a module
    path or a module path and a symbol, dotted, relative imports made absolute from the file's path."""

    alias: str
    target: str
    line: int = Field(ge=1)


class Chunk(Strict):
    """One span of a source file, cut at a syntax boundary or a line window, with the code-graph
    facts found on its lines (`cluster.graph`; empty for prose, windows of unknown languages and rows
    written before the graph)."""

    path: str = Field(description="Repository-relative POSIX path.")
    start_line: int = Field(ge=1, description="First line, 1-based, inclusive.")
    end_line: int = Field(ge=1, description="Last line, 1-based, inclusive.")
    language: str = Field(description="Language name, e.g. 'python', 'go', 'markdown', 'text'.")
    symbol: str | None = Field(default=None, description="Function/class/section name, if any.")
    kind: str = Field(description="'function', 'method', 'class', 'section', 'window', ...")
    text: str = Field(description="The exact source text of the span.")
    definitions: tuple[Definition, ...] = Field(default=(), description="The symbols defined on its lines.")
    references: tuple[Reference, ...] = Field(default=(), description="The names used on its lines.")
    imports: tuple[ImportBinding, ...] = Field(default=(), description="The names imports bind on its lines.")

    @property
    def content_hash(self) -> str:
        return content_hash(self.text)

    @property
    def facts_hash(self) -> str:
        return facts_hash(self.definitions, self.references, self.imports)


def facts_hash(
    definitions: tuple[Definition, ...], references: tuple[Reference, ...], imports: tuple[ImportBinding, ...]
) -> str:
    """sha256 of a chunk's code-graph facts: a row whose facts changed is rewritten, its text unchanged."""
    parts = (definitions, references, imports)
    return content_hash("\0".join(",".join(fact.model_dump_json() for fact in facts) for facts in parts))


class SparseTerms(Strict):
    """A sparse keyword vector: term ids (uint32) and their weights; the store applies IDF."""

    indices: list[int] = Field(default_factory=list)
    values: list[float] = Field(default_factory=list)


class StoredPoint(Strict):
    """What the store persists: an id (UUID string), a dense vector, keyword terms, a payload."""

    id: str
    vector: list[float]
    payload: Payload
    sparse: SparseTerms | None = Field(default=None, description="The keyword leg (BM25 term weights).")
    name_vector: list[float] | None = Field(
        default=None, description="The name leg: the embedded name, owner and signature (same space as `vector`)."
    )


class PayloadFilter(Strict):
    """Keyword conditions on a row's payload, all of which must hold. On a list field a condition
    holds when any element meets it. A row lacking a field meets no `equals` or `any_of` condition
    on it and every `none_of` condition."""

    equals: dict[str, str] = Field(default_factory=dict)
    any_of: dict[str, list[str]] = Field(
        default_factory=dict, description="Per field, the values one of which it must equal (an empty list: none)."
    )
    none_of: dict[str, list[str]] = Field(
        default_factory=dict, description="Per field, the values it must equal none of (an empty list: no condition)."
    )
    either: list[Annotated[list[PayloadFilter], Field(min_length=1)]] = Field(
        default_factory=list, description="Groups of filters: in each group at least one filter must hold."
    )

    def both(self, other: PayloadFilter | None) -> PayloadFilter:
        """A filter that holds where this one and `other` both hold."""
        if other is None:
            return self
        equals, any_of, groups = dict(self.equals), dict(self.any_of), [*self.either, *other.either]
        for key, value in other.equals.items():
            if key not in equals:
                equals[key] = value
            elif equals[key] != value:  # a second condition on one field: a group of one, so both hold
                groups.append([PayloadFilter(equals={key: value})])
        for key, values in other.any_of.items():
            if key not in any_of:
                any_of[key] = values
            else:
                groups.append([PayloadFilter(any_of={key: values})])
        none_of = {
            key: sorted({*self.none_of.get(key, []), *other.none_of.get(key, [])})
            for key in sorted({*self.none_of, *other.none_of})
        }
        return PayloadFilter(equals=equals, any_of=any_of, none_of=none_of, either=groups)


class ScoredHit(Strict):
    id: str
    score: float
    payload: Payload


class FusionParams(Strict):
    """How hybrid search scores a candidate (DESIGN §10): a weighted sum of the cosine of the query
    with the code vector, the cosine with the name vector, and the keyword (BM25) score divided by
    the best keyword score among all candidates of the search. Tuned on the dev packages of
    bench.quality only (docs/ARCHITECTURE.md gives the figures)."""

    candidates: int = Field(default=50, ge=1, le=1000, description="Candidates each leg contributes.")
    dense_weight: float = Field(default=1.0, ge=0, description="Weight of the code vector's cosine.")
    name_weight: float = Field(default=0.4, ge=0, description="Weight of the name vector's cosine.")
    keyword_weight: float = Field(
        default=0.2, ge=0, description="Weight of the keyword score, divided by the best keyword score of the search."
    )
    definition_weight: float = Field(
        default=1.0,
        ge=0,
        description="Added for chunks defining the identifier a bare-identifier query asks for (`parse_config`).",
    )


@dataclass(frozen=True, slots=True)
class CandidateHit:
    """A point one or more legs of a search returned, with every leg's score (before fusion).

    `dense` and `name` are exact cosines (None: the search had no query vector); `keyword` is the
    BM25 score when the keyword leg returned the point, else 0. A value inside the index's process,
    built from the engine's checked answer ~150 times a search: a plain dataclass, not a validated
    model (a model's construction was ~1.3 ms of a search, measured)."""

    id: str
    payload: Payload
    dense: float | None = None
    name: float | None = None
    keyword: float = 0.0
    definition: bool = False
