"""A real MCP client for the samespace endpoint, behind `samespace search`, `ask`, `mcp-config` and `run`:
a sample query, and a paste-ready client config.

    mcp_command(["--url", "http://127.0.0.1:8000/mcp/", "where is retry with backoff"])
    mcp_command(["--url", "http://127.0.0.1:8000/mcp/", "--print-config"])

When the endpoint has a bearer token (`serve.token`: SAMESPACE_SERVE__TOKEN or
SAMESPACE_SERVE__TOKEN_FILE), the client sends it; `--print-config` then prints a header that
refers to ${SAMESPACE_SERVE__TOKEN}, never the token itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from pydantic import SecretStr

from cluster.settings import ServeSettings, load_settings

__all__ = ["DEFAULT_URL", "call_tool", "client_config", "mcp_command", "result_text", "token_hint"]

DEFAULT_URL = "http://127.0.0.1:8000/mcp/"
TOKEN_ENV = "SAMESPACE_SERVE__TOKEN"
# The SDK's own timeouts for streamable HTTP (mcp/shared/_httpx_utils.py): 30 s, 300 s to read a stream.
TIMEOUT = httpx2.Timeout(30.0, read=300.0)


async def call_tool(
    url: str, name: str, arguments: dict[str, Any] | None = None, *, token: SecretStr | None = None
) -> CallToolResult:
    """One stateless MCP call over streamable HTTP with the SDK's own client (bearer `token` if given)."""
    headers = {"Authorization": f"Bearer {token.get_secret_value()}"} if token is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=TIMEOUT) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        return await client.call_tool(name, arguments or {})


def client_config(url: str, *, token_required: bool = False) -> dict[str, Any]:
    """The `mcpServers` block Claude Code (.mcp.json) and Cursor (.cursor/mcp.json) read.

    With a token, the header names the environment variable that holds it, never its value.
    """
    server: dict[str, Any] = {"type": "http", "url": url}
    if token_required:
        server["headers"] = {"Authorization": f"Bearer ${{{TOKEN_ENV}}}"}
    return {"mcpServers": {"samespace": server}}


def token_hint(serve: ServeSettings) -> str:
    """Where the token is, for the person pasting the config (never the token)."""
    if serve.token is None and serve.token_file is not None:
        where = f"in the file {serve.token_file}: export {TOKEN_ENV}=$(cat {serve.token_file})"
    else:
        where = f"the setting serve.token ({TOKEN_ENV}): export {TOKEN_ENV}"
    return (
        f"This endpoint needs a bearer token. It is {where} where the MCP client runs "
        f"(Claude Code expands ${{{TOKEN_ENV}}} in .mcp.json; Cursor spells it ${{env:{TOKEN_ENV}}})."
    )


def result_text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def _demo(url: str, query: str, k: int, token: SecretStr | None, repo: str | None = None) -> int:
    arguments: dict[str, Any] = {"query": query, "k": k} | ({"repo": repo} if repo else {})
    result = await call_tool(url, "search_code", arguments, token=token)
    if result.is_error:
        print(f"search_code failed: {result_text(result)}", file=sys.stderr)
        return 1
    hits = (result.structured_content or {}).get("hits", [])
    print(f"top {len(hits)} hits for {query!r}:")
    for rank, hit in enumerate(hits, 1):
        symbol = f" {hit['symbol']}" if hit.get("symbol") else ""
        print(
            f"  {rank}. {hit['score']:.3f}  {hit['repo']}:{hit['path']}:{hit['start_line']}-{hit['end_line']}{symbol}"
        )
    return 0


def mcp_command(argv: list[str] | None = None) -> int:
    """Print the top hits of a query (`search_code`), or with `--print-config` the client config."""
    parser = argparse.ArgumentParser(prog="samespace")
    parser.add_argument("query", nargs="?", default="retry a call with exponential backoff")
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--repo", help="only this indexed repository (default: every index)")
    parser.add_argument("--print-config", action="store_true", help="print the MCP client config and exit")
    args = parser.parse_args(argv)
    serve = load_settings().serve
    token = serve.expected_token()
    if args.print_config:
        print(json.dumps(client_config(args.url, token_required=token is not None), indent=2))
        if token is not None:
            print(token_hint(serve), file=sys.stderr)
        return 0
    return asyncio.run(_demo(args.url, args.query, args.k, token, args.repo))
