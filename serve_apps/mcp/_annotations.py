"""Every MCP tool's title and behaviour hints (the spec's `ToolAnnotations`), in one table, and the server
that takes them from it: a tool registered without an entry is refused while the server is built.

The hints, as the MCP spec defines them (a client reads them as hints, never as guarantees):
- readOnlyHint: the tool does not modify its environment.
- destructiveHint (meaningful when not read-only): it may delete or overwrite; false: it only adds.
- idempotentHint (meaningful when not read-only): a repeated call with the same arguments has no
  additional effect on its environment.
- openWorldHint: it may interact with an "open world" of external entities (a web search is open, a
  memory is closed).

Every samespace tool works on a closed world: the indexes this cluster holds and the folders inside
`index.allowed_roots` they follow. A model a tool calls on the way (the query's encoder, ask_code's
retrieval and answering models, local or cloud) is the tool's instrument, not a world it reaches into:
the only tools ask_code's model may call are reads of the indexes (`RepoTools`), so what a tool can read
or change stays the indexes. Whether a question and its code may travel to a cloud model is each role's
policy (`cluster.roles.Policy`: local, cloud, ...), not a hint.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import Icon, ToolAnnotations

__all__ = ["TOOL_ANNOTATIONS", "AnnotatedMCPServer", "UnannotatedTool"]


def _read(title: str) -> ToolAnnotations:
    """A tool that only reads the indexes: nothing changes, so asking again is always safe. (Spending a
    model's budget or filling a query cache is a cost of the answer, not a change to the indexes.)"""
    return ToolAnnotations(
        title=title, read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )


def _build(title: str) -> ToolAnnotations:
    """index_repository, refresh_index: bring an index in line with the folder (and ref) it follows.

    Not destructive: an index is derived data, rebuilt from its folder at any time, and the folder is
    never written; a build drops rows only for what the folder dropped first, and one that would drop
    more than `ingest.max_shrink_share` of the serving index is refused (an MCP client's build never
    passes --allow-shrink). Idempotent: a second call while the index builds joins that build; after it,
    the build of an unchanged folder leaves the same index and the same registration, so a retry after a
    timeout is safe."""
    return ToolAnnotations(
        title=title, read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )


TOOL_ANNOTATIONS: Mapping[str, ToolAnnotations] = MappingProxyType(
    {
        "search_code": _read("Search code"),
        "grep_code": _read("Grep indexed files"),
        "read_code": _read("Read code lines"),
        "index_status": _read("Index status"),
        "ask_code": _read("Ask about the code"),
        "search_symbols": _read("Search symbols"),
        "search_files": _read("Search files"),
        "neighbors": _read("Neighbouring chunks"),
        "repo_overview": _read("Repository overview"),
        "find_definition": _read("Find definition"),
        "find_references": _read("Find references"),
        "callers": _read("Callers"),
        "callees": _read("Callees"),
        "impact": _read("Change impact"),
        "what_changed": _read("What changed"),
        "symbol_history": _read("Symbol history"),
        "search_commits": _read("Search commits"),
        "compare": _read("Compare refs"),
        "index_repository": _build("Index a repository"),
        "refresh_index": _build("Refresh an index"),
        # Drops the index's searchable rows, its registration and a build in progress: destructive (the
        # folder is untouched, but the index is gone until indexed again). Idempotent: removing it again
        # changes nothing more (the second call answers that the index does not exist).
        "remove_index": ToolAnnotations(
            title="Remove an index",
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    }
)


class UnannotatedTool(LookupError):
    """A tool registered without its entry in TOOL_ANNOTATIONS (or with hints of its own beside it)."""

    def __init__(self, tool: str, problem: str = "has no entry") -> None:
        super().__init__(tool, problem)
        self.tool = tool
        self.problem = problem

    def __str__(self) -> str:
        return (
            f"MCP tool {self.tool!r} {self.problem} in TOOL_ANNOTATIONS (serve_apps/mcp/_annotations.py): "
            "its title and hints live there, and only there"
        )


class AnnotatedMCPServer(MCPServer):
    """An `MCPServer` whose every tool takes its title and hints from TOOL_ANNOTATIONS. `@mcp.tool()`
    registers through `add_tool`, so the tools' decorators stay plain."""

    def add_tool(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: list[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        structured_output: bool | None = None,
    ) -> None:
        tool = name or fn.__name__  # the SDK's own rule for a tool's name
        if title is not None or annotations is not None:
            raise UnannotatedTool(tool, "brings its own title or hints instead of its entry")
        hints = TOOL_ANNOTATIONS.get(tool)
        if hints is None:
            raise UnannotatedTool(tool)
        super().add_tool(
            fn,
            name=name,
            title=hints.title,
            description=description,
            annotations=hints,
            icons=icons,
            meta=meta,
            structured_output=structured_output,
        )
