"""What every MCP tool tells a client before it is called: a title, the behaviour hints samespace promises
for it (read-only, destructive, idempotent, open world), and an outputSchema that is a JSON Schema.

Listed through the `mcp` package's own client, in process (no Ray): the wire a client reads. The hints
are stated here a second time, by what each tool does, independently of serve_apps/mcp/_annotations.py.
Every answer is validated against its schema on a real cluster: tests/e2e/test_history_e2e.py.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
from jsonschema import Draft202012Validator
from mcp import Client, types
from mcp.server.mcpserver import MCPServer

from cluster.settings import SamespaceSettings
from serve_apps.index_service import IndexService
from serve_apps.mcp._annotations import TOOL_ANNOTATIONS, AnnotatedMCPServer, UnannotatedTool
from serve_apps.mcp._tools import RemovedIndex, build_mcp_server
from tests.support.tool_schemas import answer_problems, schema_problems

READS = frozenset(
    {
        "search_code",
        "grep_code",
        "read_code",
        "index_status",
        "ask_code",
        "search_symbols",
        "search_files",
        "neighbors",
        "repo_overview",
        "find_definition",
        "find_references",
        "callers",
        "callees",
        "impact",
        "what_changed",
        "symbol_history",
        "search_commits",
        "compare",
    }
)
BUILDS = frozenset({"index_repository", "refresh_index"})  # bring an index in line with its folder
REMOVES = frozenset({"remove_index"})
HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def no_sync_actor() -> Any:
    raise AssertionError("listing the tools must not start the sync actor")


def server(with_index_tools: bool = True) -> MCPServer:
    """The replica's MCP server, without live services: listing its tools calls none of them."""
    indexes = IndexService(SamespaceSettings(), no_sync_actor) if with_index_tools else None
    return build_mcp_server(cast(Any, None), cast(Any, None), indexes)


async def listed(mcp: MCPServer) -> dict[str, types.Tool]:
    async with Client(mcp) as client:
        return {tool.name: tool for tool in (await client.list_tools()).tools}


def hints(tool: types.Tool) -> dict[str, Any]:
    """The tool's hints as the wire spells them (a hint left out would mean its default, the worst case)."""
    assert tool.annotations is not None, f"{tool.name} has no annotations"
    wire = tool.annotations.model_dump(by_alias=True, exclude_none=True)
    assert set(HINTS) <= set(wire), f"{tool.name} leaves hints to their defaults: {wire}"
    return {hint: wire[hint] for hint in HINTS}


async def test_every_tool_is_titled_and_hinted_as_what_it_does() -> None:
    tools = await listed(server())
    assert set(tools) == READS | BUILDS | REMOVES == set(TOOL_ANNOTATIONS)
    for name, tool in tools.items():
        assert tool.title and tool.annotations is not None and tool.annotations.title == tool.title, name
    read = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
    build = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
    remove = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False}
    assert {name: hints(tools[name]) for name in READS} == dict.fromkeys(READS, read)
    assert {name: hints(tools[name]) for name in BUILDS} == dict.fromkeys(BUILDS, build)
    assert {name: hints(tools[name]) for name in REMOVES} == dict.fromkeys(REMOVES, remove)
    assert len({tool.title for tool in tools.values()}) == len(tools)  # a client tells them apart by title


async def test_a_server_without_index_tools_lists_the_reads_hinted_the_same() -> None:
    tools = await listed(server(with_index_tools=False))
    assert set(tools) == READS
    assert all(hints(tool)["readOnlyHint"] is True for tool in tools.values())


async def test_every_tool_declares_an_output_schema_that_is_a_json_schema() -> None:
    tools = await listed(server())
    assert [problem for tool in tools.values() for problem in schema_problems(tool)] == []
    broken = tools["remove_index"].model_copy(update={"output_schema": {"type": "object", "required": "index"}})
    assert schema_problems(broken) != []  # the check refuses a schema JSON Schema refuses
    schema = tools["remove_index"].output_schema
    assert schema is not None
    validator = Draft202012Validator(schema)
    assert validator.is_valid(RemovedIndex(index="api", builds=["api-1"]).model_dump(mode="json"))
    assert not validator.is_valid({"index": "api"})  # the schema constrains: builds is required


def test_a_tool_without_its_entry_is_refused_while_the_server_is_built() -> None:
    mcp = AnnotatedMCPServer("t")

    async def unlisted_tool() -> RemovedIndex:
        return RemovedIndex(index="x", builds=[])

    with pytest.raises(UnannotatedTool, match="'unlisted_tool' has no entry in TOOL_ANNOTATIONS"):
        mcp.tool()(unlisted_tool)
    with pytest.raises(UnannotatedTool, match="'remove_index' brings its own title or hints"):
        mcp.tool(name="remove_index", title="Drop")(unlisted_tool)
    mcp.tool(name="remove_index")(unlisted_tool)  # an entry: registered with the table's title and hints


async def test_a_registered_tool_carries_its_entry_exactly() -> None:
    mcp = AnnotatedMCPServer("t")

    async def remove_index(name: str) -> RemovedIndex:
        return RemovedIndex(index=name, builds=[])

    mcp.tool()(remove_index)
    (tool,) = (await listed(mcp)).values()
    assert (tool.title, tool.annotations) == ("Remove an index", TOOL_ANNOTATIONS["remove_index"])


async def test_the_answer_check_refuses_an_answer_off_its_schema_or_without_its_text() -> None:
    """The check tests/e2e/test_history_e2e.py runs on every tool's answer, on answers built by hand."""
    tool = (await listed(server()))["remove_index"]
    answer = RemovedIndex(index="api", builds=["api-1"])

    def result(structured: dict[str, Any], text: str) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured)

    assert answer_problems(tool, result(answer.model_dump(mode="json"), answer.model_dump_json())) == []
    off_schema = answer_problems(
        tool, result({"index": "api", "builds": "api-1"}, '{"index": "api", "builds": "api-1"}')
    )
    assert off_schema == ["remove_index: builds: 'api-1' is not of type 'array'"]
    no_text = answer_problems(tool, result(answer.model_dump(mode="json"), "api removed"))
    assert len(no_text) == 1 and "the text block is not the structured answer" in no_text[0]
