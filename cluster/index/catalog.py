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
from cluster.index.fusion import fuse_candidates
from cluster.index.keywords import defined_names, identifier_query
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
from cluster.ingest.git_state import SourceState
from cluster.ingest.skips import SkipSummary
from cluster.space import CHUNK_TEXT_VERSION, EncoderIdentity, embedding_text, require_same_space
from cluster.types import (
    CandidateHit,
    Chunk,
    Clock,
    FusionParams,
    Payload,
    PayloadFilter,
    ScoredHit,
    SparseTerms,
    StoredPoint,
    Strict,
    content_hash,
)

DEFINES_FIELD = "defines"  # the names a chunk defines: the definition leg of hybrid search filters on it
KEYWORD_FIELDS = ("repo", "path", "path_prefixes", "language", "symbol", "kind", "content_hash", "space", DEFINES_FIELD)
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


def definitions_filter(query: str) -> PayloadFilter | None:
    """The definition leg of a query that is one bare identifier: the chunks that define it."""
    name = identifier_query(query)
    return PayloadFilter(equals={DEFINES_FIELD: name}) if name else None


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
    return {
        "repo": repo,
        "path": chunk.path,
        "path_prefixes": path_prefixes(chunk.path),
        "start_line": chunk.start_line,
        "end_line": chunk.end_line,
        "language": chunk.language,
        "symbol": chunk.symbol,
        "kind": chunk.kind,
        "content_hash": chunk.content_hash,
        "text": chunk.text,
        "space": space.space_id,
        "encoder": writer if isinstance(writer, dict) else writer.model_dump(),
        "provider": provider,
        "build": build,
        "embed_hash": hashed if hashed is not None else embed_hash(chunk),
        "file_hash": file_hash,
        DEFINES_FIELD: defined_names(chunk.text, chunk.symbol),
    }


PAYLOAD_FIELDS = frozenset(
    {
        "repo",
        "path",
        "path_prefixes",
        "start_line",
        "end_line",
        "language",
        "symbol",
        "kind",
        "content_hash",
        "text",
        "space",
        "encoder",
        "provider",
        "build",
        "embed_hash",
        "file_hash",
        DEFINES_FIELD,
    }
)  # the keys of point_payload: a row lacking one is rewritten by the next reindex


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
    complete: bool = Field(default=True, description="The row carries every payload field of this version.")

    @classmethod
    def from_payload(cls, point_id: str, payload: Payload) -> PointKey | None:
        """The key of a stored row; None when its payload cannot say what was embedded. A row
        written before `embed_hash` existed gets it recomputed from its text (the index's
        identity pins the chunk-text version), and `complete=False`: it is rewritten."""
        try:
            hashed = payload.get("embed_hash") or embed_hash(_payload_chunk(payload))
            return cls(
                id=point_id,
                path=payload["path"],
                start_line=payload["start_line"],
                end_line=payload["end_line"],
                language=payload["language"],
                symbol=payload.get("symbol"),
                kind=payload["kind"],
                content_hash=payload["content_hash"],
                embed_hash=hashed,
                file_hash=payload.get("file_hash"),
                complete=PAYLOAD_FIELDS.issubset(payload),
            )
        except (KeyError, TypeError, ValidationError):
            return None


def point_key(repo: str, chunk: Chunk, file_hash: str | None, hashed: str | None = None) -> PointKey:
    """The key the row of `chunk` gets in a build of `repo` (see PointKey)."""
    return PointKey(
        id=point_id(repo, chunk),
        path=chunk.path,
        start_line=chunk.start_line,
        end_line=chunk.end_line,
        language=chunk.language,
        symbol=chunk.symbol,
        kind=chunk.kind,
        content_hash=chunk.content_hash,
        embed_hash=hashed if hashed is not None else embed_hash(chunk),
        file_hash=file_hash,
    )


def _payload_chunk(payload: Payload) -> Chunk:
    return Chunk(
        path=payload["path"],
        start_line=payload["start_line"],
        end_line=payload["end_line"],
        language=payload["language"],
        symbol=payload.get("symbol"),
        kind=payload["kind"],
        text=payload["text"],
    )


class IndexCatalog:
    """Staged builds and guarded search over one VectorStore. Not thread-safe: one owner."""

    def __init__(self, store: VectorStore, clock: Clock = time.time) -> None:
        self._store = store
        self._clock = clock
        self._builds: dict[str, BuildState] = {}
        self._records: dict[str, IndexRecord] = {}  # by build collection; records are immutable

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
    ) -> str:
        """Create a fresh build collection (named `build` when the caller chose it: `new_build_id`);
        drop leftovers of earlier killed or failed builds.

        Last writer wins: a build of the same name still running elsewhere loses its
        collection here and fails on its next write ("not in progress").
        """
        validate_index_name(name)
        if build is not None and index_of(build) != name:
            raise SamespaceError(f"build id {build!r} is not one of index {name!r}")
        self.cleanup_partial(name)
        started = self._clock()
        build = build or new_build_id(name, started)
        self._store.create_collection(build, identity.width, KEYWORD_FIELDS)
        record = IndexRecord(
            name=name,
            build=build,
            repo_root=repo_root,
            origin=origin,
            source=source,
            identity=identity,
            probe_vectors=probe_vectors,
            started_at=started,
        )
        self._store.put_metadata(build, {"state": "building", "record": record.model_dump(mode="json")})
        self._builds[name] = BuildState(index=name, build=build, state="building", job_id=job_id, started_at=started)
        return build

    def write(self, build: str, points: Sequence[StoredPoint]) -> None:
        self._require_active(build)
        self._store.upsert(build, points)

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

    def search(
        self,
        name: str,
        vector: Sequence[float] | None,
        query_identity: EncoderIdentity | None,
        limit: int,
        filter: PayloadFilter | None = None,
        keywords: SparseTerms | None = None,
        fusion: FusionParams | None = None,
        definitions: PayloadFilter | None = None,
    ) -> list[ScoredHit]:
        """Search one index: its legs' candidates scored by `cluster.index.fusion` (DESIGN §10). A
        query vector from another encoder space is refused; so is a keyword-only query of an index
        whose chunk text is not the current version (its rows were cut differently: rebuild it)."""
        params = fusion or FusionParams()
        found = self._candidates(name, vector, query_identity, limit, filter, keywords, params, definitions)
        return fuse_candidates(found, params, limit)

    def search_all(
        self,
        vector: Sequence[float] | None,
        query_identity: EncoderIdentity | None,
        limit: int,
        filter: PayloadFilter | None = None,
        keywords: SparseTerms | None = None,
        fusion: FusionParams | None = None,
        definitions: PayloadFilter | None = None,
        names: Sequence[str] | None = None,
    ) -> tuple[list[ScoredHit], list[EncoderMismatch]]:
        """Search every index (or those `names`) in the query's space, scored together (comparable
        scores, one hit per place); indexes in another space are refused, listed."""
        params = fusion or FusionParams()
        found: list[CandidateHit] = []
        refused: list[EncoderMismatch] = []
        for name in self.names() if names is None else names:
            try:
                found += self._candidates(name, vector, query_identity, limit, filter, keywords, params, definitions)
            except EncoderMismatch as exc:
                refused.append(exc)
        return fuse_candidates(found, params, limit), refused

    def _candidates(
        self,
        name: str,
        vector: Sequence[float] | None,
        query_identity: EncoderIdentity | None,
        limit: int,
        filter: PayloadFilter | None,
        keywords: SparseTerms | None,
        params: FusionParams,
        definitions: PayloadFilter | None,
    ) -> list[CandidateHit]:
        record = self.record(name)
        if vector is not None:
            if query_identity is None:
                raise SamespaceError("a query vector needs the identity of the encoder that produced it")
            require_same_space(name, record.identity, query_identity)
        elif record.identity.chunk_text_version != CHUNK_TEXT_VERSION:
            raise EncoderMismatch(name, record.identity.space_id, f"chunk text version {CHUNK_TEXT_VERSION}")
        per_leg = max(limit, params.candidates)
        return self._store.query(
            record.build, vector=vector, keywords=keywords, limit=per_leg, filter=filter, definitions=definitions
        )

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
