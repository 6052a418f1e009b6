"""The simple competitor of `bench.search_load`: one process, FastAPI + the MCP SDK + MiniLM + numpy.

    python -m bench.single_process --repo DIR --port P

At start-up it chunks DIR as the reindex job does (`cluster.build.collect_chunks`), encodes each
chunk's embedding text (`cluster.space.embedding_text`) once with the packaged all-MiniLM-L6-v2
(`cluster.local.LocalEncoder`, offline) and keeps the rows in one numpy matrix. The MCP tool
`search_code(query, k)` encodes the query with the same encoder and returns the k rows with the
highest dot product of normalised vectors (cosine), found with `argpartition`. The MCP server is
built as samespace builds its own (serve_apps/mcp/_tools.py: `MCPServer`, stateless streamable HTTP,
JSON responses, mounted at /mcp, the session manager run in the app's lifespan); GET /healthz
answers once the index is in memory. One uvicorn worker; no Ray, no query cache, no keyword leg,
no reranker: the "100-line alternative" users will compare us with.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI
from pydantic import BaseModel

from cluster.build import collect_chunks
from cluster.local import LocalEncoder
from cluster.search import snippet_of
from cluster.settings import EmbeddingSettings, SamespaceSettings
from cluster.space import embedding_text
from cluster.types import Chunk

__all__ = ["Hit", "SearchResult", "VectorIndex", "build_app", "main"]

SERVER_NAME = "single-process"
MCP_ROUTE = "/mcp"
HEALTH_ROUTE = "/healthz"


class Hit(BaseModel):
    """One hit, with the fields of samespace's CodeHit that a reader uses (comparable JSON size)."""

    repo: str
    path: str
    start_line: int
    end_line: int
    symbol: str | None
    kind: str
    language: str
    score: float
    snippet: str


class SearchResult(BaseModel):
    query: str
    hits: list[Hit]


class VectorIndex:
    """Every chunk's normalised vector in one matrix; search is one matrix-vector product."""

    def __init__(self, repo: str, chunks: list[Chunk], encoder: LocalEncoder) -> None:
        self.repo = repo
        self.chunks = chunks
        self.encoder = encoder
        self.vectors = encoder.encode([embedding_text(c) for c in chunks])

    def search(self, query: str, k: int) -> list[Hit]:
        scores = self.vectors @ self.encoder.encode([query])[0]
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top])]
        return [self._hit(int(i), float(scores[i])) for i in top]

    def _hit(self, row: int, score: float) -> Hit:
        c = self.chunks[row]
        return Hit(
            repo=self.repo,
            path=c.path,
            start_line=c.start_line,
            end_line=c.end_line,
            symbol=c.symbol,
            kind=c.kind,
            language=c.language,
            score=score,
            snippet=snippet_of(c.text),
        )


def build_app(index: VectorIndex) -> FastAPI:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings

    mcp = MCPServer(SERVER_NAME, log_level="WARNING")  # as samespace: no rich log line per request

    @mcp.tool()
    def search_code(query: str, k: int = 10) -> SearchResult:
        """Code search by meaning: the k chunks closest to the query."""
        return SearchResult(query=query, hits=index.search(query, k))  # a sync tool: the SDK runs it in a thread

    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)  # loopback only
    mcp_asgi = mcp.streamable_http_app(
        streamable_http_path="/", stateless_http=True, json_response=True, transport_security=security
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp.session_manager.run():  # a mounted sub-app's lifespan is not run by FastAPI
            yield

    api = FastAPI(title=SERVER_NAME, lifespan=lifespan)

    @api.get(HEALTH_ROUTE)
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "chunks": len(index.chunks)}

    api.mount(MCP_ROUTE, mcp_asgi)
    return api


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.single_process")
    parser.add_argument("--repo", type=Path, required=True, help="the repository to index")
    parser.add_argument("--port", type=int, required=True, help="HTTP port on 127.0.0.1")
    parser.add_argument("--name", help="the repo name in hits (default: the folder's name)")
    args = parser.parse_args(argv)

    import uvicorn

    repo = args.repo.resolve()
    chunks, _, files = collect_chunks(repo, SamespaceSettings())
    index = VectorIndex(args.name or repo.name, chunks, LocalEncoder(EmbeddingSettings()))
    print(f"single process: {files} files, {len(chunks)} chunks encoded; serving on 127.0.0.1:{args.port}", flush=True)
    uvicorn.run(build_app(index), host="127.0.0.1", port=args.port, workers=1, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
