"""The index: a catalogue of builds guarded by encoder space (staged, switched atomically), who may
read each index (`index.acl`), the row payload schema, a search as one value, the incremental plan,
progress, sparse keywords and identifier tokens, and the vector store (Edge or Qdrant)."""

from __future__ import annotations

from cluster.index.access import ANONYMOUS_READER, UNRESTRICTED_READER, IndexAcl, ReadableFilter
from cluster.index.carry import CarriedRow, CarryResult, carry_rows, chunk_point
from cluster.index.catalog import (
    IndexCatalog,
    PointKey,
    embed_hash,
    path_prefixes,
    point_id,
    point_key,
    point_payload,
)
from cluster.index.controls import controls_filter
from cluster.index.fusion import ALSO_IN
from cluster.index.globs import Glob, check_glob, compile_glob, path_selector
from cluster.index.history_store import CommitHit, HistoryState, HistoryStore, commit_text
from cluster.index.incremental import PlanMode, ReindexPlan, ReusableRows, full_reason, plan_reindex, reusable_rows
from cluster.index.keywords import chunk_keywords, query_keywords
from cluster.index.payload import CATEGORIES_FIELD, KEYWORD_FIELDS, REFS_FIELD, RowPayload, with_source
from cluster.index.progress_meter import ProgressMeter
from cluster.index.query import SearchMode, SearchQuery, query_filter
from cluster.index.records import (
    BuildProgress,
    BuildState,
    IndexRecord,
    export_folder,
    exports_root,
    index_of,
    new_build_id,
    validate_index_name,
)
from cluster.index.representations import name_text
from cluster.index.scope import GROUP_PREFIX, resolve_scope
from cluster.index.store.edge import EdgeStore
from cluster.index.store.edge_indexing import edge_search_params
from cluster.index.store.edge_pool import edge_shards
from cluster.index.store.engines import open_vector_store
from cluster.index.store.protocol import VectorStore
from cluster.index.tokens import IDENTIFIER, identifier_tokens

__all__ = [
    "ALSO_IN",
    "ANONYMOUS_READER",
    "CATEGORIES_FIELD",
    "GROUP_PREFIX",
    "IDENTIFIER",
    "KEYWORD_FIELDS",
    "REFS_FIELD",
    "UNRESTRICTED_READER",
    "BuildProgress",
    "BuildState",
    "CarriedRow",
    "CarryResult",
    "CommitHit",
    "EdgeStore",
    "Glob",
    "HistoryState",
    "HistoryStore",
    "IndexAcl",
    "IndexCatalog",
    "IndexRecord",
    "PlanMode",
    "PointKey",
    "ProgressMeter",
    "ReadableFilter",
    "ReindexPlan",
    "ReusableRows",
    "RowPayload",
    "SearchMode",
    "SearchQuery",
    "VectorStore",
    "carry_rows",
    "check_glob",
    "chunk_keywords",
    "chunk_point",
    "commit_text",
    "compile_glob",
    "controls_filter",
    "edge_search_params",
    "edge_shards",
    "embed_hash",
    "export_folder",
    "exports_root",
    "full_reason",
    "identifier_tokens",
    "index_of",
    "name_text",
    "new_build_id",
    "open_vector_store",
    "path_prefixes",
    "path_selector",
    "plan_reindex",
    "point_id",
    "point_key",
    "point_payload",
    "query_filter",
    "query_keywords",
    "resolve_scope",
    "reusable_rows",
    "validate_index_name",
    "with_source",
]
