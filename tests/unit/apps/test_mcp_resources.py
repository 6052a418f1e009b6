"""The MCP resources and prompts of a replica's server, through the `mcp` client in process: the list,
the templates, the three kinds read (a file typed by its language), every traversal refused, a status
subscription told of a new build (and of nothing it did not ask for), the stream's end stopping the
watch, completion, and the prompts' refusals as named errors. The index actor is a fake port whose
file reads go through the real confinement (`cluster.ingest.read_source_file`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import PromptReference, ResourceTemplateReference

from cluster.auth import Reader
from cluster.errors import IndexNotFound, ReadRefused
from cluster.graph import GraphAnswer, GraphQuery
from cluster.index import IndexRecord
from cluster.ingest import SourceLines, read_source_file
from cluster.search import FILE_TEMPLATE, INDEXES_URI, CodeSearchService, FileHit, status_uri
from cluster.space import EncoderIdentity
from serve_apps.mcp._resources import ResourceFeed
from serve_apps.mcp._tools import build_mcp_server

IDENTITY = EncoderIdentity(model="m", weights_sha256="a" * 64, width=4, max_seq_length=256)
TAX = "def tax(amount):\n    return amount * 2\n"


class FakeIndex:
    """The index actor's reads the resources use: its recorded state, and files read as it reads them
    (only the indexed ones, through the real confinement)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.records = {"shop": self.record("shop", "shop__b1"), "shop2": self.record("shop2", "shop2__b1")}
        self.indexed = {"src/tax.py", "README.md", "src/linked.py"}
        self.status_reads = 0

    def record(self, name: str, build: str) -> IndexRecord:
        return IndexRecord(
            name=name, build=build, repo_root=str(self.root), identity=IDENTITY, started_at=1.0, built_at=2.0, files=3
        )

    async def status(self, *, reader: Reader) -> dict[str, Any]:
        self.status_reads += 1
        indexes = [{"record": r, "space": r.identity.space_id} for r in self.records.values()]
        return {"indexes": indexes, "builds": {}, "history": {}}

    async def read_file(self, repo: str, path: str, *, reader: Reader) -> SourceLines:
        if repo not in self.records:
            raise IndexNotFound(repo, list(self.records))
        if path not in self.indexed:
            raise ReadRefused(repo, path, "not an indexed file of this repository")
        return read_source_file(repo, self.root, path, 1 << 20)

    async def search_files(self, repo: str | None, query: str, limit: int, *, reader: Reader) -> list[FileHit]:
        paths = sorted(p for p in self.indexed if query in p)
        return [
            FileHit(repo="shop", path=p, language="python", match="path", symbols=[], symbols_total=0) for p in paths
        ]

    async def navigate(self, query: GraphQuery, *, reader: Reader) -> GraphAnswer:
        return GraphAnswer(symbol=query.symbol, note="no such symbol")


@pytest.fixture
def index(tmp_path: Path) -> FakeIndex:
    root = tmp_path / "shop"
    (root / "src").mkdir(parents=True)
    (root / "src" / "tax.py").write_text(TAX)
    (root / "README.md").write_text("# shop\n")
    (tmp_path / "outside.py").write_text("SECRET = 'outside the repository'\n")
    os.symlink(tmp_path / "outside.py", root / "src" / "linked.py")  # listed as indexed: the read must still refuse
    return FakeIndex(root)


@pytest.fixture
def feed(index: FakeIndex) -> ResourceFeed:
    service = CodeSearchService(cast(Any, index), cast(Any, None), cast(Any, None), 10)
    return ResourceFeed(service, period_s=0.05, max_streams=1)


@pytest.fixture
def server(feed: ResourceFeed, index: FakeIndex) -> MCPServer:
    service = CodeSearchService(cast(Any, index), cast(Any, None), cast(Any, None), 10)
    return build_mcp_server(service, cast(Any, None), None, feed)


@contextlib.asynccontextmanager
async def connected(server: MCPServer) -> AsyncIterator[Client]:
    """A client in this test's task (an anyio task group is left in the task that entered it)."""
    async with Client(server) as client:
        yield client


async def read_text(client: Client, uri: str) -> tuple[str, str | None]:
    contents = (await client.read_resource(uri)).contents[0]
    return getattr(contents, "text", ""), contents.mime_type


async def test_the_list_holds_the_indexes_and_each_status_and_the_templates_the_file(server: MCPServer) -> None:
    async with connected(server) as client:
        listed = {r.uri: r.mime_type for r in (await client.list_resources()).resources}
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    statuses = dict.fromkeys(map(status_uri, ["shop", "shop2"]), "application/json")
    assert listed == {INDEXES_URI: "application/json", **statuses}
    assert templates == {"samespace://index/{name}/status", FILE_TEMPLATE}


async def test_the_three_kinds_read_as_json_and_as_the_files_own_text(server: MCPServer) -> None:
    async with connected(server) as client:
        listed, listed_mime = await read_text(client, INDEXES_URI)
        status, status_mime = await read_text(client, status_uri("shop"))
        tax = await read_text(client, "samespace://index/shop/file/src/tax.py")
        readme = await read_text(client, "samespace://index/shop/file/README.md")
    indexes = json.loads(listed)["indexes"]
    assert listed_mime == "application/json" and [i["name"] for i in indexes] == ["shop", "shop2"]
    assert indexes[0]["status_uri"] == status_uri("shop") and json.loads(listed)["file_template"] == FILE_TEMPLATE
    assert status_mime == "application/json" and [i["repo"] for i in json.loads(status)["indexes"]] == ["shop"]
    assert tax == (TAX, "text/x-python") and readme == ("# shop\n", "text/markdown")


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("samespace://index/shop/file/../outside.py", "Unknown resource"),
        ("samespace://index/shop/file/src/%2e%2e/%2e%2e/outside.py", "Unknown resource"),
        ("samespace://index/shop/file/%2Fetc%2Fpasswd", "Unknown resource"),
        ("samespace://index/shop/file/src//tax.py", "not a canonical path"),
        ("samespace://index/shop/file/src/linked.py", "path is outside the repository"),  # a symlink out of it
        ("samespace://index/shop/file/src/other.py", "not an indexed file"),
        ("samespace://index/nope/file/src/tax.py", "unknown repo 'nope'"),
        ("samespace://index/nope/status", "no index named 'nope'"),
        ("samespace://index/bad__bname/status", "invalid index name"),
    ],
)
async def test_a_read_outside_the_indexed_files_is_refused_saying_why(server: MCPServer, uri: str, says: str) -> None:
    async with connected(server) as client:
        with pytest.raises(MCPError) as refused:
            await client.read_resource(uri)
    assert says in str(refused.value) and "SECRET" not in str(refused.value)


async def test_a_status_subscription_hears_of_a_new_build_only_and_its_end_stops_the_watch(
    server: MCPServer, feed: ResourceFeed, index: FakeIndex
) -> None:
    events = []
    async with connected(server) as client:
        async with client.listen(resource_subscriptions=[status_uri("shop")]) as subscription:
            assert (feed.streams, feed.watch.running) == (1, True)
            with pytest.raises(MCPError, match="subscription limit reached"):  # max_streams=1 on this replica
                async with client.listen(resource_subscriptions=[INDEXES_URI]):
                    pass
            index.records["shop2"] = index.record("shop2", "shop2__b2")  # not subscribed to
            await asyncio.sleep(0.2)
            index.records["shop"] = index.record("shop", "shop__b2")
            async with asyncio.timeout(5):
                events.append(await anext(subscription))
            await asyncio.sleep(0.2)  # room for anything else the server would send
            events += _pending(subscription)
        await asyncio.sleep(0.05)
        reads = index.status_reads
        await asyncio.sleep(0.3)
    assert [e.uri for e in events] == [status_uri("shop")]  # not shop2's, not the list's: neither was asked for
    assert (feed.streams, feed.watch.running, index.status_reads) == (0, False, reads)


def _pending(subscription: Any) -> list[Any]:
    """The events the client holds for `subscription` and has not handed out yet."""
    return list(subscription._route._pending)  # noqa: SLF001  the client has no public peek


async def test_completion_offers_index_names_and_the_paths_of_an_indexs_files(server: MCPServer) -> None:
    template = ResourceTemplateReference(uri=FILE_TEMPLATE)
    async with connected(server) as client:
        names = await client.complete(template, {"name": "name", "value": "sh"})
        paths = await client.complete(template, {"name": "path", "value": "src/"}, context_arguments={"name": "shop"})
        repos = await client.complete(PromptReference(name="explain_symbol"), {"name": "repo", "value": "shop2"})
    assert names.completion.values == ["shop", "shop2"] and repos.completion.values == ["shop2"]
    assert paths.completion.values == ["src/linked.py", "src/tax.py"]


async def test_the_prompts_are_listed_and_a_refusal_is_a_named_error(server: MCPServer) -> None:
    async with connected(server) as client:
        prompts = {p.name: [a.name for a in p.arguments or []] for p in (await client.list_prompts()).prompts}
        with pytest.raises(MCPError, match="explain_symbol: no definition of 'nope' in the indexes"):
            await client.get_prompt("explain_symbol", {"symbol": "nope"})
        with pytest.raises(MCPError, match="explain_symbol: invalid prompt arguments: symbol: String should have"):
            await client.get_prompt("explain_symbol", {"symbol": "x" * 501})
    assert prompts == {
        "review_changes": ["repo", "base", "head"],
        "explain_symbol": ["symbol", "repo"],
        "changes_since": ["path", "since", "repo"],
        "find_behaviour": ["behaviour", "repo"],
    }
