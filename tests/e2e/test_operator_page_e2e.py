"""The operator page (GET /admin/ui, serve_apps/admin/_page.py) in a real headless Chromium, driven by Selenium.

Against the live cluster: an MCP deployment of its own (the admin app mounted in it, as `samespace run`
serves it) with an admin token; the test indexes a repository through the admin API, signs in on the
page, reads the roles, providers, budget, the index and its job from the page and checks them against
the API, pushes a policy and re-verifies the gate from the page, and checks the token never reaches a
URL. Against a stub admin API (no Ray): whatever the API answers is rendered as text, never markup,
and an API error is shown in place with its status.

Chromium comes from Debian's packages (`make browser`; `.ci/run` installs it); Selenium drives the
system chromedriver, so nothing is downloaded. Without /usr/bin/chromium the tests skip, unless
SAMESPACE_REQUIRE_BROWSER is set (CI sets it): then they fail.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import ray

from samespace.head import free_port
from tests.support.browser import (
    CHROME_ARGS,
    CHROMEDRIVER,
    CHROMIUM,
    REQUIRE_BROWSER,
    all_css,
    browser_missing,
    css,
    field,
    page_ready,
    screenshot,
    select,
    sign_in,
    urls_seen,
    wait_for,
)
from tests.support.git_repos import git_repo
from tests.support.ray_cluster import McpServer, RayCluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

TOKEN = "ops-admin-t0ken-for-ui-tests"
NAMESPACE = "opsui"
ROUTE = "/ops"
INDEX = "opsui-shop"
BUILD_WAIT_S = 300.0
XSS = '<img src=x onerror="window.__pwned=1">'


# --- the browser ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A fresh headless Chromium with a throwaway profile; never Selenium Manager, never a download."""
    why = browser_missing()
    if why is not None:
        if os.environ.get(REQUIRE_BROWSER):
            pytest.fail(f"{REQUIRE_BROWSER} is set but no browser can be driven: {why}")
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="samespace-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (*CHROME_ARGS, f"--user-data-dir={profile}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# --- the live cluster -------------------------------------------------------------------------------


@dataclass
class Ops:
    admin: str  # the admin API's base URL, .../ops/admin
    settings: Any
    repo: Path
    dashboard_url: str

    def job_logs(self, job_id: str) -> str:
        from ray.job_submission import JobSubmissionClient

        return str(JobSubmissionClient(self.dashboard_url).get_job_logs(job_id))

    def call(self, method: str, path: str, body: Any = None, token: str | None = TOKEN) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return httpx.request(method, self.admin + path, json=body, headers=headers, timeout=300)

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        response = self.call(method, path, body)
        assert response.status_code == 200, (response.status_code, response.text)
        return response.json()


@pytest.fixture(scope="module")
def ops(ray_cluster: RayCluster, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ops]:
    from ray import serve

    from cluster.settings import SamespaceSettings
    from serve_apps.mcp import McpIngress

    base = tmp_path_factory.mktemp("operator-page")
    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": base / "data"},
        admin={"config_path": base / "config.json", "token": TOKEN},
    )
    serve.run(McpIngress.options(name="McpOps", num_replicas=1).bind(settings), name="mcp-ops", route_prefix=ROUTE)
    try:
        yield Ops(
            admin=f"http://127.0.0.1:{mcp_server.port}{ROUTE}/admin",
            settings=settings,
            repo=git_repo(base / "shop"),
            dashboard_url=ray_cluster.dashboard_url,
        )
    finally:
        serve.delete("mcp-ops")
        for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
            ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


def committed_build(ops: Ops) -> dict[str, Any]:
    """Index the test's repository through the admin API; wait for its build to commit and its job to end
    (the build commits a moment before the job's driver exits), both as the admin API reports them."""
    ticket = ops.ok("POST", "/indexes", {"path": str(ops.repo), "name": INDEX})["ticket"]
    deadline = time.monotonic() + BUILD_WAIT_S
    while True:
        builds = [b for b in ops.ok("GET", "/indexes")["builds"] if b["ticket"]["build"] == ticket["build"]]
        jobs = [j for j in ops.ok("GET", "/jobs")["jobs"] if j["submission_id"] == ticket["job_id"]]
        if builds and builds[0]["done"] and jobs and jobs[0]["end_time"] is not None:
            if builds[0]["phase"] != "committed" or jobs[0]["status"] != "SUCCEEDED":
                index = ray.get_actor("samespace-index", namespace=NAMESPACE)
                seen = ray.get(index.builds.remote())
                raise AssertionError((builds[0], jobs[0], seen, ops.job_logs(ticket["job_id"])[-3000:]))
            assert (jobs[0]["kind"], jobs[0]["index"], jobs[0]["build"]) == ("reindex", INDEX, ticket["build"])
            return cast(dict[str, Any], builds[0])
        assert time.monotonic() < deadline, f"build not done within {BUILD_WAIT_S} s: {builds} {jobs}"
        time.sleep(1.0)


def policies_in_force(ops: Ops, role: str) -> set[str]:
    return {view["policy_in_force"] for view in ops.ok("GET", "/providers")[role]}


@pytest.mark.ray
def test_the_operator_page_shows_the_live_cluster_and_acts_on_it(ops: Ops, browser: Any) -> None:
    build = committed_build(ops)
    page = ops.admin + "/ui"

    check_the_shell_before_signing_in(browser, page)
    sign_in(browser, page, TOKEN)
    history = browser.execute_script("return window.history.length")
    wait_for(browser, page_ready, what="every section loaded")
    assert all_css(browser, "[data-error]") == [], [e.text for e in all_css(browser, "[data-error]")]

    check_roles_and_providers(browser, ops)
    check_the_budget(browser, ops)
    check_the_index_and_its_job(browser, ops, build)
    path = screenshot(browser, "operator-page.png")
    assert path.stat().st_size > 10_000

    act_from_the_page(browser, ops)
    screenshot(browser, "operator-page-after-actions.png")

    check_the_token_is_nowhere(browser, ops, history)
    css(browser, "#signout").click()  # signing out forgets the token and every figure
    wait_for(browser, lambda d: css(d, "#token").is_displayed(), 30, "the login form again")
    assert browser.execute_script("return window.sessionStorage.length") == 0
    assert INDEX not in browser.find_element("tag name", "body").text


def check_the_shell_before_signing_in(browser: Any, page: str) -> None:
    """Before signing in: the shell alone, no figure of the cluster."""
    browser.get(page)
    wait_for(browser, lambda d: css(d, "#token").is_displayed(), 30, "the login form")
    body = browser.find_element("tag name", "body").text
    assert INDEX not in body and "code-embedding" not in body and not css(browser, "#dashboard").is_displayed()


def check_roles_and_providers(browser: Any, ops: Ops) -> None:
    """Roles and their policies, as GET /admin/providers reports them."""
    from cluster.roles import Role

    providers = ops.ok("GET", "/providers")
    for role in Role:
        row = f'table[data-table=roles] tr[data-role="{role.value}"]'
        in_force = {view["policy_in_force"] for view in providers[role.value]}
        assert field(browser, row, "role") == role.value
        assert field(browser, row, "policy") == (in_force.pop() if in_force else "—")
    embedders = all_css(browser, 'table[data-table=providers] tr[data-role="code-embedding"]')
    assert {e.get_attribute("data-provider") for e in embedders} == {
        v["provider"]["name"] for v in providers["code-embedding"]
    }


def check_the_budget(browser: Any, ops: Ops) -> None:
    """The budget's figures, and its spend section."""
    budget = ops.ok("GET", "/budget")
    ceiling = field(browser, "table[data-table=budget] tr[data-budget=ceiling]", "value")
    assert ceiling == f"{budget['ceiling']} ({budget['source']})"
    assert field(browser, "table[data-table=budget] tr[data-budget=in_flight]", "value") == str(budget["in_flight"])
    spend = budget.get("spend")
    if spend and spend.get("roles"):
        assert all_css(browser, "table[data-table=spend] tr[data-role]")
    else:
        assert css(browser, "[data-empty=spend]").text == "no spend recorded"


def check_the_index_and_its_job(browser: Any, ops: Ops, build: dict[str, Any]) -> None:
    """The index this test built, and its job."""
    job_id = build["ticket"]["job_id"]
    index_row = f'table[data-table=indexes] tr[data-index="{INDEX}"]'
    assert field(browser, index_row, "phase") == "committed"
    assert field(browser, index_row, "job") == job_id
    assert field(browser, index_row, "build") == build["ticket"]["build"]
    head = subprocess.run(["git", "-C", str(ops.repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert field(browser, index_row, "commit") == f"{head.stdout.strip()[:12]} (main)"  # the build's commit
    assert field(browser, index_row, "freshness") == "up to date"
    job_row = f'table[data-table=jobs] tr[data-job="{job_id}"]'
    assert field(browser, job_row, "index") == INDEX
    assert field(browser, job_row, "status") == "SUCCEEDED"
    assert css(browser, "[data-empty=sidecars]").text == "no sidecar has registered"


def act_from_the_page(browser: Any, ops: Ops) -> None:
    """Push a policy, re-verify the gate and set a role's daily cap from the page; the page and the API
    agree on each new state. The policy and the cap are put back whatever happens."""
    try:
        select(browser, "#policy-role", "code-embedding")
        select(browser, "#policy-value", "local")
        css(browser, "#policy-push").click()
        wait_for(browser, lambda d: all_css(d, "#result-roles [data-result=ok]"), what="the push's answer")
        row = 'table[data-table=roles] tr[data-role="code-embedding"]'
        wait_for(browser, lambda d: field(d, row, "policy") == "local", what="the new policy on the page")
        assert field(browser, row, "configured") == "local"
        assert policies_in_force(ops, "code-embedding") == {"local"}

        css(browser, "#gate-verify").click()  # a second action: the gate re-verified
        wait_for(browser, lambda d: all_css(d, "#result-gate [data-result=ok], #result-gate [data-error]"))
        assert all_css(browser, "#result-gate [data-result=ok]"), css(browser, "#result-gate").text

        select(browser, "#cap-role", "rlm")  # a third: a role's daily cap; the page and GET /admin/budget agree
        css(browser, "#cap-credits").send_keys("1.25")
        css(browser, "#cap-set").click()
        wait_for(browser, lambda d: all_css(d, "#result-spend [data-result=ok], #result-spend [data-error]"))
        assert all_css(browser, "#result-spend [data-result=ok]"), css(browser, "#result-spend").text
        capped = 'table[data-table=spend] tr[data-role="rlm"]'
        wait_for(browser, lambda d: field(d, capped, "cap") == "1.2500", what="the new cap on the page")
        assert ops.ok("GET", "/budget")["spend"]["roles"]["rlm"]["cap"] == 1.25

        css(browser, "#refresh").click()  # each of the three actions is an audit line the page shows
        wait_for(browser, lambda d: "PUT /admin/budget/caps" in audited(d), what="the cap's audit line")
        assert {"POST /admin/openrouter", "POST /admin/gate/verify"} <= set(audited(browser))
    finally:
        ops.ok("POST", "/openrouter", {"policies": {"code-embedding": "aggregate"}})
        ops.call("PUT", "/budget/caps", {"caps": {"rlm": None}})


def audited(browser: Any) -> list[str]:
    """The actions of the audit lines the page shows."""
    return [cell.text for cell in all_css(browser, 'table[data-table=audit] td[data-field="action"]')]


def check_the_token_is_nowhere(browser: Any, ops: Ops, history: int) -> None:
    """The token: in this tab's session storage only, never in a URL, the history, the page or a cookie."""
    assert TOKEN not in " ".join(urls_seen(browser))
    assert browser.execute_script("return window.history.length") == history  # no navigation, no form submitted
    assert TOKEN not in browser.page_source
    assert browser.get_cookies() == []
    assert browser.execute_script("return window.localStorage.length") == 0
    assert ops.call("GET", "/budget", token=None).status_code == 401
    assert ops.call("GET", "/jobs", token=None).status_code == 401


# --- a stub admin API: rendering and errors, no Ray -------------------------------------------------------


class StubAdmin:
    """The AdminApi methods the page reaches, answering hostile strings, and a caps route that refuses."""

    def __init__(self) -> None:
        self.policy = "aggregate"
        self.verified = 0

    async def providers(self) -> dict[str, Any]:
        from cluster.roles import Role

        view = {
            "provider": {
                "name": XSS,
                "kind": "local",
                "hosted": "ray",
                "host": "<b>node</b>",
                "model": "m",
                "eligible": False,
                "reason": "<script>window.__pwned=2</script>",
                "served": 3,
                "failures": 0,
            },
            "role": "code-embedding",
            "policy_in_force": self.policy,
            "policy_applied": self.policy,
            "serves": "pool",
            "gate": None,
        }
        out: dict[str, Any] = {role.value: [] for role in Role}
        out["code-embedding"] = [view]
        return {**out, "roles": {role.value: {"status": "ok", "detail": None} for role in Role}}

    async def gate(self, verify: bool) -> dict[str, Any]:
        self.verified += verify
        return {"code-embedding": [], "embedding": [], "roles": {}}

    async def budget(self, override: Any = None) -> dict[str, Any]:
        return {
            "ceiling": 7,
            "effective": 3,
            "in_flight": 0,
            "waiting": {},
            "source": "credits",
            "state": "open",
            "reason": XSS,
            "rate_limited": 0,
            "requests": 12,
            "window_rpm": None,
            "cooldown_until": None,
            "latency_ewma_s": 0.25,
            "last_discovery_at": None,
        }

    async def set_caps(self, body: Any) -> dict[str, Any]:
        from fastapi import HTTPException

        raise HTTPException(409, "<i>caps are refused here</i>")

    async def openrouter(self) -> dict[str, Any]:
        return {"policies": {"code-embedding": self.policy}, "key_pushed": False, "base_url": "http://x/api/v1"}

    async def push(self, body: Any) -> dict[str, Any]:
        self.policy = body.policies["code-embedding"].value
        return {"ok": True, "pushed_to": ["stub"], "issues": []}

    async def sidecars(self) -> dict[str, Any]:
        host = {
            "agent_url": "http://ws:9000",
            "hostname": XSS,
            "transport": "ws",
            "fresh": True,
            "last_seen_s_ago": 1.5,
            "active_requests": 0,
            "roles": {},
        }
        return {"sidecars": [host], "gate": {}}


@dataclass
class StubJob:
    submission_id: str
    status: str
    entrypoint: str
    start_time: int
    end_time: int | None = None
    error_type: str | None = None


@pytest.fixture(scope="module")
def stub_page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, StubAdmin]]:
    """The admin app over the stub, mounted at /admin like in the MCP app, on uvicorn in a thread."""
    import uvicorn
    from fastapi import FastAPI

    from cluster.settings import SamespaceSettings
    from serve_apps.admin import AdminApi, build_admin_asgi

    stub_dir = tmp_path_factory.mktemp("stub")
    settings = SamespaceSettings(
        admin={"token": TOKEN, "config_path": stub_dir / "c.json"}, store={"data_dir": stub_dir / "data"}
    )
    stub = StubAdmin()
    jobs = [StubJob("samespace-x", "FAILED", f"python -m jobs.reindex --name {shlex.quote(XSS)}", 1_700_000_000_000)]
    admin = build_admin_asgi(cast(AdminApi, stub), settings, jobs=lambda: jobs)
    app = FastAPI()
    app.mount("/admin", admin)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="stub-admin", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the stub admin app did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/admin/ui", stub
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_the_page_renders_answers_as_text_and_errors_in_place(stub_page: tuple[str, StubAdmin], browser: Any) -> None:
    page, stub = stub_page
    sign_in(browser, page, "wrong-token")  # refused: back to the form, saying why
    wait_for(browser, lambda d: "HTTP 401" in css(d, "#login-error").text, 60, "the refusal")
    assert browser.execute_script("return window.sessionStorage.length") == 0

    sign_in(browser, page, TOKEN)
    wait_for(browser, page_ready, 60, "every section loaded")
    provider = css(browser, 'table[data-table=providers] tr[data-role="code-embedding"] td[data-field=provider]')
    assert provider.text == XSS  # shown as text...
    assert all_css(browser, "#dashboard img, #dashboard b, #dashboard script, #dashboard i") == []  # ...not markup
    assert browser.execute_script("return window.__pwned === undefined")
    assert css(browser, "table[data-table=sidecars] tbody td").text == XSS
    assert field(browser, "table[data-table=budget] tr[data-budget=reason]", "value") == XSS
    assert css(browser, "[data-empty=spend]").text == "no spend recorded"  # no spend section in the answer
    assert field(browser, 'table[data-table=jobs] tr[data-job="samespace-x"]', "index") == XSS

    select(browser, "#cap-role", "rlm")
    css(browser, "#cap-credits").send_keys("2.5")
    css(browser, "#cap-set").click()
    error = wait_for(browser, lambda d: all_css(d, "#result-spend [data-error]"), 30, "the cap's error")[0]
    assert error.text == "HTTP 409: <i>caps are refused here</i>"

    select(browser, "#policy-role", "code-embedding")
    select(browser, "#policy-value", "backup")
    css(browser, "#policy-push").click()
    row = 'table[data-table=roles] tr[data-role="code-embedding"]'
    wait_for(browser, lambda d: field(d, row, "policy") == "backup", 30, "the pushed policy")
    assert stub.policy == "backup"
    css(browser, "#gate-verify").click()
    wait_for(browser, lambda d: all_css(d, "#result-gate [data-result=ok]"), 30, "the gate's answer")
    assert stub.verified == 1
    assert TOKEN not in " ".join(urls_seen(browser)) and TOKEN not in browser.page_source
    css(browser, "#signout").click()
