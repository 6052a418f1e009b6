"""The MCP prompts of a replica (slash commands in a client), each built from the code tools' answers
with citations (`cluster.search.CodePrompts`): review_changes, explain_symbol, changes_since and
find_behaviour.

A prompt's arguments arrive as strings; they are checked by `cluster.search.prompt_arguments` (the
SDK's own check would hide the reason), and a refusal, or a lookup that finds nothing to build on,
is an MCP error saying which (invalid params), never a traceback.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer, UserMessage
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS
from pydantic import Field
from ray.exceptions import RayError

from cluster.errors import SamespaceError, original_error
from cluster.search import (
    ChangesArgs,
    CodePrompts,
    CodeSearchService,
    ExplainArgs,
    LocateArgs,
    PromptText,
    ReviewArgs,
    prompt_arguments,
)
from serve_apps.mcp._calls import cluster_unavailable

ArgsT = TypeVar("ArgsT", ReviewArgs, ExplainArgs, ChangesArgs, LocateArgs)

RepoText = Annotated[
    str | None,
    Field(description="The indexed repo (see index_status), a glob or @group; empty: every index."),
]


def add_prompts(mcp: MCPServer, service: CodeSearchService) -> None:
    """review_changes, explain_symbol, changes_since and find_behaviour over `service`."""
    prompts = CodePrompts(service)

    @mcp.prompt(
        name="review_changes",
        title="Review a branch's changes",
        description="Review what differs between two refs of a repository: each changed symbol with its diff "
        "and its lines in the index, to answer with citations.",
    )
    async def review_changes(
        repo: Annotated[str, Field(description="The indexed repo (see index_status).")],
        base: Annotated[str, Field(description="The older ref: the branch's base (main, a tag, a sha).")],
        head: Annotated[str | None, Field(description="The newer ref; empty: HEAD.")] = None,
    ) -> list[UserMessage]:
        values = {"repo": repo, "base": base, "head": head}
        return await _brief("review_changes", ReviewArgs, values, prompts.review_changes)

    @mcp.prompt(
        name="explain_symbol",
        title="Explain a symbol and its callers",
        description="Explain a function, class or method: its code and every call site, with citations.",
    )
    async def explain_symbol(
        symbol: Annotated[str, Field(description="A bare or qualified name: parse_config, TaxTable.lookup.")],
        repo: RepoText = None,
    ) -> list[UserMessage]:
        return await _brief("explain_symbol", ExplainArgs, {"symbol": symbol, "repo": repo}, prompts.explain_symbol)

    @mcp.prompt(
        name="changes_since",
        title="What changed in an area since a date",
        description="What changed under a folder or file since a date, a duration (7d) or a ref: each symbol, "
        "its commit and why, with citations.",
    )
    async def changes_since(
        path: Annotated[str, Field(description="A folder or file of the repository, e.g. src/billing.")],
        since: Annotated[str, Field(description="A date (2026-11-01), a duration back (7d, 2w) or a ref.")],
        repo: RepoText = None,
    ) -> list[UserMessage]:
        values = {"path": path, "since": since, "repo": repo}
        return await _brief("changes_since", ChangesArgs, values, prompts.changes_since)

    @mcp.prompt(
        name="find_behaviour",
        title="Find where a behaviour is implemented",
        description="Find the code that implements a behaviour described in words, with citations.",
    )
    async def find_behaviour(
        behaviour: Annotated[str, Field(description="What the code does, e.g. 'retries a failed upload'.")],
        repo: RepoText = None,
    ) -> list[UserMessage]:
        values = {"behaviour": behaviour, "repo": repo}
        return await _brief("find_behaviour", LocateArgs, values, prompts.find_behaviour)


async def _brief(
    name: str, model: type[ArgsT], values: dict[str, Any], build: Callable[[ArgsT], Awaitable[PromptText]]
) -> list[UserMessage]:
    """The prompt's one user message; an argument refused or a failed lookup as an MCP error saying why."""
    try:
        brief = await build(prompt_arguments(model, values))
    except SamespaceError as exc:
        raise MCPError(INVALID_PARAMS, f"{name}: {original_error(exc)}") from exc
    except RayError as exc:
        raise MCPError(INTERNAL_ERROR, f"{name}: {cluster_unavailable(exc)}") from exc
    return [UserMessage(brief.text)]
