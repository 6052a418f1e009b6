"""The MCP surface through other clients than ours, on real Ray + Serve over HTTP: the official
TypeScript SDK (tests/support/node/sdk_client.mjs) sees what the Python SDK sees, with the bearer token,
and is refused without it; and the MCP conformance suite's server scenarios pass, each that applies to
samespace (the table below says which do not, and why).

The clients compare on one small index (tests/fixtures/polyglot) in a namespace of its own, served with
`serve.token`. The conformance suite runs against the session's MCP app (no token: the suite sends no
Authorization header, and its DNS rebinding scenario is for servers "without authentication"); none of its
scenarios reads an index."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import ray
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import SecretStr

from samespace.clients import call_tool
from tests.support.node_clients import conformance, sdk_client, sdk_client_failure
from tests.support.ray_cluster import FIXTURES, McpServer, RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(900)]

NAMESPACE = "clients"
INDEX = "clients-poly"
TOKEN = "clients-e2e-serve-token-5d1c"
GUARDED = "/clients"
CALLS: list[dict[str, Any]] = [
    {"name": "index_status", "arguments": {"repo": INDEX}},
    {
        "name": "search_code",
        "arguments": {"query": "retry a failing call with exponential backoff", "k": 3, "repo": INDEX},
    },
    {"name": "grep_code", "arguments": {"pattern": "func RetryWithBackoff", "repo": INDEX}},
    {"name": "read_code", "arguments": {"repo": INDEX, "path": "cmd/server.go", "start_line": 9, "end_line": 12}},
    {"name": "read_code", "arguments": {"repo": INDEX, "path": "no/such/file.py", "start_line": 1, "end_line": 1}},
]
READS = [
    "samespace://indexes",
    f"samespace://index/{INDEX}/status",
    f"samespace://index/{INDEX}/file/cmd/server.go",
    f"samespace://index/{INDEX}/file/no/such/file.go",
]
PROMPTS: list[dict[str, Any]] = [
    {"name": "explain_symbol", "arguments": {"symbol": "RetryWithBackoff", "repo": INDEX}},
    {"name": "find_behaviour", "arguments": {"behaviour": "retry with exponential backoff", "repo": INDEX}},
]

# The server scenarios of @modelcontextprotocol/conformance 0.1.16 (tests/support/node/package-lock.json),
# its active suite. Each applies to every MCP server ...
GENERIC = frozenset({"server-initialize", "ping", "tools-list", "dns-rebinding-protection"})
# ... or to one that declares the capability at this path of its `initialize` answer ...
BY_CAPABILITY = {
    "resources-list": ("resources",),
    "prompts-list": ("prompts",),
    "logging-set-level": ("logging",),
    "completion-complete": ("completions",),
    "resources-subscribe": ("resources", "subscribe"),
    "resources-unsubscribe": ("resources", "subscribe"),
}
# ... or needs a fixture of the suite's "everything" server, by name (not applicable: samespace has none) ...
NAMED_FIXTURES = {
    "tools-call-simple-text": "tool test_simple_text",
    "tools-call-image": "tool test_image_content",
    "tools-call-audio": "tool test_audio_content",
    "tools-call-embedded-resource": "tool test_embedded_resource",
    "tools-call-mixed-content": "tool test_multiple_content_types",
    "tools-call-with-logging": "tool test_tool_with_logging",
    "tools-call-error": "tool test_error_handling",
    "tools-call-with-progress": "tool test_tool_with_progress",
    "tools-call-sampling": "tool test_sampling",
    "tools-call-elicitation": "tool test_elicitation",
    "elicitation-sep1034-defaults": "tool test_elicitation_sep1034_defaults",
    "elicitation-sep1330-enums": "tool test_elicitation_sep1330_enums",
    "resources-read-text": "resource test://static-text",
    "resources-read-binary": "resource test://static-binary",
    "resources-templates-read": "resource template test://template/{id}/data",
    "prompts-get-simple": "prompt test_simple_prompt",
    "prompts-get-with-args": "prompt test_prompt_with_arguments",
    "prompts-get-embedded-resource": "prompt test_prompt_with_embedded_resource",
    "prompts-get-with-image": "prompt test_prompt_with_image",
}
# ... or needs sessions (an mcp-session-id), where samespace serves stateless HTTP.
STATEFUL = frozenset({"server-sse-multiple-streams"})


@pytest.fixture(scope="module")
def served(ray_cluster: RayCluster, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The MCP endpoint of a one-replica app that serves the index with a bearer token."""
    from ray import serve

    from actors.build_ports import run_reindex
    from cluster.settings import SamespaceSettings
    from serve_apps.mcp import McpIngress

    repo = tmp_path_factory.mktemp("clients-repo") / "polyglot"
    shutil.copytree(FIXTURES / "polyglot", repo)
    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": tmp_path_factory.mktemp("clients-data")},
        limits={"status_git_period_s": 3600},  # both clients read one staleness check: index_status compares equal
    )
    run_reindex(settings, repo, INDEX, emit=lambda line: None)
    guarded = settings.model_copy(update={"serve": settings.serve.model_copy(update={"token": SecretStr(TOKEN)})})
    serve.run(McpIngress.options(num_replicas=1).bind(guarded), name="clients", route_prefix=GUARDED)
    try:
        yield f"http://127.0.0.1:{mcp_server.port}{GUARDED}/mcp/"
    finally:
        serve.delete("clients")
        for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
            ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


def dumped(items: list[Any]) -> list[dict[str, Any]]:
    return [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in items]


async def python_view(url: str, token: str | None) -> dict[str, Any]:
    """What the Python SDK's client sees at `url`: capabilities and every page of each listing."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        view: dict[str, Any] = {
            "capabilities": client.server_capabilities.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
        for key, list_page, field in [
            ("tools", client.list_tools, "tools"),
            ("resources", client.list_resources, "resources"),
            ("resourceTemplates", client.list_resource_templates, "resource_templates"),
            ("prompts", client.list_prompts, "prompts"),
        ]:
            items: list[Any] = []
            cursor = None
            while True:
                page = await list_page(cursor=cursor)
                items += getattr(page, field)
                cursor = page.next_cursor
                if cursor is None:
                    break
            view[key] = dumped(items)
        return view


async def test_the_typescript_sdk_sees_the_tools_and_answers_the_python_sdk_sees(served: str) -> None:
    typescript = sdk_client(served, CALLS, TOKEN, READS, PROMPTS)
    python = await python_view(served, TOKEN)
    # Each SDK speaks its newest protocol (the capabilities the server declares differ between them).
    assert (typescript["protocolVersion"], typescript["serverInfo"]["name"]) == ("2025-11-25", "samespace")
    assert [t["name"] for t in typescript["tools"]] == [t["name"] for t in python["tools"]]
    assert {"index_status", "search_code", "grep_code", "read_code"} <= {t["name"] for t in typescript["tools"]}
    assert typescript["tools"] == python["tools"]  # descriptions, input and output schemas, annotations
    for key in ("resources", "resourceTemplates", "prompts"):  # whatever the server offers, both see it alike
        assert typescript[key] == python[key], key
    for call in typescript["calls"]:
        ours = await call_tool(served, call["name"], call["arguments"], token=SecretStr(TOKEN))
        assert call["result"].get("isError", False) == ours.is_error, call
        assert call["result"].get("structuredContent") == ours.structured_content, call
        assert call["result"]["content"] == dumped(ours.content), call
    status, search, grep, read, missing = (call["result"] for call in typescript["calls"])
    assert [i["repo"] for i in status["structuredContent"]["indexes"]] == [INDEX]
    assert ("cmd/server.go", "RetryWithBackoff") in {
        (h["path"], h["symbol"]) for h in search["structuredContent"]["hits"]
    }
    assert [(m["path"], m["line"]) for m in grep["structuredContent"]["matches"]] == [("cmd/server.go", 10)]
    assert read["structuredContent"]["text"].splitlines()[1].startswith("func RetryWithBackoff")
    assert missing["isError"] and "not an indexed file" in missing["content"][0]["text"]


async def test_the_typescript_sdk_reads_the_resources_and_gets_the_prompts_the_python_sdk_does(served: str) -> None:
    typescript = sdk_client(served, [], TOKEN, READS, PROMPTS)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(served, http_client=http)) as client,
    ):
        for read in typescript["reads"][:-1]:
            ours = await client.read_resource(read["uri"])
            assert read["result"]["contents"] == dumped(ours.contents), read["uri"]
        for got in typescript["prompts_got"]:
            ours_prompt = await client.get_prompt(got["name"], got["arguments"])
            assert got["result"]["messages"] == dumped(ours_prompt.messages), got["name"]
    indexes, status, source, refused = (read["result"] for read in typescript["reads"])
    assert [i["name"] for i in json.loads(indexes["contents"][0]["text"])["indexes"]] == [INDEX]
    assert json.loads(status["contents"][0]["text"])["indexes"][0]["repo"] == INDEX
    assert source["contents"][0]["text"] == (FIXTURES / "polyglot" / "cmd" / "server.go").read_text()
    assert "error" in refused and "RetryWithBackoff" not in json.dumps(refused)
    explained = json.dumps(typescript["prompts_got"][0]["result"]["messages"])
    assert "cmd/server.go:" in explained  # a citation of the definition's real lines


def test_the_typescript_sdk_is_refused_without_the_token(served: str) -> None:
    for token in (None, f"{TOKEN}-not"):
        error = sdk_client_failure(served, token)
        assert "code: 401" in error and TOKEN not in error


def declared(capabilities: dict[str, Any], path: tuple[str, ...]) -> bool:
    value: Any = capabilities
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value not in (None, False)  # an empty object declares it too


def test_the_conformance_suite_server_scenarios_that_apply_pass(mcp_server: McpServer, tmp_path: Path) -> None:
    results = conformance(mcp_server.url, tmp_path)
    assert set(results) == GENERIC | set(BY_CAPABILITY) | set(NAMED_FIXTURES) | STATEFUL  # every scenario classified
    # What the server declares to the suite's client: the TypeScript SDK at the same protocol version.
    capabilities = sdk_client(mcp_server.url, [], None)["capabilities"]
    applicable = GENERIC | {name for name, path in BY_CAPABILITY.items() if declared(capabilities, path)}
    verdicts = {name: [check["status"] for check in results[name]] for name in applicable}
    failed = {
        name: [c.get("errorMessage") for c in results[name] if c["status"] != "SUCCESS"]
        for name, statuses in verdicts.items()
        if "SUCCESS" not in statuses or "FAILURE" in statuses
    }
    assert failed == {}
    assert {"resources-list", "prompts-list"} <= applicable  # the SDK declares both, listed or empty
