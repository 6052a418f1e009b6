"""What the per-index access tests share: one tree indexed twice into a real catalogue, 'alpha'
readable by group A and 'beta' by group B (`index.acl`), the callers (ann of group A, ben of group B,
the shared token's caller who reads every index), and a search service over the index actor's own
reads in process (`InProcessIndex`) with a fixed query vector and no reranker; the chat roles of an ask
as scripted dispatchers whose RLM looks everything up, naming 'beta' wherever a tool takes a repo."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np

from cluster.auth import Principal
from cluster.cloud.openai_wire import ChatResult, ToolCall
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


class _Remote:
    def __init__(self, fn: Callable[..., Awaitable[Any]]) -> None:
        self.remote = fn


class ScriptedDispatcher:
    """A chat role's dispatcher (`chat.remote`, `context_window.remote`) answering with `reply`; every
    request is kept."""

    def __init__(self, reply: Callable[[dict[str, Any]], ChatResult]) -> None:
        self.requests: list[dict[str, Any]] = []

        async def chat(**request: Any) -> tuple[ChatResult, str]:
            self.requests.append(request)
            return reply(request), "scripted"

        async def window(reserve: bool) -> int:
            return 32768

        self.chat = _Remote(chat)
        self.context_window = _Remote(window)


def rlm_reply(request: dict[str, Any]) -> ChatResult:
    """Plan: two searches; round 1: every kind of look-up, beta named where a repo can be; then a draft."""
    if "tools" not in request:
        plan = {
            "subQuestions": [
                {"tool": "search_code", "query": "invoice total"},
                {"tool": "search_symbols", "query": "Invoice"},
            ]
        }
        return ChatResult(content=json.dumps(plan))
    if request.get("tool_choice") == "none":
        return ChatResult(content="Draft: see src/billing.py")
    calls = {
        "search_files": {"query": "billing"},
        "search_symbols": {"query": "charge_card"},
        "read_range": {"repo": "beta", "path": "src/billing.py", "start_line": 1, "end_line": 5},
        "neighbors": {"repo": "beta", "path": "src/billing.py", "line": 6, "count": 1},
        "repo_overview": {"repo": "beta"},
        "search_commits": {"query": "invoice"},
        "what_changed": {"since": "7d"},
    }
    return ChatResult(
        tool_calls=[ToolCall(id=f"c{i}", name=n, arguments=json.dumps(a)) for i, (n, a) in enumerate(calls.items())]
    )


def assistant_reply(request: dict[str, Any]) -> ChatResult:
    return ChatResult(content="Invoice.total sums the lines (src/billing.py:6-9).")
