"""What the per-index access tests share: one tree indexed twice into a real catalogue, 'alpha'
readable by group A and 'beta' by group B (`index.acl`), the callers (ann of group A, ben of group B,
the shared token's caller who reads every index), and a search service over the index actor's own
reads in process (`InProcessIndex`) with a fixed query vector and no reranker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from cluster.auth import Principal
from cluster.index import IndexCatalog, VectorStore, open_vector_store
from cluster.search import CodeSearchService
from cluster.settings import SamespaceSettings
from tests.support.code_maps import IDENTITY, WIDTH
from tests.support.in_process_index import InProcessIndex
from tests.support.search_controls import build, write_tree

SETTINGS = SamespaceSettings(
    index={
        "acl": {"alpha": ["group:A"], "beta*": ["group:B"]},
        "groups": {"both": ["alpha", "beta"], "only-b": ["beta"]},
    }
)
READ = frozenset({"samespace:read"})
ANN = Principal(kind="oauth", subject="ann", groups=frozenset({"A"}), scopes=READ)
BEN = Principal(kind="oauth", subject="ben", groups=frozenset({"B"}), scopes=READ)
SHARED = Principal.shared("token")  # auth.mode token: no identity of its own, every index


class FixedEncoder:
    """The query path: one fixed vector for every text; no reranker serves."""

    async def encode_query(self, text: str, project: str) -> Any:
        return np.ones(WIDTH, dtype=np.float32) / np.sqrt(WIDTH), IDENTITY, "encoder"

    async def rerankers(self) -> bool:
        return False


class NoReranker:
    async def rerank(self, query: str, documents: list[str], project: str) -> tuple[list[float], str]:
        raise AssertionError("no reranker serves")


def indexed(root: Path, names: tuple[str, ...] = ("alpha", "beta")) -> tuple[VectorStore, IndexCatalog]:
    """A catalogue in `root` holding one tree under each name: every place of one is a place of the others."""
    store = open_vector_store("embedded", data_dir=root / "edge", url=None)
    catalog = IndexCatalog(store)
    for name in names:
        build(catalog, name, write_tree(root / name))
    return store, catalog


def service_over(index: InProcessIndex, settings: SamespaceSettings = SETTINGS) -> CodeSearchService:
    return CodeSearchService(index, FixedEncoder(), NoReranker(), 10, limits=settings.limits)
