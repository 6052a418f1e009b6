"""A real MCP client for the samespace endpoint, behind `samespace search`, `ask`, `mcp-config` and `run`:
a sample query, and a paste-ready client config.

    mcp_command(["--url", "http://127.0.0.1:8000/mcp/", "where is retry with backoff"])
    mcp_command(["--url", "http://127.0.0.1:8000/mcp/", "--print-config"])

When the endpoint has a bearer token (`serve.token`: SAMESPACE_SERVE__TOKEN or
SAMESPACE_SERVE__TOKEN_FILE), the client sends it; `--print-config` then prints a header that
refers to ${SAMESPACE_SERVE__TOKEN}, never the token itself. `--token-file PATH` sends the token on
the first line of PATH instead (an OAuth access token under auth.mode oauth; with `--print-config`, a
header that refers to ${SAMESPACE_ACCESS_TOKEN}). Under auth.mode oauth the printed config has no
header: Claude Code and Cursor run the OAuth login themselves, from the 401 and the metadata it names.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.types import CallToolResult
from pydantic import AnyHttpUrl, SecretStr

from cluster.auth import AccessScope
from cluster.settings import AuthMode, SamespaceSettings, ServeSettings, load_settings
from samespace.failures import MCP_SURFACE, TOKEN_FILE_HINT, CommandFailed, refusal

__all__ = [
    "DEFAULT_URL",
    "call_tool",
    "client_config",
    "mcp_command",
    "metadata_url",
    "oauth_advice",
    "read_token_file",
    "result_text",
    "token_hint",
]

DEFAULT_URL = "http://127.0.0.1:8000/mcp/"
TOKEN_ENV = "SAMESPACE_SERVE__TOKEN"
ACCESS_TOKEN_ENV = "SAMESPACE_ACCESS_TOKEN"  # what a printed config names for a --token-file's token
MAX_TOKEN_CHARS = 16 * 1024  # a JWT access token is a few KiB; the first line is read up to this
# The SDK's own timeouts for streamable HTTP (mcp/shared/_httpx_utils.py): 30 s, 300 s to read a stream.
TIMEOUT = httpx2.Timeout(30.0, read=300.0)


async def call_tool(
    url: str, name: str, arguments: dict[str, Any] | None = None, *, token: SecretStr | None = None
) -> CallToolResult:
    """One stateless MCP call over streamable HTTP with the SDK's own client (bearer `token` if given).
    A 401 or 403 (a token refused, a scope missing) fails as such, one line saying what to do: the SDK
    itself words every refused request as the same 'error response'."""
    headers = {"Authorization": f"Bearer {token.get_secret_value()}"} if token is not None else {}
    refused: list[httpx2.Response] = []

    async def note(response: httpx2.Response) -> None:
        if response.status_code in (401, 403):
            refused.append(response)

    try:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=TIMEOUT, event_hooks={"response": [note]}) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            return await client.call_tool(name, arguments or {})
    except Exception:
        if refused:
            answer = refused[0]
            raise refusal(MCP_SURFACE, answer.status_code, answer.headers.get("WWW-Authenticate", "")) from None
        raise


def read_token_file(path: Path) -> SecretStr:
    """The token on the first line of `path`, a secret from here on (never printed); CommandFailed,
    one line naming the file and never its content, when it is missing, unreadable or empty."""
    try:
        with path.open(encoding="utf-8") as file:
            first = file.readline(MAX_TOKEN_CHARS)
    except FileNotFoundError:
        raise CommandFailed(f"no token file {path}", TOKEN_FILE_HINT) from None
    except UnicodeDecodeError:
        raise CommandFailed(f"the token file {path} is not text", TOKEN_FILE_HINT) from None
    except OSError as exc:
        raise CommandFailed(
            f"cannot read the token file {path} ({exc.strerror or type(exc).__name__})", TOKEN_FILE_HINT
        ) from None
    token = first.strip()
    if not token:
        raise CommandFailed(f"the token file {path} is empty (no token on its first line)", TOKEN_FILE_HINT)
    return SecretStr(token)


def client_config(url: str, *, token_required: bool = False, token_env: str = TOKEN_ENV) -> dict[str, Any]:
    """The `mcpServers` block Claude Code (.mcp.json) and Cursor (.cursor/mcp.json) read.

    With a token, the header names the environment variable that holds it (`token_env`), never its value.
    """
    server: dict[str, Any] = {"type": "http", "url": url}
    if token_required:
        server["headers"] = {"Authorization": f"Bearer ${{{token_env}}}"}
    return {"mcpServers": {"samespace": server}}


def metadata_url(resource: str) -> str:
    """The resource's protected-resource metadata, as the server names it in its 401 (RFC 9728 §3.1,
    the MCP SDK's `build_resource_metadata_url`): http://h/mcp -> http://h/.well-known/oauth-protected-resource/mcp."""
    return str(build_resource_metadata_url(AnyHttpUrl(resource)))


def oauth_advice(settings: SamespaceSettings) -> list[str]:
    """How to get an access token for this server under auth.mode oauth, for a person: the issuer,
    the resource (audience) to ask for, the scopes, the metadata, and the command that takes it."""
    audience = settings.audience
    resource = settings.resource_url
    asked = audience if audience == resource else f"{resource} (audience {audience})"
    scopes = (
        f"{AccessScope.READ.value} (search, ask), {AccessScope.INDEX.value} (index, refresh, remove), "
        f"{AccessScope.ADMIN.value} (the admin API)"
    )
    return [
        "This server takes OAuth access tokens (auth.mode oauth). To get one from your identity provider:",
        f"  issuer:    {settings.auth.issuer}",
        f"  resource:  {asked}",
        f"  scopes:    {scopes}",
        f"  metadata:  {metadata_url(resource)}",
        "Save the access token as the first line of a file (readable by you only), then:",
        '  samespace search --token-file PATH "where do we retry requests"',
        "Claude Code and Cursor run the login themselves from the config above (docs/auth.md).",
    ]


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


def _print_config(url: str, settings: SamespaceSettings, token_file: Path | None) -> None:
    """The client config on stdout; on stderr, where its token comes from (never the token)."""
    serve = settings.serve
    if token_file is not None:
        read_token_file(token_file)  # a missing or empty file fails here too (the token itself is not printed)
        print(json.dumps(client_config(url, token_required=True, token_env=ACCESS_TOKEN_ENV), indent=2))
        print(
            f"Set {ACCESS_TOKEN_ENV} where the MCP client runs: export {ACCESS_TOKEN_ENV}=$(head -n 1 {token_file})"
            f" (Claude Code expands ${{{ACCESS_TOKEN_ENV}}} in .mcp.json; Cursor spells it"
            f" ${{env:{ACCESS_TOKEN_ENV}}}).",
            file=sys.stderr,
        )
    elif settings.auth_mode is AuthMode.OAUTH:
        print(json.dumps(client_config(url), indent=2))
        print(
            "This endpoint takes OAuth access tokens: Claude Code and Cursor run the login themselves "
            f"(the 401 names {metadata_url(settings.resource_url)}).",
            file=sys.stderr,
        )
    else:
        token = serve.expected_token()
        print(json.dumps(client_config(url, token_required=token is not None), indent=2))
        if token is not None:
            print(token_hint(serve), file=sys.stderr)


def mcp_command(argv: list[str] | None = None) -> int:
    """Print the top hits of a query (`search_code`), or with `--print-config` the client config."""
    parser = argparse.ArgumentParser(prog="samespace")
    parser.add_argument("query", nargs="?", default="retry a call with exponential backoff")
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--repo", help="only this indexed repository (default: every index)")
    parser.add_argument("--print-config", action="store_true", help="print the MCP client config and exit")
    parser.add_argument("--token-file", type=Path, help="send the bearer token on this file's first line")
    args = parser.parse_args(argv)
    settings = load_settings()
    if args.print_config:
        _print_config(args.url, settings, args.token_file)
        return 0
    token = read_token_file(args.token_file) if args.token_file else settings.serve.expected_token()
    return asyncio.run(_demo(args.url, args.query, args.k, token, args.repo))
