"""Index management from an MCP client, end to end: real Ray (jobs through its job API), real Serve
over HTTP, the real model and store, the `mcp` package's client, real git repositories.

An MCP client indexes a folder (receiving progress notifications), a second request joins the running
build, the sync actor notices an edit and reindexes only the changed chunk, a feature branch is
indexed by ref and both refs are searched, an index is removed, and every refusal names its reason.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import ray

from tests.support.git_repos import function, git, git_repo, module
from tests.support.ray_cluster import McpServer, RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(900)]

NAMESPACE = "indexmgmt"
EMBEDDER = "samespace-embedder-cpu0"
ROUTE = "/idx"
SYNC_PERIOD_S = 1.0
BUILD_WAIT_S = 240.0
ADMIN_TOKEN = "admin-t0ken-for-tests"
HOOK_SECRET = "hook-s3cret-for-tests"


@dataclass
class Env:
    url: str
    admin: str
    roots: Path
    outside: Path
    settings: Any
    dashboard_url: str

    def call(self, tool: str, arguments: dict[str, Any], progress: list[tuple[float, Any, Any]] | None = None) -> Any:
        return asyncio.run(self._call(tool, arguments, progress))

    async def _call(self, tool: str, arguments: dict[str, Any], progress: list[Any] | None) -> Any:
        from mcp import Client

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            assert progress is not None
            progress.append((done, total, message))

        async with Client(self.url) as client:
            callback = on_progress if progress is not None else None
            return await client.call_tool(tool, arguments, progress_callback=callback)

    def ok(self, tool: str, arguments: dict[str, Any], progress: list[Any] | None = None) -> dict[str, Any]:
        result = self.call(tool, arguments, progress)
        assert not result.is_error, result.content
        structured: dict[str, Any] = result.structured_content
        return structured

    def refused(self, tool: str, arguments: dict[str, Any]) -> str:
        result = self.call(tool, arguments)
        assert result.is_error, result.structured_content
        return "\n".join(getattr(block, "text", "") for block in result.content)

    def encodes(self, texts: list[str]) -> int:
        embedder = ray.get_actor(EMBEDDER, namespace=NAMESPACE)
        return sum(ray.get([embedder.encode_count.remote(text) for text in texts]))

    def texts(self, folder: Path) -> list[str]:
        from cluster.build import collect_chunks
        from cluster.index.representations import name_text
        from cluster.space import embedding_text

        chunks, _, _ = collect_chunks(folder, self.settings)
        return [embedding_text(c) for c in chunks] + [name_text(c) for c in chunks]

    def status(self, repo: str) -> dict[str, Any]:
        indexes = self.ok("index_status", {"repo": repo})["indexes"]
        assert len(indexes) == 1, indexes
        found: dict[str, Any] = indexes[0]
        return found


@pytest.fixture(scope="module")
def env(ray_cluster: RayCluster, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    from ray import serve

    from cluster.settings import SamespaceSettings
    from serve_apps.mcp import McpIngress

    base = tmp_path_factory.mktemp("index-mgmt")
    roots, outside = base / "roots", base / "outside"
    roots.mkdir()
    outside.mkdir()
    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": base / "data"},
        admin={"config_path": base / "config.json", "token": ADMIN_TOKEN},
        index={
            "allowed_roots": [roots],
            "sync_period_s": SYNC_PERIOD_S,
            "sync_debounce_s": 0.5,
            "hook_secret": HOOK_SECRET,
            "groups": {"pair": ["grp-a", "grp-b"]},
        },
    )
    serve.run(McpIngress.options(name="McpIndex", num_replicas=1).bind(settings), name="mcp-index", route_prefix=ROUTE)
    try:
        yield Env(
            url=f"http://127.0.0.1:{mcp_server.port}{ROUTE}/mcp/",
            admin=f"http://127.0.0.1:{mcp_server.port}{ROUTE}/admin",
            roots=roots,
            outside=outside,
            settings=settings,
            dashboard_url=ray_cluster.dashboard_url,
        )
    finally:
        serve.delete("mcp-index")
        for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
            ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


def wait_until(check: Any, timeout_s: float = BUILD_WAIT_S, poll_s: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(poll_s)
    raise AssertionError(f"not within {timeout_s}s")


def indexed(env: Env, name: str) -> Path:
    """A git repository of the test's own under the allowed root, indexed (waited for) as `name`."""
    repo = git_repo(env.roots / name)
    assert env.ok("index_repository", {"path": str(repo)}, [])["phase"] == "committed"
    return repo


def test_an_mcp_client_indexes_a_repository_with_progress_notifications(env: Env) -> None:
    from ray.job_submission import JobSubmissionClient

    repo = git_repo(env.roots / "shop")
    progress: list[Any] = []
    report = env.ok("index_repository", {"path": str(repo)}, progress)
    ticket = report["ticket"]
    assert (ticket["index"], ticket["folder"], report["phase"], report["done"]) == (
        "shop",
        str(repo),
        "committed",
        True,
    )
    assert ticket["build"].startswith("shop__b") and ticket["job_id"] == f"samespace-{ticket['build']}"
    assert progress, "no progress notification reached the client"
    messages = [message for _, _, message in progress]
    assert messages[0].startswith(("starting shop", "building shop")) and messages[-1] == "committed shop"
    # the same Ray job `ray job submit` would have run, visible in the dashboard's job API
    jobs = JobSubmissionClient(env.dashboard_url)
    wait_until(lambda: str(jobs.get_job_status(ticket["job_id"]).value) == "SUCCEEDED", timeout_s=60)

    status = env.status("shop")
    assert status["build"] == ticket["build"] and status["folder"] == str(repo)
    assert status["source"]["commit"] == git(repo, "rev-parse", "HEAD") and status["source"]["branch"] == "main"
    assert status["staleness"] == {"changed_files": 0, "commits_behind": 0, "commit_now": status["source"]["commit"]}
    hits = env.ok("search_code", {"query": "validate the warehouse record", "repo": "shop"})["hits"]
    assert hits and hits[0]["repo"] == "shop" and hits[0]["commit"] == status["source"]["commit"]


def test_a_second_request_joins_the_running_build(env: Env) -> None:
    repo = git_repo(env.roots / "joined")
    first = env.ok("index_repository", {"path": str(repo)})  # no progress token: answered at once
    assert not first["done"] and first["phase"] in ("starting", "building")
    second = env.ok("index_repository", {"path": str(repo)})
    assert second["joined"] and second["ticket"]["build"] == first["ticket"]["build"]
    progress: list[Any] = []
    third = env.ok("refresh_index", {"name": "joined"}, progress)  # joins too, and follows it to the end
    assert third["joined"] and third["ticket"]["build"] == first["ticket"]["build"] and third["phase"] == "committed"


def test_the_sync_actor_reindexes_an_edit_and_embeds_only_the_changed_chunk(env: Env) -> None:
    repo = indexed(env, "synced")
    before_build = env.status("synced")["build"]
    (repo / "invoice.py").write_text(module("invoice", "* 2\n    value += compute_zebra_surcharge(value)"))
    edited_at = time.monotonic()
    texts = env.texts(repo)
    encodes_before = env.encodes(texts)

    def searchable() -> bool:
        hits = env.ok("search_code", {"query": "compute_zebra_surcharge", "repo": "synced", "k": 3})["hits"]
        return bool(hits) and "compute_zebra_surcharge" in hits[0]["snippet"]

    wait_until(searchable)
    latency_s = time.monotonic() - edited_at
    status = env.status("synced")
    assert status["build"] != before_build and status["source"]["dirty"]
    assert (status["embedded"], status["reused"]) == (1, status["points"] - 1)
    assert env.encodes(texts) - encodes_before == 2  # the changed chunk's code and name texts, nothing else
    assert latency_s < BUILD_WAIT_S
    print(f"edit to searchable: {latency_s:.1f} s (sync period {SYNC_PERIOD_S} s)")


def test_a_feature_branch_by_ref_is_indexed_and_both_refs_are_searched(env: Env) -> None:
    repo = git_repo(env.roots / "store")
    env.ok("index_repository", {"path": str(repo)}, [])
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "customer.py").write_text(module("customer", "+ loyalty_bonus(record)"))
    git(repo, "commit", "-qam", "loyalty")
    git(repo, "checkout", "-q", "main")
    report = env.ok("index_repository", {"path": str(repo), "ref": "feature"}, [])
    assert report["ticket"]["index"] == "store.feature" and report["phase"] == "committed"
    feature = env.status("store.feature")
    assert (feature["embedded"], feature["source"]["ref"]) == (1, "feature")

    hits = env.ok("search_code", {"query": "loyalty_bonus", "k": 10})["hits"]
    assert hits[0]["repo"] == "store.feature" and hits[0]["ref"] == "feature"
    bases = env.ok("search_code", {"query": "step 0 of the customer pipeline", "repo": "store", "k": 5})["hits"]
    assert bases and all(hit["ref"] == "main" and "loyalty_bonus" not in hit["snippet"] for hit in bases)


def test_removing_an_index_drops_it_and_stops_syncing_it(env: Env) -> None:
    indexed(env, "removed")
    assert "removed" in _registrations(env)
    removed = env.ok("remove_index", {"name": "removed"})
    assert removed["index"] == "removed" and len(removed["builds"]) == 1
    assert env.ok("index_status", {"repo": "removed"})["indexes"] == []
    assert "removed" not in _registrations(env)
    assert "unknown repo 'removed'" in env.refused("remove_index", {"name": "removed"})


def test_every_refusal_says_why(env: Env) -> None:
    inside = git_repo(env.roots / "refusals")
    outside_repo = git_repo(env.outside / "secret-project")
    link = env.roots / "link-out"
    link.symlink_to(outside_repo)
    for path in (str(outside_repo), str(env.roots / ".." / "outside" / "secret-project"), str(link)):
        message = env.refused("index_repository", {"path": path})
        assert "outside the allowed roots" in message and "SAMESPACE_INDEX__ALLOWED_ROOTS" in message
    assert "not an absolute path" in env.refused("index_repository", {"path": "shop"})
    assert "outside the allowed roots" in env.refused("index_repository", {"path": "/"})
    assert "inside a git folder" in env.refused("index_repository", {"path": str(inside / ".git")})
    assert "does not resolve" in env.refused("index_repository", {"path": str(inside), "ref": "nope"})
    assert "not a ref name" in env.refused("index_repository", {"path": str(inside), "ref": "-x"})
    assert "invalid index name" in env.refused("index_repository", {"path": str(inside), "name": "a/b"})
    assert "refusals" not in _registrations(env)  # a refused request registers nothing


def test_the_admin_api_and_a_signed_push_webhook_manage_indexes_too(env: Env) -> None:
    import json
    from urllib.parse import urlsplit

    import httpx

    from serve_apps.admin import sign_delivery, signed_message

    bearer = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    hooked_repo = indexed(env, "hooked")
    with httpx.Client(base_url=env.admin, timeout=120) as admin:
        assert admin.get("/indexes").status_code == 401  # the admin token, before anything else
        listed = admin.get("/indexes", headers=bearer).json()
        assert "hooked" in {r["name"] for r in listed["registrations"]}
        # The admin is not confined to the MCP roots (its token is the authority), but never indexes /.
        other = git_repo(env.outside / "admin-only")
        made = admin.post("/indexes", headers=bearer, json={"path": str(other)})
        assert made.status_code == 200 and made.json()["ticket"]["index"] == "admin-only"
        assert admin.post("/indexes", headers=bearer, json={"path": "/"}).status_code == 403
        assert admin.post("/indexes", headers=bearer, json={"path": str(other), "bogus": 1}).status_code == 422

        git(hooked_repo, "remote", "add", "origin", "git@github.com:example/hooked.git")
        repository = {"clone_url": "https://github.com/example/hooked.git"}
        body = json.dumps({"ref": "refs/heads/main", "repository": repository}).encode()
        hook_path = urlsplit(env.admin).path + "/hooks/git"  # as the server receives it, prefix and all

        def signed(query: str, delivery: str) -> dict[str, str]:
            stamp = str(int(time.time()))
            message = signed_message("POST", hook_path, query.encode(), stamp, delivery, body)
            return {
                "x-samespace-signature": sign_delivery(HOOK_SECRET, message),
                "x-samespace-timestamp": stamp,
                "x-samespace-delivery": delivery,
            }

        wrong = {**signed("", "push-0"), "x-samespace-signature": "sha256=" + "0" * 64}
        assert admin.post("/hooks/git", content=body, headers=wrong).status_code == 401
        hooked = admin.post("/hooks/git", content=body, headers=signed("", "push-1"))
        assert hooked.status_code == 200 and hooked.json() == {"refreshed": ["hooked"]}  # matched by its remote
        unsigned_query = admin.post("/hooks/git?index=admin-only", content=body, headers=signed("", "push-2"))
        assert unsigned_query.status_code == 401  # the signature covers ?index=
        push = signed("index=admin-only", "push-3")
        named = admin.post("/hooks/git?index=admin-only", content=body, headers=push)
        assert set(named.json()["refreshed"]) == {"hooked", "admin-only"}
        assert admin.post("/hooks/git?index=admin-only", content=body, headers=push).status_code == 409  # a replay

        wait_until(lambda: all(b["done"] for b in admin.get("/indexes", headers=bearer).json()["builds"]))
        assert admin.delete("/indexes/admin-only", headers=bearer).json()["index"] == "admin-only"
        assert admin.delete("/indexes/admin-only", headers=bearer).status_code == 404


def test_search_reads_a_glob_a_named_group_or_every_index_and_each_hit_names_repo_and_ref(env: Env) -> None:
    for name in ("grp-a", "grp-b", "other-c"):
        indexed(env, name)
    query = {"query": "step 1 of the shipment pipeline", "k": 50}
    for scope in ("grp-*", "@pair"):
        hits = env.ok("search_code", {**query, "repo": scope})["hits"]
        assert {hit["repo"] for hit in hits} | {a for hit in hits for a in hit["also_in"]} == {"grp-a", "grp-b"}
        assert all(hit["ref"] == "main" and hit["commit"] for hit in hits)
        symbols = env.ok("search_symbols", {"query": "shipment_step_1", "repo": scope, "limit": 10})["hits"]
        assert symbols and {hit["repo"] for hit in symbols} <= {"grp-a", "grp-b"}
    everywhere = env.ok("search_code", query)["hits"]
    assert "other-c" in {hit["repo"] for hit in everywhere} | {a for hit in everywhere for a in hit["also_in"]}
    answer = env.ok("ask_code", {"question": "what does step 1 of the shipment pipeline do?", "repo": "@pair"})
    assert answer["citations"] and {c["repo"] for c in answer["citations"]} <= {"grp-a", "grp-b"}
    assert "unknown group '@nope'; groups: @pair" in env.refused("search_code", {**query, "repo": "@nope"})
    assert "unknown repo 'zzz*'" in env.refused("search_code", {**query, "repo": "zzz*"})


def test_sync_survives_a_restart_of_the_sync_actor(env: Env) -> None:
    from actors.sync import find_sync_actor

    repo = indexed(env, "restarted")
    actor = find_sync_actor(env.settings)
    assert actor is not None
    ray.kill(actor, no_restart=False)  # Ray restarts it; it reads the registrations back from the config store

    def registered_again() -> bool:
        try:
            return "restarted" in ray.get(actor.registrations.remote())
        except ray.exceptions.RayError:  # unavailable while it restarts
            return False

    wait_until(registered_again, timeout_s=120)
    (repo / "refund.py").write_text(function("refund", 0, "+ compute_walrus_rebate(record)"))

    def searchable() -> bool:
        hits = env.ok("search_code", {"query": "compute_walrus_rebate", "repo": "restarted", "k": 3})["hits"]
        return bool(hits) and "compute_walrus_rebate" in hits[0]["snippet"]

    wait_until(searchable)


def _registrations(env: Env) -> dict[str, Any]:
    from cluster.config import ConfigStore

    return dict(ConfigStore(env.settings.admin.config_path).read_indexes())
