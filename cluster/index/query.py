"""A search as one value, `SearchQuery`: the replica builds it once, and the index actor, the catalogue
and the store read it (DESIGN §10).

The replica encodes the query and computes its keyword terms and its filters (`SearchQuery.of_text`,
`query_filter`); the index actor resolves the scope and hands the query to the catalogue, which checks
each index's encoder space and asks the store for every leg's candidates.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from cluster.errors import UnknownLanguage
from cluster.index.keywords import identifier_query, query_keywords
from cluster.index.payload import DEFINES_FIELD
from cluster.ingest import SearchControls
from cluster.ingest.languages import KNOWN_LANGUAGES
from cluster.space import EncoderIdentity
from cluster.types import FusionParams, PayloadFilter, SparseTerms, Strict

__all__ = ["SearchMode", "SearchQuery", "definitions_filter", "query_filter"]

SearchMode = Literal["hybrid", "dense", "keyword"]  # the legs: both vectors and keywords, the vectors, keywords


class SearchQuery(Strict):
    """One search: where, each leg's input, what every leg is restricted to, and how many hits."""

    scope: str | None = Field(
        default=None,
        description="Which indexes: a name, a glob, a group ('@backend') or None for every index "
        "(`cluster.index.scope`). One index by its name refuses a query from another space; "
        "several skip it and list it.",
    )
    vector: list[float] | None = Field(default=None, description="The query's vector: the code and name legs.")
    identity: EncoderIdentity | None = Field(default=None, description="The encoder space `vector` lives in.")
    keywords: SparseTerms | None = Field(default=None, description="The keyword leg's terms.")
    definitions: PayloadFilter | None = Field(
        default=None, description="The definition leg: the chunks that define the identifier asked for."
    )
    filter: PayloadFilter | None = Field(default=None, description="What every leg is restricted to.")
    controls: SearchControls | None = Field(
        default=None,
        description="Paths, kinds and test code left out: made a store filter on every leg by the index "
        "actor, which knows the paths each glob matches (`cluster.index.controls`).",
    )
    limit: int = Field(description="Hits after fusion (the reranker's pool when one re-scores them).")
    depth: int | None = Field(
        default=None,
        ge=1,
        description="Candidates each leg returns (None: the cut, and at least `fusion.candidates`). Every "
        "page of one search uses its first page's depth, so the pages rank one pool.",
    )
    builds: str | None = Field(
        default=None,
        description="A next page's: the serving builds its first page ranked (CursorExpired once they changed).",
    )
    fusion: FusionParams = Field(default_factory=FusionParams, description="How the legs' scores are summed.")

    @classmethod
    def of_text(
        cls,
        text: str,
        mode: SearchMode,
        *,
        vector: np.ndarray | None,
        identity: EncoderIdentity | None,
        scope: str | None,
        filter: PayloadFilter | None,
        limit: int,
        fusion: FusionParams,
    ) -> SearchQuery:
        """The query `mode` asks for: keyword terms unless dense, the definition leg when hybrid."""
        return cls(
            scope=scope,
            vector=None if vector is None else vector.tolist(),
            identity=identity,
            keywords=query_keywords(text) if mode != "dense" else None,
            definitions=definitions_filter(text) if mode == "hybrid" else None,
            filter=filter,
            limit=limit,
            fusion=fusion,
        )

    @property
    def leg_limit(self) -> int:
        """Candidates each leg returns: `depth`, else the cut and at least `fusion.candidates`."""
        return self.depth if self.depth is not None else max(self.limit, self.fusion.candidates)

    @property
    def has_terms(self) -> bool:
        """A vector, or a keyword term at least: something a store can match."""
        return self.vector is not None or bool(self.keywords is not None and self.keywords.indices)


def query_filter(path_prefix: str | None, language: str | None) -> PayloadFilter | None:
    """Payload filter of a search; an unknown language is an error listing the known ones."""
    if language is not None and language not in KNOWN_LANGUAGES:
        raise UnknownLanguage(language, sorted(KNOWN_LANGUAGES))
    equals: dict[str, str] = {}
    if path_prefix:
        prefix = path_prefix.strip().strip("/")
        if prefix:
            equals["path_prefixes"] = prefix  # a row lists every folder above it (`catalog.path_prefixes`)
    if language:
        equals["language"] = language
    return PayloadFilter(equals=equals) if equals else None


def definitions_filter(query: str) -> PayloadFilter | None:
    """The definition leg of a query that is one bare identifier: the chunks that define it."""
    name = identifier_query(query)
    return PayloadFilter(equals={DEFINES_FIELD: name}) if name else None
