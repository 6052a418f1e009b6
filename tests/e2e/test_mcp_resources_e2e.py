"""Resources, subscriptions and prompts through the `mcp` client on real Ray + Serve (two replicas, no
affinity) and the packaged model: one small git repository is indexed once; the client lists the
resources and templates, reads the index list, a status and a file (typed by its language), is
refused every way out of the indexed files, subscribes to a status and hears of the build a refresh
commits (and of nothing it did not ask for), unsubscribes, and gets each prompt with citations of
the repository's real lines."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import ray

from tests.support.ray_cluster import McpServer, RayCluster
from tests.support.scripted_history import ScriptedRepo

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(900)]

NAMESPACE = "resources"
REPO = "ledger"
ROUTE = "/res"
EVENT_WAIT_S = 240.0
CANARY = "canary-outside-the-repository-7f3a"

TAX_V1 = '''"""Tax on an amount."""


def compute_tax(amount, rate=0.2):
    """The tax owed on an amount at a rate, rounded to cents."""
    return round(amount * rate, 2)


def total_with_tax(amount):
    return amount + compute_tax(amount)
'''
TAX_V2 = TAX_V1.replace("rate=0.2", "rate=0.25").replace("at a rate", "at a rate (a quarter unless told)")
DAILY = '''from billing.tax import compute_tax


def daily_report(sales):
    """Sum the day's sales and the tax owed on them."""
    total = sum(sales)
    return {"total": total, "tax": compute_tax(total)}
'''


@dataclass
class Env:
    url: str
    repo: ScriptedRepo
    settings: Any
    outside: Path

    def reindex(self) -> None:
        from actors.build_ports import run_reindex

        run_reindex(self.settings, self.repo.root, REPO, emit=lambda line: None)

    def client(self) -> Any:
        from mcp import Client

        return Client(self.url)

    def line_of(self, path: str, text: str) -> int:
        lines = (self.repo.root / path).read_text().splitlines()
        return next(n for n, line in enumerate(lines, 1) if text in line)


@pytest.fixture(scope="module")
def env(ray_cluster: RayCluster, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    from ray import serve

    from cluster.settings import SamespaceSettings
    from serve_apps.mcp import McpIngress

    base = tmp_path_factory.mktemp("resources")
    outside = base / "outside.py"
    outside.write_text(f'TOKEN = "{CANARY}"\n')
    repo = ScriptedRepo(base / REPO)
    repo.write("billing/tax.py", TAX_V1)
    repo.write("reports/daily.py", DAILY)
    repo.write("README.md", "# ledger\n\nTaxes and daily reports.\n")
    os.symlink(outside, repo.root / "billing" / "link.py")  # a link out of the repository: never indexed
    repo.commit("base", "Ledger: tax and the daily report", date="2026-01-10T10:00:00Z")
    repo.write("billing/tax.py", TAX_V2)
    repo.commit("rate", "The tax rate is a quarter", date="2026-02-10T10:00:00Z")
    settings = SamespaceSettings(ray={"namespace": NAMESPACE}, store={"data_dir": base / "data"})
    env = Env(f"http://127.0.0.1:{mcp_server.port}{ROUTE}/mcp/", repo, settings, outside)
    env.reindex()
    serve.run(McpIngress.options(name="McpResources", num_replicas=2).bind(settings), name="res", route_prefix=ROUTE)
    try:
        yield env
    finally:
        serve.delete("res")
        for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
            ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


def status_uri(name: str) -> str:
    return f"samespace://index/{name}/status"


async def read(client: Any, uri: str) -> tuple[str, str | None]:
    contents = (await client.read_resource(uri)).contents[0]
    return contents.text, contents.mime_type


async def serving_build(client: Any) -> str:
    text, _ = await read(client, status_uri(REPO))
    build: str = json.loads(text)["indexes"][0]["build"]
    return build


async def test_the_resources_list_read_and_refuse_every_way_out(env: Env) -> None:
    from mcp.shared.exceptions import MCPError

    file_uri = f"samespace://index/{REPO}/file/billing/tax.py"
    async with env.client() as client:
        listed = {r.uri: r.mime_type for r in (await client.list_resources()).resources}
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        indexes, indexes_mime = await read(client, "samespace://indexes")
        status, _ = await read(client, status_uri(REPO))
        tax = await read(client, file_uri)
        refusals = {}
        readme = env.repo.root / "README.md"
        original = readme.read_text()
        readme.unlink()
        os.symlink(env.outside, readme)  # an indexed file replaced by a link out after the build
        try:
            for tail in ["../outside.py", "%2e%2e/outside.py", "%2Fetc%2Fpasswd", "billing/link.py", ".git/config"]:
                with pytest.raises(MCPError) as refused:
                    await client.read_resource(f"samespace://index/{REPO}/file/{tail}")
                refusals[tail] = str(refused.value)
            with pytest.raises(MCPError) as refused:
                await client.read_resource(f"samespace://index/{REPO}/file/README.md")
            refusals["README.md"] = str(refused.value)
        finally:
            readme.unlink()
            readme.write_text(original)
    assert listed == {"samespace://indexes": "application/json", status_uri(REPO): "application/json"}
    assert templates == {"samespace://index/{name}/status", "samespace://index/{name}/file/{+path}"}
    summary = json.loads(indexes)["indexes"][0]
    assert indexes_mime == "application/json" and (summary["name"], summary["files"]) == (REPO, 3)
    assert summary["commit"] == env.repo.shas["rate"] and summary["status_uri"] == status_uri(REPO)
    assert [(i["repo"], i["build"]) for i in json.loads(status)["indexes"]] == [(REPO, summary["build"])]
    assert tax == ((env.repo.root / "billing" / "tax.py").read_text(), "text/x-python")
    assert all(CANARY not in message for message in refusals.values()), refusals
    assert "Unknown resource" in refusals["../outside.py"] and "Unknown resource" in refusals["%2e%2e/outside.py"]
    assert "Unknown resource" in refusals["%2Fetc%2Fpasswd"]
    assert "not an indexed file" in refusals["billing/link.py"] and "not an indexed file" in refusals[".git/config"]
    assert "outside the repository" in refusals["README.md"]


async def events_until(subscription: Any, done: Any) -> list[str]:
    """The URIs of the events `subscription` delivers until `done()` holds after one."""
    uris: list[str] = []
    async with asyncio.timeout(EVENT_WAIT_S):
        async for event in subscription:
            uris.append(event.uri)
            if await done():
                return uris
    raise AssertionError(f"the stream ended before the change was heard: {uris}")


async def test_a_status_subscription_hears_the_build_a_refresh_commits_and_nothing_else(env: Env) -> None:
    daily = env.repo.root / "reports" / "daily.py"
    async with env.client() as client:
        before = await serving_build(client)
        try:
            async with client.listen(resource_subscriptions=[status_uri(REPO)]) as subscription:
                assert subscription.honored.resource_subscriptions == [status_uri(REPO)]
                daily.write_text(DAILY.replace("Sum the day's sales", "Add up the day's sales"))
                refresh = asyncio.create_task(asyncio.to_thread(env.reindex))
                on_status = await events_until(subscription, lambda: _moved(client, before))
                await refresh
            first = await serving_build(client)
            async with client.listen(resource_subscriptions=["samespace://indexes"]) as subscription:  # unsubscribed
                daily.write_text(DAILY)
                refresh = asyncio.create_task(asyncio.to_thread(env.reindex))
                on_list = await events_until(subscription, lambda: _moved(client, first))
                await refresh
        finally:
            daily.write_text(DAILY)
    assert on_status and set(on_status) == {status_uri(REPO)}  # never the list's, though it changed too
    assert on_list and set(on_list) == {"samespace://indexes"}  # never the status's: its stream was closed
    assert before != first != await _build_now(env)


async def _moved(client: Any, before: str) -> bool:
    return await serving_build(client) != before


async def _build_now(env: Env) -> str:
    async with env.client() as client:
        return await serving_build(client)


async def prompt_text(client: Any, name: str, arguments: dict[str, str]) -> str:
    result = await client.get_prompt(name, arguments)
    assert [m.role for m in result.messages] == ["user"]
    text: str = result.messages[0].content.text
    return text


async def test_each_prompt_cites_the_repositorys_real_lines(env: Env) -> None:
    from mcp.shared.exceptions import MCPError

    define = env.line_of("billing/tax.py", "def compute_tax")
    definition = f"billing/tax.py:{define}-{env.line_of('billing/tax.py', 'return round(')}"
    daily_call = env.line_of("reports/daily.py", "compute_tax(total)")
    total_call = env.line_of("billing/tax.py", "amount + compute_tax")
    async with env.client() as client:
        listed = [p.name for p in (await client.list_prompts()).prompts]
        review = await prompt_text(client, "review_changes", {"repo": REPO, "base": "HEAD~1", "head": "HEAD"})
        explain = await prompt_text(client, "explain_symbol", {"symbol": "compute_tax", "repo": REPO})
        since = await prompt_text(client, "changes_since", {"path": "billing", "since": "2026-02-01", "repo": REPO})
        found = await prompt_text(client, "find_behaviour", {"behaviour": "the tax owed on an amount", "repo": REPO})
        with pytest.raises(MCPError) as unknown:
            await client.get_prompt("explain_symbol", {"symbol": "compute_tax", "repo": "no-such-repo"})
    assert sorted(listed) == ["changes_since", "explain_symbol", "find_behaviour", "review_changes"]
    assert f"- {definition} compute_tax (function): modified" in review
    assert "+def compute_tax(amount, rate=0.25):" in review and "-def compute_tax(amount, rate=0.2):" in review
    assert f"defined at {definition}" in explain and "return round(amount * rate, 2)" in explain
    assert f"- reports/daily.py:{daily_call}-{daily_call} in daily_report" in explain
    assert f"- billing/tax.py:{total_call}-{total_call} in total_with_tax" in explain
    assert f"compute_tax (function): modified in {env.repo.shas['rate'][:12]} 2026-02-10" in since
    assert "billing/tax.py:" in since and "reports/" not in since and "Ledger: tax" not in since
    assert f"- {definition.split(':')[0]}:" in found and "def compute_tax" in found
    for text in (review, explain, since, found):
        assert "cite" in text.lower() and "samespace tools" in text
    assert "explain_symbol: unknown repo 'no-such-repo'" in str(unknown.value)
