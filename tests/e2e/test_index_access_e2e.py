"""Per-index access on real Ray: a real IndexActor holding two git repositories indexed by the real
reindex with the packaged model, `index.acl` giving 'alpha' to group A and 'beta' to group B. The
search service runs in this process over the actors (as in a replica), each call inside
`acting_as(...)` (what the HTTP guard does per request). A reader of group A never meets beta: not in a
search of everything, a glob, a group, `also_in`, read_code, navigation, grep, symbols, files, the
overview, the history tools, status, nor an ask's seed and gathering rounds; beta named directly is
answered with exactly the text of an unknown name. An unrestricted caller sees both."""

from __future__ import annotations

from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import ray

from cluster.auth import Principal, acting_as
from tests.support.git_repos import git, git_repo, module
from tests.support.index_access import ANN, SHARED, ScriptedDispatcher, assistant_reply, rlm_reply
from tests.support.ray_cluster import RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(900)]

NAMESPACE = "index-access"
ACL = {"alpha": ["group:A"], "beta": ["group:B"]}
GROUPS = {"both": ["alpha", "beta"], "only-b": ["beta"]}
TOPICS = {"alpha": ("invoice", "shipment"), "beta": ("invoice", "refund")}  # invoice.py: one place in both
UNKNOWN = "unknown repo 'beta'; indexed repos: alpha"


@dataclass
class AccessEnv:
    settings: Any
    roots: dict[str, Path]


@pytest.fixture(scope="module")
def env(ray_cluster: RayCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AccessEnv]:
    from actors.build_ports import run_reindex
    from cluster.settings import SamespaceSettings

    base = tmp_path_factory.mktemp("index-access")
    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE}, store={"data_dir": base / "data"}, index={"acl": ACL, "groups": GROUPS}
    )
    roots = {}
    for name, topics in TOPICS.items():
        root = git_repo(base / name, topics)
        (root / f"{topics[1]}.py").write_text(module(topics[1], "* 3"))  # a second commit: a history to mine
        git(root, "commit", "-qam", f"tune the {topics[1]} steps")
        run_reindex(settings, root, name, emit=lambda line: None)
        roots[name] = root
    try:
        yield AccessEnv(settings, roots)
    finally:
        for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
            ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


@pytest.fixture
def service(env: AccessEnv) -> Any:
    """The replica's search service over the real actors (one per test: its caches live in one loop)."""
    from actors import get_index_actor
    from actors.dispatcher import LazyDispatcher, get_dispatcher
    from actors.query_path import QueryPath
    from actors.search_ports import IndexActorPort, RerankerPort
    from cluster.roles import Role
    from cluster.search import CodeSearchService

    settings = env.settings
    return CodeSearchService(
        IndexActorPort(get_index_actor(settings)),
        QueryPath(get_dispatcher(settings, Role.CODE_EMBEDDING)),
        RerankerPort(LazyDispatcher(settings, Role.RERANKER)),
        settings.reranker.candidates,
        limits=settings.limits,
    )


async def as_caller(principal: Principal, call: Awaitable[Any]) -> Any:
    with acting_as(principal):
        return await call


async def refused(principal: Principal, call: Awaitable[Any]) -> str:
    from cluster.errors import IndexNotFound, original_error

    with acting_as(principal), pytest.raises(Exception) as raised:  # noqa: PT011 - checked below: an IndexNotFound
        await call
    error = original_error(raised.value)
    assert isinstance(error, IndexNotFound), repr(raised.value)
    return str(error)


async def test_a_search_of_everything_a_glob_or_a_group_holds_only_the_readers_indexes(service: Any) -> None:
    for scope in (None, "*", "@both"):
        found = await as_caller(ANN, service.search_code("invoice step", 10, scope, None, None, rerank=False))
        assert found.hits and {h.repo for h in found.hits} == {"alpha"}, scope
        assert all(h.also_in == [] for h in found.hits) and "beta" not in found.model_dump_json()
    both = await as_caller(SHARED, service.search_code("invoice step", 10, None, None, None, rerank=False))
    assert "beta" in {h.repo for h in both.hits} | {i for h in both.hits for i in h.also_in}
    glob = await refused(ANN, service.search_code("invoice", 5, "b*", None, None, rerank=False))
    nothing = await refused(ANN, service.search_code("invoice", 5, "zzz*", None, None, rerank=False))
    assert glob == nothing.replace("zzz*", "b*") == "unknown repo 'b*'; indexed repos: alpha"
    group = await refused(ANN, service.search_code("invoice", 5, "@only-b", None, None, rerank=False))
    assert group == "unknown repo '@only-b'; indexed repos: alpha"


async def test_beta_named_directly_is_an_unknown_index_to_every_tool(service: Any) -> None:
    from cluster.graph import GraphQuery, GraphTool
    from cluster.grep import GrepRequest

    calls = {
        "search_code": lambda repo: service.search_code("invoice", 5, repo, None, None, rerank=False),
        "read_code": lambda repo: service.read_code(repo, "invoice.py", 1, 3),
        "search_symbols": lambda repo: service.search_symbols("invoice_step_0", repo, 5),
        "search_files": lambda repo: service.search_files("invoice", repo, 5),
        "neighbors": lambda repo: service.neighbors(repo, "invoice.py", 2, 1),
        "repo_overview": lambda repo: service.repo_overview(repo),
        "callers": lambda repo: service.navigate(GraphQuery(tool=GraphTool.CALLERS, symbol="x", repo=repo)),
        "grep_code": lambda repo: service.grep_code(GrepRequest(pattern="def", repo=repo)),
        "what_changed": lambda repo: service.what_changed(repo, "30d", None, None, 10),
        "symbol_history": lambda repo: service.symbol_history(repo, "refund_step_0", None, 10),
        "search_commits": lambda repo: service.search_commits("tune", repo, None, 5),
        "compare": lambda repo: service.compare(repo, "HEAD~1", "HEAD", 10),
    }
    for tool, call in calls.items():
        beta, nope = await refused(ANN, call("beta")), await refused(ANN, call("nope"))
        assert beta == nope.replace("nope", "beta") == UNKNOWN, tool


async def test_every_read_across_indexes_reaches_only_alpha(service: Any) -> None:
    from cluster.graph import GraphQuery, GraphTool
    from cluster.grep import GrepRequest

    lines = await as_caller(ANN, service.read_code("alpha", "invoice.py", 1, 2))
    symbols = await as_caller(ANN, service.search_symbols("invoice_step_0", None, 10))
    files = await as_caller(ANN, service.search_files("py", None, 10))
    found = await as_caller(ANN, service.navigate(GraphQuery(tool=GraphTool.DEFINITION, symbol="invoice_step_0")))
    grepped = await as_caller(ANN, service.grep_code(GrepRequest(pattern="def ", limit=200)))
    overview = await as_caller(ANN, service.repo_overview(None))  # the one index ann may read
    assert lines.repo == "alpha" and "invoice_step_0" in lines.text
    assert symbols.hits and {h.repo for h in symbols.hits} == {"alpha"}
    assert {f.repo for f in files.files} == {"alpha"} and "refund.py" not in {f.path for f in files.files}
    assert [d.repo for d in found.definitions] == ["alpha"]
    assert grepped.matches and {m.repo for m in grepped.matches} == {"alpha"}
    assert overview.repo == "alpha"
    everyone = await as_caller(SHARED, service.navigate(GraphQuery(tool=GraphTool.DEFINITION, symbol="invoice_step_0")))
    assert sorted(d.repo for d in everyone.definitions) == ["alpha", "beta"]


async def test_the_history_tools_read_only_alpha(service: Any, env: AccessEnv) -> None:
    changed = await as_caller(ANN, service.what_changed(None, "30d", None, None, 50))
    assert changed.items and {i.repo for i in changed.items} == {"alpha"}
    assert [r.repo for r in changed.reach] == ["alpha"]
    history = await as_caller(ANN, service.symbol_history(None, "invoice_step_0", None, 10))
    assert history.commits and history.candidates == [] and "beta" not in history.model_dump_json()
    commits = await as_caller(ANN, service.search_commits("tune the steps", None, None, 10))
    assert commits.hits and {h.repo for h in commits.hits} == {"alpha"}
    compared = await as_caller(ANN, service.compare(None, "HEAD~1", "HEAD", 10))
    assert compared.repo == "alpha" and compared.head == git(env.roots["alpha"], "rev-parse", "HEAD")
    both = await as_caller(SHARED, service.symbol_history(None, "invoice_step_0", None, 10))
    assert "alpha" in str(both.note) and "beta" in str(both.note)  # held by both: candidates of each


async def test_status_and_the_summaries_list_only_alpha(service: Any) -> None:
    status = await as_caller(ANN, service.index_status())
    summaries = await as_caller(ANN, service.index_summaries())
    assert [i.repo for i in status.indexes] == ["alpha"] and {b.repo for b in status.builds} <= {"alpha"}
    assert [s.name for s in summaries] == ["alpha"] and "beta" not in status.model_dump_json()
    assert [i.repo for i in (await as_caller(SHARED, service.index_status())).indexes] == ["alpha", "beta"]


async def test_an_asks_seed_and_gathering_rounds_never_reach_beta(service: Any, env: AccessEnv) -> None:
    from cluster.ask.pipeline import AskRequest
    from serve_apps.mcp import AskService

    rlm, assistant = ScriptedDispatcher(rlm_reply), ScriptedDispatcher(assistant_reply)
    asker = AskService(service, env.settings, rlm, assistant)
    result = await as_caller(ANN, asker.ask(AskRequest(question="How is an invoice step clamped?")))
    assert result.produced.rounds >= 1 and len(result.produced.tools_called) >= 5
    assert result.citations and {c.repo for c in result.citations} == {"alpha"}
    assert "beta" not in str(assistant.requests)
    told = [m["content"] for r in rlm.requests for m in r["messages"] if m["role"] == "tool"]
    assert any(UNKNOWN in t for t in told)  # the model named beta: told it does not exist
    assert not any("beta" in t.replace("unknown repo 'beta'", "") for t in told)
