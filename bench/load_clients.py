"""The MCP clients of the load benches: where each starts in the query list, its session, its token."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

__all__ = ["bearer_headers", "client_offsets", "mcp_session"]


def client_offsets(n_queries: int, n_clients: int) -> list[int]:
    """Where each client starts in the query list: spread evenly, so concurrent clients ask different things."""
    if n_queries < 1 or n_clients < 1:
        raise ValueError("need at least one query and one client")
    return [i * n_queries // n_clients for i in range(n_clients)]


@contextlib.asynccontextmanager
async def mcp_session(url: str, headers: Mapping[str, str], timeout_s: float) -> AsyncIterator[Any]:
    """One MCP SDK client session over streamable HTTP, every request sent with `headers`."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers=dict(headers), timeout=httpx2.Timeout(timeout_s)) as http,
        Client(streamable_http_client(url, http_client=http)) as session,
    ):
        yield session


def bearer_headers() -> dict[str, str]:
    """The MCP token the cluster expects, as a header; none when it expects none. The cluster reads
    the same SAMESPACE_* environment as this process."""
    from cluster.settings import load_settings

    token = load_settings().serve.expected_token()
    return {"Authorization": f"Bearer {token.get_secret_value()}"} if token is not None else {}
