"""Quotas per person through the real BudgetActor on a real cluster: one OAuth subject over its rate
(`quotas.requests_per_minute`) gets a clear tool error, while another subject keeps searching a real
index; every call of both is in the audit log with its caller and outcome.

The MCP server is the replica's own (`build_mcp_server` over the real search service and actors), driven
in process by the `mcp` package's client as each caller (`acting_as`: what the HTTP guard sets per
request); the budget actor runs in a namespace of its own, with a rate of 3 calls a minute."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import pytest
import ray
from mcp import Client
from mcp.server.mcpserver import MCPServer

from cluster.auth import AuditLog, AuditQuery, Principal, acting_as
from cluster.settings import AuditSettings, SamespaceSettings
from tests.support.jobs import reindex
from tests.support.ray_cluster import FIXTURES, RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.slow]

INDEX = "quota-poly"
NAMESPACE = "quotas-e2e"
RATE = 3
ALICE = Principal(kind="oauth", subject="alice", client_id="claude-code", scopes=frozenset({"samespace:read"}))
BOB = Principal(kind="oauth", subject="bob", client_id="cursor", scopes=frozenset({"samespace:read"}))


@dataclass
class Served:
    mcp: MCPServer
    audit: AuditLog
    budget: Any


@pytest.fixture(scope="module")
def served(ray_cluster: RayCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from actors import get_index_actor
    from actors.budget import get_budget_actor
    from actors.dispatcher import LazyDispatcher, get_dispatcher
    from actors.query_path import QueryPath
    from actors.search_ports import IndexActorPort, RerankerPort
    from cluster.roles import Role
    from cluster.search import CodeSearchService
    from serve_apps.mcp._calls import ToolCalls
    from serve_apps.mcp._tools import build_mcp_server

    repo = tmp_path_factory.mktemp("quotas") / "polyglot"
    shutil.copytree(FIXTURES / "polyglot", repo)
    reindex(ray_cluster, repo, INDEX)
    settings = ray_cluster.settings
    service = CodeSearchService(
        IndexActorPort(get_index_actor(settings)),
        QueryPath(get_dispatcher(settings, Role.CODE_EMBEDDING)),
        RerankerPort(LazyDispatcher(settings, Role.RERANKER)),
        settings.reranker.candidates,
        limits=settings.limits,
    )
    data = tmp_path_factory.mktemp("quotas-data")
    quota_settings = SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": data},
        admin={"config_path": data / "config.json"},
        quotas={"requests_per_minute": RATE},
    )
    budget = get_budget_actor(quota_settings)
    audit = AuditLog(data / "audit.jsonl", AuditSettings(), time.time)
    calls = ToolCalls(audit=audit, budget=lambda: budget, cloud=False)
    yield Served(build_mcp_server(service, cast(Any, None), None, None, calls), audit, budget)
    ray.kill(budget)


async def grep(mcp: MCPServer, principal: Principal, times: int) -> list[Any]:
    """`times` grep_code calls as `principal`, through the MCP client (one session: one caller)."""
    with acting_as(principal):
        async with Client(mcp) as client:
            return [await client.call_tool("grep_code", {"pattern": "def ", "repo": INDEX}) for _ in range(times)]


def text_of(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def test_a_subject_over_its_rate_is_refused_while_another_keeps_searching(served: Served) -> None:
    alice = await grep(served.mcp, ALICE, RATE + 1)
    assert [r.is_error for r in alice] == [False] * RATE + [True]
    refusal = text_of(alice[-1])
    assert "quota exceeded for 'alice'" in refusal and "quotas.requests_per_minute" in refusal and "retry in" in refusal

    bob = await grep(served.mcp, BOB, RATE)  # bob's share is his own: every call answers, with matches
    assert [r.is_error for r in bob] == [False] * RATE
    assert all(r.structured_content["matches"] for r in bob)
    assert (await grep(served.mcp, ALICE, 1))[0].is_error  # alice is still over her rate

    lines = served.audit.read(AuditQuery())
    assert [(r.subject, r.outcome) for r in lines if r.subject == "bob"] == [("bob", "ok")] * RATE
    assert [r.outcome for r in lines if r.subject == "alice"] == ["quota", "quota"] + ["ok"] * RATE
    assert {(r.action, r.client_id, r.kind) for r in lines if r.subject == "alice"} == {
        ("grep_code", "claude-code", "oauth")
    }
    assert all(INDEX in r.indexes for r in lines) and all(r.query is None for r in lines)
