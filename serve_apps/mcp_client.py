"""A real MCP client for the samespace endpoint: a sample query, and a paste-ready client config.

    python -m serve_apps.mcp_client --url http://127.0.0.1:8000/mcp/ "where is retry with backoff"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from mcp import Client
from mcp.types import CallToolResult

DEFAULT_URL = "http://127.0.0.1:8000/mcp/"


async def call_tool(url: str, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
    """One stateless MCP call over streamable HTTP with the SDK's own client."""
    async with Client(url) as client:
        return await client.call_tool(name, arguments or {})


def client_config(url: str) -> dict[str, Any]:
    """The `mcpServers` block Claude Code (.mcp.json) and Cursor (.cursor/mcp.json) read."""
    return {"mcpServers": {"samespace": {"type": "http", "url": url}}}


def result_text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def _demo(url: str, query: str, k: int) -> int:
    result = await call_tool(url, "search_code", {"query": query, "k": k})
    if result.is_error:
        print(f"search_code failed: {result_text(result)}", file=sys.stderr)
        return 1
    hits = (result.structured_content or {}).get("hits", [])
    print(f"top {len(hits)} hits for {query!r}:")
    for rank, hit in enumerate(hits, 1):
        symbol = f" {hit['symbol']}" if hit.get("symbol") else ""
        print(f"  {rank}. {hit['score']:.3f}  {hit['repo']}:{hit['path']}:{hit['start_line']}-{hit['end_line']}{symbol}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve_apps.mcp_client")
    parser.add_argument("query", nargs="?", default="retry a call with exponential backoff")
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--print-config", action="store_true", help="print the MCP client config and exit")
    args = parser.parse_args(argv)
    if args.print_config:
        print(json.dumps(client_config(args.url), indent=2))
        return 0
    return asyncio.run(_demo(args.url, args.query, args.k))


if __name__ == "__main__":
    sys.exit(main())
