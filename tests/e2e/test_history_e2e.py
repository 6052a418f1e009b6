"""History through MCP on real Ray + Serve and the packaged model: a reindex of a scripted history
mines it, the `mcp` client asks what_changed, symbol_history and search_commits, and each answer is
checked against git; a reindex after one new commit mines that commit only, and the tools see it.
Over the same served index, every tool the server lists answers what its outputSchema declares."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import ray

from samespace.clients import call_tool, result_text
from tests.support.git_repos import git_repo
from tests.support.ray_cluster import McpServer, RayCluster
from tests.support.scripted_history import ScriptedRepo, build_shop_history, run_git
from tests.support.tool_schemas import answer_problems

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(900)]

NAMESPACE = "history"
REPO = "shop"
THROWAWAY = "throwaway"  # indexed, refreshed and removed through MCP by the schema test


@dataclass
class HistoryEnv:
    url: str
    shop: ScriptedRepo
    settings: Any
    roots: Path  # index.allowed_roots: where an MCP client may index
    log: list[str] = field(default_factory=list)

    async def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await call_tool(self.url, tool, arguments)
        assert not result.is_error, result_text(result)
        return dict(result.structured_content or {})

    def reindex(self) -> None:
        from actors.build_ports import run_reindex

        self.log.clear()
        run_reindex(self.settings, self.shop.root, REPO, emit=self.log.append)


@pytest.fixture(scope="module")
def env(
    ray_cluster: RayCluster, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HistoryEnv]:
    from ray import serve

    from cluster.settings import SamespaceSettings
    from serve_apps.mcp import McpIngress

    shop = build_shop_history(tmp_path_factory.mktemp("history-repo") / "shop")
    base = tmp_path_factory.mktemp("history")
    roots = base / "roots"
    roots.mkdir()
    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": base / "data"},
        admin={"config_path": base / "config.json"},  # the index tools' registrations: never ~/.samespace
        index={"allowed_roots": [roots]},
    )
    env = HistoryEnv(f"http://127.0.0.1:{mcp_server.port}/hist/mcp/", shop, settings, roots)
    env.reindex()
    serve.run(McpIngress.options(num_replicas=1).bind(settings), name="hist", route_prefix="/hist")
    try:
        yield env
    finally:
        serve.delete("hist")
        for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
            ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


async def test_symbol_history_is_git_line_log_through_a_rename_and_a_merge(env: HistoryEnv) -> None:
    answer = await env.ok("symbol_history", symbol="h2", repo=REPO)
    changed = [c["commit"] for c in answer["commits"] if c["lines"]]
    assert changed == env.shop.line_log("h2", "pkg/b.py")
    renamed = next(c for c in answer["commits"] if c["commit"] == env.shop.shas["h2"])
    assert (renamed["change"], renamed["previous_symbol"]) == ("renamed", "h")
    assert all(
        len(c["commit"]) == 40 and c["author"] == "t" and c["date"].startswith("2026-") for c in answer["commits"]
    )


async def test_what_changed_since_a_date_and_since_a_ref(env: HistoryEnv) -> None:
    answer = await env.ok("what_changed", since="2026-02-03", repo=REPO)
    assert {i["commit"] for i in answer["items"]} == set(env.shop.first_parents("--since=2026-02-03"))
    assert {(i["path"], i["symbol"], i["change"]) for i in answer["items"]} >= {
        ("pkg/util.py", "g", "modified"),
        ("pkg/c.py", "n", "added"),
    }
    since_ref = await env.ok("what_changed", since="main~2", repo=REPO)
    assert {i["commit"] for i in since_ref["items"]} == set(env.shop.first_parents("main~2..main"))
    assert since_ref["reach"][0]["commits"] >= 12
    refused = await call_tool(env.url, "what_changed", {"since": "no-such-branch", "repo": REPO})
    assert refused.is_error and "no-such-branch" in result_text(refused)


async def test_search_commits_finds_a_commit_by_its_subject_and_by_the_symbol_it_changed(env: HistoryEnv) -> None:
    by_subject = await env.ok("search_commits", query="Rename h to h2", repo=REPO, k=3)
    assert by_subject["hits"][0]["commit"] == env.shop.shas["h2"]
    by_meaning = await env.ok("search_commits", query="the cart method returns the number of items", repo=REPO, k=3)
    assert env.shop.shas["m1"] in [h["commit"] for h in by_meaning["hits"]]
    recent = await env.ok("search_commits", query="Rename h to h2", repo=REPO, since="2026-02-01", k=3)
    assert env.shop.shas["h2"] not in [h["commit"] for h in recent["hits"]]


async def test_one_new_commit_is_all_the_next_reindex_mines_and_the_tools_see_it(env: HistoryEnv) -> None:
    (env.shop.root / "pkg" / "c.py").write_text("def n(value):\n    return value * 10\n")
    run_git(env.shop.root, "commit", "-qam", "n multiplies by ten", date="2026-03-01T10:00:00Z")
    env.reindex()
    mined = [line for line in env.log if line.startswith("history: mined")]
    assert len(mined) == 1 and mined[0].startswith("history: mined 1 commits after"), env.log
    head = env.shop.git("rev-parse", "HEAD")
    answer = await env.ok("symbol_history", symbol="n", repo=REPO)
    assert [c["commit"] for c in answer["commits"] if c["lines"]] == env.shop.line_log("n", "pkg/c.py")
    assert answer["commits"][0]["commit"] == head
    found = await env.ok("search_commits", query="n multiplies by ten", repo=REPO, k=1)
    assert found["hits"][0]["commit"] == head


async def test_compare_two_refs_lists_the_symbols_with_their_diffs(env: HistoryEnv) -> None:
    answer = await env.ok("compare", base=env.shop.shas["m1"], head=env.shop.shas["f2"], repo=REPO)
    by_symbol = {(i["path"], i["symbol"]): i for i in answer["items"]}
    assert by_symbol[("pkg/core.py", "f")]["diff"] == "-    return price * 3\n+    return price * 4"
    assert by_symbol[("pkg/util.py", "g")]["change"] == "moved"
    assert answer["base"] == env.shop.shas["m1"] and ".env" not in answer["files"]


async def test_search_code_in_review_mode_searches_only_the_files_changed_since(env: HistoryEnv) -> None:
    everywhere = await env.ok("search_code", query="price factor", repo=REPO, k=10, rerank=False)
    assert "pkg/core.py" in {h["path"] for h in everywhere["hits"]}
    review = await env.ok("search_code", query="price factor", repo=REPO, k=10, rerank=False, changed_since="main~1")
    changed = set(env.shop.git("diff", "--name-only", "main~1", "main").split())
    assert review["hits"] and {h["path"] for h in review["hits"]} <= changed
    assert review["changed_files"] == len(changed)


def valid_calls(env: HistoryEnv) -> dict[str, dict[str, Any]]:
    """One call of each tool with valid arguments, over the shop; the index tools over a throwaway
    repository of their own, remove_index last."""
    throwaway = git_repo(env.roots / THROWAWAY, topics=("invoice",))
    return {
        "search_code": {"query": "multiply the price", "repo": REPO, "k": 3},
        "grep_code": {"pattern": "def ", "repo": REPO, "context_lines": 1},
        "read_code": {"repo": REPO, "path": "pkg/core.py", "start_line": 1, "end_line": 8},
        "index_status": {"repo": REPO},
        "ask_code": {"question": "What does f return?", "repo": REPO, "deep": False},  # no model: citations only
        "search_symbols": {"query": "h2", "repo": REPO},
        "search_files": {"query": "core", "repo": REPO},
        "neighbors": {"path": "pkg/core.py", "line": 4, "repo": REPO},
        "repo_overview": {"repo": REPO},
        "find_definition": {"symbol": "f", "repo": REPO},
        "find_references": {"symbol": "Cart", "repo": REPO},
        "callers": {"symbol": "f", "repo": REPO},
        "callees": {"symbol": "g", "repo": REPO},
        "impact": {"symbol": "h2", "repo": REPO},
        "what_changed": {"since": "2026-02-01", "repo": REPO},
        "symbol_history": {"symbol": "h2", "repo": REPO},
        "search_commits": {"query": "Rename h to h2", "repo": REPO, "k": 3},
        "compare": {"base": "main~3", "head": "main", "repo": REPO},
        "index_repository": {"path": str(throwaway), "name": THROWAWAY},  # answers at once: the build queued
        "refresh_index": {"name": THROWAWAY},  # joins that build; followed (progress) until it is done
        "remove_index": {"name": THROWAWAY},
    }


async def test_every_tool_answers_what_its_output_schema_declares(env: HistoryEnv) -> None:
    from mcp import Client

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        steps.append(message or "")

    steps: list[str] = []
    answers: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    async with Client(env.url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        calls = valid_calls(env)
        assert set(calls) == set(tools)  # a new tool fails here until its answer is checked too
        for name, arguments in calls.items():
            follow = on_progress if name == "refresh_index" else None
            result = await client.call_tool(name, arguments, progress_callback=follow)
            problems += answer_problems(tools[name], result)
            answers[name] = dict(result.structured_content or {})
    assert problems == []
    assert answers["refresh_index"]["phase"] == "committed" and steps, (answers["refresh_index"], steps)
    assert answers["remove_index"]["index"] == THROWAWAY and answers["remove_index"]["builds"]
    assert answers["ask_code"]["citations"] and answers["compare"]["items"] and answers["symbol_history"]["commits"]
