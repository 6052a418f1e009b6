"""The MCP resources of a replica under `index.acl`, through the `mcp` client in process, as a reader of
group A: the list, the status resources, reads of a status or a file, completion of index names and
file paths, and subscription events concern only the indexes it may read; a URI of another group's
index is answered as one of an unknown index. The index actor's reads are its own, in process over a
real catalogue; the subscription bus filters each stream by the caller that opened it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import ResourcesListChanged, ResourceUpdated, ServerEvent
from mcp.shared.exceptions import MCPError
from mcp.types import PromptReference, ResourceTemplateReference

from cluster.auth import Principal, acting_as
from cluster.index import IndexAcl, IndexCatalog
from cluster.search import FILE_TEMPLATE, INDEXES_URI, status_uri
from serve_apps.mcp._resources import ReaderBus, ResourceFeed
from serve_apps.mcp._tools import build_mcp_server
from tests.support.in_process_index import InProcessIndex
from tests.support.index_access import ANN, BEN, SETTINGS, SHARED, indexed, service_over
from tests.support.search_controls import build

ACL = IndexAcl(SETTINGS.index.acl, SETTINGS.limits)


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[IndexCatalog]:
    store, catalog = indexed(tmp_path)
    yield catalog
    store.close()


@pytest.fixture
def feed(catalog: IndexCatalog) -> ResourceFeed:
    return ResourceFeed(service_over(InProcessIndex(catalog, SETTINGS)), period_s=0.05, acl=ACL)


@pytest.fixture
def server(feed: ResourceFeed, catalog: IndexCatalog) -> MCPServer:
    return build_mcp_server(service_over(InProcessIndex(catalog, SETTINGS)), cast(Any, None), None, feed)


@contextlib.asynccontextmanager
async def connected(server: MCPServer, principal: Principal) -> AsyncIterator[Client]:
    """A client whose server runs as `principal` (the HTTP guard's doing on a replica)."""
    with acting_as(principal):
        async with Client(server) as client:
            yield client


async def read(client: Client, uri: str) -> str:
    return str(getattr((await client.read_resource(uri)).contents[0], "text", ""))


async def refusal(client: Client, uri: str) -> str:
    with pytest.raises(MCPError) as refused:
        await client.read_resource(uri)
    return str(refused.value)


async def test_the_list_reads_and_completions_hold_only_the_readable_indexes(server: MCPServer) -> None:
    file_ref = ResourceTemplateReference(uri=FILE_TEMPLATE)
    async with connected(server, ANN) as client:
        listed = {r.uri for r in (await client.list_resources()).resources}
        indexes = await read(client, INDEXES_URI)
        alpha = await read(client, status_uri("alpha"))
        beta_status = await refusal(client, status_uri("beta"))
        nope_status = await refusal(client, status_uri("nope"))
        beta_file = await refusal(client, "samespace://index/beta/file/src/billing.py")
        nope_file = await refusal(client, "samespace://index/nope/file/src/billing.py")
        names = await client.complete(file_ref, {"name": "name", "value": ""})
        repos = await client.complete(PromptReference(name="explain_symbol"), {"name": "repo", "value": "b"})
        paths = await client.complete(file_ref, {"name": "path", "value": "src/"}, context_arguments={"name": "beta"})
        own = await client.complete(file_ref, {"name": "path", "value": "src/"}, context_arguments={"name": "alpha"})
    assert listed == {INDEXES_URI, status_uri("alpha")}
    assert '"alpha"' in indexes and "beta" not in indexes and '"alpha"' in alpha
    assert beta_status == nope_status.replace("nope", "beta")
    assert beta_file == nope_file.replace("nope", "beta") and "indexed repos: alpha" in beta_file
    assert names.completion.values == ["alpha"] and repos.completion.values == []
    assert paths.completion.values == [] and "src/billing.py" in own.completion.values
    async with connected(server, SHARED) as client:
        everyone = {r.uri for r in (await client.list_resources()).resources}
        assert "beta" in await read(client, status_uri("beta"))
    assert everyone == {INDEXES_URI, status_uri("alpha"), status_uri("beta")}


async def test_a_subscription_hears_only_of_the_indexes_its_caller_may_read(
    server: MCPServer, catalog: IndexCatalog, tmp_path: Path
) -> None:
    asked = {"resource_subscriptions": [INDEXES_URI, status_uri("alpha"), status_uri("beta")]}
    async with (
        connected(server, ANN) as client,
        client.listen(resources_list_changed=True, **asked) as subscription,
    ):
        build(catalog, "beta", tmp_path / "beta")  # a new build of beta: nothing ann may hear of
        build(catalog, "beta-2", tmp_path / "beta")  # an index of group B comes
        await asyncio.sleep(0.4)  # several polls
        quiet = list(subscription._route._pending)  # noqa: SLF001  the client has no public peek
        build(catalog, "alpha", tmp_path / "alpha")
        heard = []
        async with asyncio.timeout(5):
            while len(heard) < 2:
                heard.append(await anext(subscription))
        await asyncio.sleep(0.2)
        heard += list(subscription._route._pending)  # noqa: SLF001
    assert quiet == []
    assert [type(e).__name__ for e in heard] == ["ResourceUpdated", "ResourceUpdated"]
    assert {e.uri for e in heard} == {INDEXES_URI, status_uri("alpha")}


async def test_the_bus_holds_each_stream_with_the_reader_that_opened_it() -> None:
    bus = ReaderBus(ACL)
    heard: dict[str, list[ServerEvent]] = {"ann": [], "ben": [], "shared": []}
    for who, principal in (("ann", ANN), ("ben", BEN), ("shared", SHARED)):
        with acting_as(principal):
            bus.subscribe(heard[who].append)
    await bus.publish_about(ResourceUpdated(uri=INDEXES_URI), ["beta", "beta-2"])
    await bus.publish(ResourceUpdated(uri=status_uri("beta")))  # its index read from the URI
    await bus.publish_about(ResourcesListChanged(), ["alpha"])
    await bus.publish(ResourcesListChanged())  # about no index: every stream
    assert heard["ann"] == [ResourcesListChanged(), ResourcesListChanged()]
    assert len(heard["ben"]) == 3 and len(heard["shared"]) == 4
