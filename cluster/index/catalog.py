"""The index catalogue: staged builds, atomic switch, provenance, space-guarded search.

Pure logic over a VectorStore (cluster/index/store/protocol.py); the index actor owns one catalogue.
An index is named by its repo name and is an alias (Qdrant) / atomic pointer (Edge) to one
build collection. A build writes into a new collection and becomes visible only at commit.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from pydantic import Field, ValidationError

from cluster.errors import CollectionNotFound, EncoderMismatch, IndexNotFound, SamespaceError, StoreError
from cluster.index.fusion import Ranked, best_places, rank_candidates, tie_end
from cluster.index.history_store import HistoryStore
from cluster.index.keywords import defined_names
from cluster.index.payload import GRAPH_FACT_FIELDS, KEYWORD_FIELDS, PAYLOAD_FIELDS, RowPayload, RowPlace, with_source
from cluster.index.query import SearchQuery
from cluster.index.records import (
    BuildProgress,
    BuildState,
    IndexRecord,
    index_of,
    new_build_id,
    validate_index_name,
)
from cluster.index.representations import name_text
from cluster.index.store.protocol import VectorStore
from cluster.ingest.categories import chunk_categories
from cluster.ingest.git_state import SourceState
from cluster.ingest.skips import SkipSummary
from cluster.space import CHUNK_TEXT_VERSION, EncoderIdentity, embedding_text, require_same_space
from cluster.types import (
    CandidateHit,
    Chunk,
    Clock,
    Payload,
    PayloadFilter,
    ScoredHit,
    StoredPoint,
    Strict,
    content_hash,
    facts_hash,
)

_POINT_NAMESPACE = uuid.UUID("5a3e5ba0-0000-4c0d-9e00-5a3e5ba0c0de")


def path_prefixes(path: str) -> list[str]:
    """'src/a/b.py' → ['src', 'src/a', 'src/a/b.py']: lets a keyword match filter by folder."""
    parts = path.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def point_id(repo: str, chunk: Chunk) -> str:
    key = f"{repo}\0{chunk.path}\0{chunk.start_line}\0{chunk.end_line}\0{chunk.content_hash}"
    return str(uuid.uuid5(_POINT_NAMESPACE, key))


def embed_hash(chunk: Chunk) -> str:
    """sha256 of the texts embedded for a chunk (`embedding_text`, `name_text`): equal hashes, equal vectors."""
    return content_hash(embedding_text(chunk) + "\0" + name_text(chunk))


def point_payload(
    repo: str,
    chunk: Chunk,
    space: EncoderIdentity,
    writer: EncoderIdentity | dict[str, Any],
    provider: str,
    build: str,
    *,
    file_hash: str | None = None,
    hashed: str | None = None,
) -> Payload:
    """Provenance of one row (DESIGN §10): where it came from, the space it lives in, who wrote it,
    what was embedded (`embed_hash`; `hashed` when the caller has it) and the file it was cut from
    (`file_hash`, sha256 of the file's text). `writer` may be an identity's dump (a reused row keeps
    the writer of its vector)."""
    return RowPayload(
        **chunk.model_dump(),
        repo=repo,
        path_prefixes=path_prefixes(chunk.path),
        content_hash=chunk.content_hash,
        space=space.space_id,
        encoder=writer if isinstance(writer, dict) else writer.model_dump(),
        provider=provider,
        build=build,
        embed_hash=hashed if hashed is not None else embed_hash(chunk),
        file_hash=file_hash,
        defines=defined_names(chunk.text, chunk.symbol),
        refs=sorted({reference.name for reference in chunk.references}),
        categories=list(chunk_categories(chunk.path, chunk.language, chunk.kind, chunk.text)),
    ).stored()


class PointKey(Strict):
    """Everything of a row that a reindex of unchanged sources would write again the same way
    (not its build, provider or vector). Equal keys for every row: the index is up to date."""

    id: str
    path: str
    start_line: int
    end_line: int
    language: str
    symbol: str | None
    kind: str
    content_hash: str
    embed_hash: str
    file_hash: str | None
    facts_hash: str = Field(description="sha256 of its code-graph facts (`Chunk.facts_hash`).")
    complete: bool = Field(default=True, description="The row carries every payload field of this version.")

    @classmethod
    def from_payload(cls, point_id: str, payload: Payload) -> PointKey | None:
        """The key of a stored row; None when its payload cannot say what was embedded. A row
        written before `embed_hash` existed gets it recomputed from its text (the index's
        identity pins the chunk-text version), and `complete=False`: it is rewritten."""
        try:
            row = RowPayload.model_validate(payload)
            if row.lacks(_KEY_FIELDS):
                return None
            return cls.model_validate(
                {
                    **row.model_dump(include={*_KEY_FIELDS, "symbol", "file_hash"}),
                    "id": point_id,
                    "embed_hash": row.embed_hash or embed_hash(row.chunk()),
                    "facts_hash": facts_hash(row.definitions, row.references, row.imports),
                    "complete": not row.lacks(PAYLOAD_FIELDS),
                }
            )
        except ValidationError:
            return None


_KEY_FIELDS = frozenset({"path", "start_line", "end_line", "language", "kind", "content_hash"})  # what a key needs


def point_key(repo: str, chunk: Chunk, file_hash: str | None, hashed: str | None = None) -> PointKey:
    """The key the row of `chunk` gets in a build of `repo` (see PointKey)."""
    return PointKey(
        **chunk.model_dump(exclude={"text", "definitions", "references", "imports"}),
        id=point_id(repo, chunk),
        facts_hash=chunk.facts_hash,
        content_hash=chunk.content_hash,
        embed_hash=hashed if hashed is not None else embed_hash(chunk),
        file_hash=file_hash,
    )


class IndexCatalog:
    """Staged builds and guarded search over one VectorStore. Not thread-safe: one owner."""

    def __init__(self, store: VectorStore, clock: Clock = time.time) -> None:
        self._store = store
        self._clock = clock
        self._builds: dict[str, BuildState] = {}
        self._records: dict[str, IndexRecord] = {}  # by build collection; records are immutable
        self.history = HistoryStore(store)  # each index's mined commits, beside it

    # ---- builds ---------------------------------------------------------------------------
    def begin_build(
        self,
        name: str,
        identity: EncoderIdentity,
        repo_root: str,
        job_id: str | None = None,
        probe_vectors: list[list[float]] | None = None,
        *,
        build: str | None = None,
        origin: str | None = None,
        source: SourceState | None = None,
        rows: int | None = None,
    ) -> str:
        """Create a fresh build collection (named `build` when the caller chose it: `new_build_id`);
        drop leftovers of earlier killed or failed builds. `rows`: how many rows the build will write,
        when known (a small build may share a collection with others: `VectorStore.create_collection`).

        Last writer wins: a build of the same name still running elsewhere loses its
        collection here and fails on its next write ("not in progress").
        """
        validate_index_name(name)
        if build is not None and index_of(build) != name:
            raise SamespaceError(f"build id {build!r} is not one of index {name!r}")
        self.cleanup_partial(name)
        started = self._clock()
        build = build or new_build_id(name, started)
        self._store.create_collection(build, identity.width, KEYWORD_FIELDS, rows=rows)
        record = IndexRecord(
            name=name,
            build=build,
            repo_root=repo_root,
            origin=origin,
            source=source,
            identity=identity,
            probe_vectors=probe_vectors,
            started_at=started,
            categorised=True,  # every row is written by `point_payload`, which sets `categories`
        )
        self._store.put_metadata(build, {"state": "building", "record": record.model_dump(mode="json")})
        self._builds[name] = BuildState(index=name, build=build, state="building", job_id=job_id, started_at=started)
        return build

    def write(self, build: str, points: Sequence[StoredPoint]) -> None:
        self._require_active(build)
        self._store.upsert(build, points)

    def index_vectors(self, build: str) -> bool:
        """Build a building collection's vector indexes (`VectorStore.index_vectors`); True when built.
        The one catalog call safe beside the others: it reads the build's state and touches only the store."""
        self._require_active(build)
        return self._store.index_vectors(build)

    def report_progress(self, build: str, progress: BuildProgress) -> None:
        state = self._require_active(build)
        self._builds[state.index] = state.model_copy(update={"progress": progress})

    def commit_build(
        self,
        build: str,
        *,
        files: int,
        providers: Sequence[str],
        skipped: SkipSummary | None = None,
        embedded: int = 0,
        reused: int = 0,
    ) -> IndexRecord:
        """Make the build the index's serving collection in one atomic switch; drop the old one."""
        state = self._require_active(build)
        record = self._load_record(build).model_copy(
            update={
                "files": files,
                "embedded": embedded,
                "reused": reused,
                "chunks": self._store.count(build),
                "providers": sorted(set(providers)),
                "skipped": skipped or SkipSummary(),
                "built_at": self._clock(),
            }
        )
        self._store.put_metadata(build, {"state": "committed", "record": record.model_dump(mode="json")})
        self._store.flush()
        previous = self._store.resolve_alias(state.index)
        self._store.set_alias(state.index, build)
        if previous and previous != build:
            self._store.drop_collection(previous)
            self._records.pop(previous, None)
        self._records[build] = record
        self._builds[state.index] = state.model_copy(update={"state": "committed"})
        return record

    def fail_build(self, build: str, error: str) -> None:
        """Record a failed build and drop its partial collection; the old index keeps serving."""
        state = self._builds.get(index_of(build))
        self._store.drop_collection(build)
        if state is not None and state.build == build:
            self._builds[state.index] = state.model_copy(update={"state": "failed", "error": error})

    def cleanup_partial(self, name: str) -> list[str]:
        """Drop every build collection of `name` that is not the serving one."""
        serving = self._store.resolve_alias(name)
        dropped = []
        for collection in self._store.list_collections():
            if index_of(collection) == name and collection != serving:
                self._store.drop_collection(collection)
                dropped.append(collection)
        return dropped

    def update_source(self, name: str, source: SourceState) -> IndexRecord:
        """Record that the serving build's files are those of `source` too (a reindex found nothing to
        change since, e.g. after a commit of what was already indexed)."""
        record = self.record(name).model_copy(update={"source": source})
        self._store.put_metadata(record.build, {"state": "committed", "record": record.model_dump(mode="json")})
        self._records[record.build] = record
        return record

    def remove(self, name: str) -> list[str]:
        """Drop an index: its name, its serving build and any partial one. Returns the dropped builds."""
        serving = self._store.resolve_alias(name)
        if serving is None:
            raise IndexNotFound(name, self.names())
        self._store.delete_alias(name)
        self._store.drop_collection(serving)
        self._records.pop(serving, None)
        self._builds.pop(name, None)
        self.history.drop(name)
        return [serving, *self.cleanup_partial(name)]

    # ---- reuse (incremental reindex) ------------------------------------------------------
    def point_keys(
        self, build: str, offset: str | None = None, limit: int = 1024
    ) -> tuple[list[PointKey | None], str | None]:
        """One page of the keys of a build's rows (payloads only, no vectors) and the next offset.
        None stands for a row whose payload cannot say what was embedded."""
        page, next_offset = self._store.scroll(build, None, limit, offset)
        return [PointKey.from_payload(hit.id, hit.payload) for hit in page], next_offset

    def points_page(
        self, build: str, offset: str | None = None, limit: int = 512
    ) -> tuple[list[StoredPoint], str | None]:
        """One page of a build's rows with their vectors (for reuse: `cluster.index.incremental.reusable_rows`)."""
        return self._store.scroll_points(build, None, limit, offset)

    def points(self, build: str, ids: Sequence[str]) -> list[StoredPoint]:
        """A build's rows with these ids, with their vectors (for reuse: `cluster.index.carry`)."""
        return self._store.retrieve_points(build, ids)

    def build_record(self, build: str) -> IndexRecord:
        """The record of a build, serving or still in progress."""
        return self._load_record(build)

    # ---- reads ----------------------------------------------------------------------------
    def names(self) -> list[str]:
        return sorted(self._store.aliases())

    def record(self, name: str) -> IndexRecord:
        build = self._store.resolve_alias(name)
        if build is None:
            raise IndexNotFound(name, self.names())
        return self._load_record(build)

    def source_of(self, build: str) -> SourceState | None:
        """The source state a build recorded (None: none recorded, or no such build)."""
        try:
            return self._load_record(build).source
        except StoreError:
            return None

    def builds(self) -> dict[str, BuildState]:
        return dict(self._builds)

    def search_scope(self, query: SearchQuery, names: Sequence[str]) -> tuple[list[ScoredHit], list[str]]:
        """The hits of `query` over the indexes its scope stands for (`names`, `cluster.index.scope`),
        each with the commit and ref (or branch) of its build, and why each index skipped was. The
        one index a scope names exactly refuses a query from another space (EncoderMismatch); of
        several, such an index is skipped."""
        refused: list[EncoderMismatch] = []
        if query.scope is not None and list(names) == [query.scope]:
            hits = self.search(query.scope, query)
        else:
            hits, refused = self.search_all(query, names)
        return [self._sourced(hit) for hit in hits], [str(exc) for exc in refused]

    def search(self, name: str, query: SearchQuery) -> list[ScoredHit]:
        """Search one index: its legs' candidates scored by `cluster.index.fusion` (DESIGN §10). A
        query vector from another encoder space is refused; so is a keyword-only query of an index
        whose chunk text is not the current version (its rows were cut differently: rebuild it)."""
        return self._fused(self._candidates([self._searchable(name, query)], query), query)

    def search_all(
        self, query: SearchQuery, names: Sequence[str] | None = None
    ) -> tuple[list[ScoredHit], list[EncoderMismatch]]:
        """Search every index (or those `names`) in the query's space, scored together (comparable
        scores, one hit per place); indexes in another space are refused, listed."""
        searched: list[IndexRecord] = []
        refused: list[EncoderMismatch] = []
        for name in self.names() if names is None else names:
            try:
                searched.append(self._searchable(name, query))
            except EncoderMismatch as exc:
                refused.append(exc)
        return self._fused(self._candidates(searched, query), query), refused

    def _searchable(self, name: str, query: SearchQuery) -> IndexRecord:
        """The serving record of an index `query` may search; EncoderMismatch when its vector is of
        another space, or it has keywords only and the index's chunk text is not the current version."""
        record = self.record(name)
        if query.vector is not None:
            if query.identity is None:
                raise SamespaceError("a query vector needs the identity of the encoder that produced it")
            require_same_space(name, record.identity, query.identity)
        elif record.identity.chunk_text_version != CHUNK_TEXT_VERSION:
            raise EncoderMismatch(name, record.identity.space_id, f"chunk text version {CHUNK_TEXT_VERSION}")
        return record

    def _candidates(self, records: Sequence[IndexRecord], query: SearchQuery) -> list[CandidateHit]:
        """The candidates of the serving builds of `records`, without payloads (the few ranked first get
        theirs, after), in as few engine calls as the store can (`VectorStore.query_each`), each marked
        with its build: its keyword scale, and where its payload is."""
        if not records:
            return []
        found = self._store.query_each([record.build for record in records], query)
        candidates: list[CandidateHit] = []
        for build, hits in found.items():
            for candidate in hits:
                candidate.payload["build"] = build
            candidates += hits
        return candidates

    def _fused(self, candidates: list[CandidateHit], query: SearchQuery) -> list[ScoredHit]:
        """The best `query.limit` places of the candidates (`cluster.index.fusion`). They come without
        payloads (a search scores ~150 and returns ~10, and a payload costs more to read than a score):
        the ranked ones get theirs from the top down, once per build, until `limit` distinct places are
        found (one index: the first read; a place held by several indexes asks for more). A row gone
        meanwhile (its build dropped) is left out."""
        ranked, limit = rank_candidates(candidates, query.fusion), max(query.limit, 0)
        read, end = 0, 0
        found: set[int] = set()  # the ranks whose payloads were read (a row gone meanwhile has none)
        hits: list[ScoredHit] = []
        while end < len(ranked) and len(hits) < limit:
            end = tie_end(ranked, end + limit)
            found |= self._read_payloads(ranked, read, end)
            read = end
            hits = best_places([item for rank, item in enumerate(ranked[:end]) if rank in found], limit)
        return hits

    def _read_payloads(self, ranked: Ranked, start: int, end: int) -> set[int]:
        """The payloads of the candidates ranked `start` to `end` but their code-graph facts, in place, read
        once per build; the ranks read."""
        by_build: dict[str, list[int]] = {}
        for rank in range(start, end):
            by_build.setdefault(str(ranked[rank][1].payload["build"]), []).append(rank)
        read: set[int] = set()
        for build, ranks in by_build.items():
            stored = self._store.payloads(build, [ranked[rank][1].id for rank in ranks], leave_out=GRAPH_FACT_FIELDS)
            for rank in ranks:
                candidate = ranked[rank][1]
                if candidate.id in stored:
                    candidate.payload.update(stored[candidate.id])
                    read.add(rank)
        return read

    def _sourced(self, hit: ScoredHit) -> ScoredHit:
        source = self.source_of(RowPlace.model_validate(hit.payload).build)
        return hit if source is None else hit.model_copy(update={"payload": with_source(hit.payload, source)})

    def has_path(self, name: str, path: str) -> bool:
        """True when the serving build holds rows of that file (read_code serves indexed files only)."""
        build = self.record(name).build
        return self._store.count(build, PayloadFilter(equals={"path": path})) > 0

    def collections(self) -> list[str]:
        return self._store.list_collections()

    def scroll(self, name: str, filter: PayloadFilter, limit: int) -> list[ScoredHit]:
        build = self.record(name).build
        rows: list[ScoredHit] = []
        offset: str | None = None
        while len(rows) < limit:
            page, offset = self._store.scroll(build, filter, min(256, limit - len(rows)), offset)
            rows.extend(page)
            if offset is None:
                break
        return rows

    # ---- internals ------------------------------------------------------------------------
    def _require_active(self, build: str) -> BuildState:
        state = self._builds.get(index_of(build))
        if state is None or state.build != build or state.state != "building":
            raise StoreError("write", f"build {build!r} is not in progress (superseded, failed or committed)")
        return state

    def _load_record(self, build: str) -> IndexRecord:
        cached = self._records.get(build)
        if cached is not None:
            return cached
        try:
            meta = self._store.get_metadata(build)
        except CollectionNotFound:
            meta = None
        if not meta or "record" not in meta:
            raise StoreError("read", f"collection {build!r} carries no index record")
        record = IndexRecord.model_validate(meta["record"])
        if meta.get("state") == "committed":
            self._records[build] = record
        return record
