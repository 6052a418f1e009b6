"""An index's mined history, kept beside it in the same store: one point per commit.

The collection is `<index>__history` (an index name may not hold `__h`, so no index or alias can take
that name, and no build is named so: the catalogue never mistakes it for a partial build). A commit
point carries the commit's record (message, files, symbol changes) as its payload, the vector of its
text in the index's encoder space (the space is recorded: a query from another is refused, and a
reindex in a new space mines again) and its keyword terms, so `search_commits` is the same hybrid
search as code. The collection's metadata is the `HistoryState`: what has been mined. It is dropped
with the index.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from pydantic import Field, ValidationError

from cluster.errors import CollectionNotFound, SamespaceError
from cluster.history import CommitRecord, History
from cluster.index.keywords import chunk_keywords
from cluster.index.query import SearchQuery
from cluster.index.records import history_collection
from cluster.index.store.protocol import VectorStore
from cluster.space import EncoderIdentity, require_same_space
from cluster.types import CandidateHit, StoredPoint, Strict

__all__ = ["CommitHit", "HistoryState", "HistoryStore", "commit_text"]

_COMMIT_NAMESPACE = uuid.UUID("5a3e5ba0-0000-4c0d-9e00-c0331700c0de")
_KEYWORD_FIELDS = ("commit",)
MAX_TEXT_SYMBOLS = 40  # symbol names a commit's embedded text lists, at most
KEYWORD_WEIGHT = 1.0  # a commit's keyword score (over the best of the search) next to its cosine


class HistoryState(Strict):
    """What an index's history holds: from which folder, down from which commit, how far back."""

    index: str
    folder: str = Field(description="The git folder mined; refs of the history tools are resolved there.")
    newest: str = Field(description="The newest commit mined (the next reindex mines the commits after it).")
    oldest: str | None = Field(default=None, description="The oldest commit mined.")
    oldest_at: int | None = Field(default=None, description="Its commit date (Unix seconds).")
    more: bool = Field(default=False, description="Older commits remain unmined (the first build's bound).")
    commits: int = 0
    identity: EncoderIdentity = Field(description="The encoder space of the commit vectors.")


class CommitHit(Strict):
    commit: str
    score: float
    record: CommitRecord


def commit_text(record: CommitRecord) -> str:
    """What a commit is embedded and keyword-indexed as: its message, then the symbols it changed."""
    names = list(dict.fromkeys(f"{s.path}:{s.symbol}" for s in record.symbols))[:MAX_TEXT_SYMBOLS]
    changed = "\n".join(names)
    return f"{record.message}\n{changed}".strip()


class HistoryStore:
    """The history collections of a store. Not thread-safe: the index actor is its one owner."""

    def __init__(self, store: VectorStore) -> None:
        self._store = store

    def state(self, index: str) -> HistoryState | None:
        try:  # one read: asked on every history call and every index_status
            metadata = self._store.get_metadata(history_collection(index))
        except CollectionNotFound:
            return None
        try:
            return HistoryState.model_validate((metadata or {}).get("state"))
        except ValidationError:
            return None

    def write(
        self,
        state: HistoryState,
        commits: Sequence[CommitRecord],
        vectors: Sequence[Sequence[float]],
        writers: Sequence[dict[str, Any]],
        *,
        replace: bool = False,
    ) -> HistoryState:
        """Add `commits` (their vectors, each with the identity of the encoder that wrote it) and record
        `state`; `replace`: drop what was held first (a history mined again from the top). A history in
        another space is dropped first too: its vectors could not answer a query."""
        if not (len(commits) == len(vectors) == len(writers)):
            raise SamespaceError("a history write needs one vector and one writer per commit")
        name = history_collection(state.index)
        held = self.state(state.index)
        if held is not None and (replace or held.identity.space_id != state.identity.space_id):
            self._store.drop_collection(name)
        if name not in self._store.list_collections():
            self._store.create_collection(name, state.identity.width, _KEYWORD_FIELDS)
        points = [
            StoredPoint(
                id=commit_id(state.index, record.commit),
                vector=list(vector),
                payload={
                    **record.model_dump(mode="json"),
                    "space": state.identity.space_id,
                    "encoder": writer,
                },
                sparse=chunk_keywords(commit_text(record), " ".join(f.path for f in record.files), None),
            )
            for record, vector, writer in zip(commits, vectors, writers, strict=True)
        ]
        for start in range(0, len(points), 256):
            self._store.upsert(name, points[start : start + 256])
        counted = self._store.count(name)
        recorded = state.model_copy(update={"commits": counted})
        self._store.put_metadata(name, {"state": recorded.model_dump(mode="json")})
        self._store.flush()
        return recorded

    def load(self, index: str) -> History:
        """Every commit of the index's history, newest first (first-parent order as mined)."""
        state = self.state(index)
        if state is None:
            return History(index, [])
        name = history_collection(index)
        records: list[CommitRecord] = []
        offset: str | None = None
        while True:
            page, offset = self._store.scroll(name, None, 1024, offset)
            for hit in page:
                try:
                    records.append(CommitRecord.model_validate(_record_fields(hit.payload)))
                except ValidationError:
                    continue  # an unreadable row is skipped, never fatal
            if offset is None:
                break
        return History(index, order_first_parent(records, state.newest))

    def search(self, index: str, query: SearchQuery) -> list[CommitHit]:
        """The commits best matching `query` (its vector and keyword terms), best first."""
        state = self.state(index)
        if state is None:
            return []
        if query.vector is not None:
            if query.identity is None:
                raise SamespaceError("a query vector needs the identity of the encoder that produced it")
            require_same_space(history_collection(index), state.identity, query.identity)
        candidates = self._store.query(history_collection(index), query.model_copy(update={"definitions": None}))
        return _fused(candidates, query.limit)

    def drop(self, index: str) -> bool:
        name = history_collection(index)
        if name not in self._store.list_collections():
            return False
        self._store.drop_collection(name)
        return True


def commit_id(index: str, sha: str) -> str:
    return str(uuid.uuid5(_COMMIT_NAMESPACE, f"{index}\0{sha}"))


def order_first_parent(records: Sequence[CommitRecord], newest: str) -> list[CommitRecord]:
    """Records in first-parent order from `newest` (a record off the line comes last, by date)."""
    by_sha = {r.commit: r for r in records}
    ordered: list[CommitRecord] = []
    at: str | None = newest
    while at is not None and at in by_sha and len(ordered) <= len(by_sha):
        record = by_sha.pop(at)
        ordered.append(record)
        at = record.parent
    rest = sorted(by_sha.values(), key=lambda r: -r.committed_at)
    return ordered + rest


def _record_fields(payload: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in payload.items() if key in CommitRecord.model_fields}


def _fused(candidates: Sequence[CandidateHit], limit: int) -> list[CommitHit]:
    best_keyword = max((c.keyword for c in candidates), default=0.0)
    scored: list[CommitHit] = []
    for c in candidates:
        score = (c.dense or 0.0) + (KEYWORD_WEIGHT * c.keyword / best_keyword if best_keyword > 0 else 0.0)
        try:
            record = CommitRecord.model_validate(_record_fields(c.payload))
        except ValidationError:
            continue
        scored.append(CommitHit(commit=record.commit, score=round(score, 6), record=record))
    scored.sort(key=lambda h: (-h.score, -h.record.committed_at, h.commit))
    return scored[:limit]
