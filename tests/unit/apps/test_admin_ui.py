"""The operator page's routes (serve_apps/admin/_page.py) and the jobs route (serve_apps/admin/_jobs.py), without
Ray: exactly the shell and its script are open, they carry strict headers and no data, and everything else
of the admin app still answers 401 without the token. The page in a real browser: tests/e2e/test_operator_page_e2e.py.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from starlette.testclient import TestClient

from cluster.settings import SamespaceSettings
from serve_apps.admin import AdminApi, build_admin_asgi
from serve_apps.admin._jobs import JobList, recent_jobs, reindex_target
from serve_apps.admin._page import TOKEN_STORAGE_KEY, page_assets
from serve_apps.http_guard import route_path

BASE = "http://127.0.0.1:8000"
TOKEN = "admin-token-ui-unit"
CANARY = "canary-job-env-7d1e0b"
STRICT_HEADERS = {
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
}
OPEN = ["/admin/ui", "/admin/ui.js"]
STILL_CLOSED = [
    ("GET", "/admin/budget"),
    ("GET", "/admin/providers"),
    ("GET", "/admin/jobs"),
    ("GET", "/admin/openrouter"),
    ("POST", "/admin/gate/verify"),
    ("POST", "/admin/ui"),
    ("HEAD", "/admin/ui"),
    ("PUT", "/admin/ui.js"),
    ("GET", "/admin/ui/"),
    ("GET", "/admin/ui/budget"),
    ("GET", "/admin/uix"),
    ("GET", "/admin/ui.css"),
    ("GET", "/admin/ui.js/x"),
    ("GET", "/admin/admin/ui"),
    ("GET", "/admin/nothing-here"),
]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class FakeJob:
    """What Ray's JobDetails carries, as far as the jobs route reads it (and more, that it must not)."""

    submission_id: str | None
    status: str
    entrypoint: str
    start_time: int | None
    end_time: int | None = None
    error_type: str | None = None
    runtime_env: dict[str, Any] | None = None
    metadata: dict[str, str] | None = None


JOBS = [
    FakeJob(
        "samespace-api__b1",
        "SUCCEEDED",
        f"SECRET={CANARY} python -m jobs.reindex --repo /src/api --name api --build-id api__b1",
        1_700_000_000_000,
        1_700_000_030_500,
        runtime_env={"env_vars": {"SAMESPACE_STORE__URL": CANARY}},
        metadata={"note": CANARY},
    ),
    FakeJob(
        "samespace-web__b2",
        "RUNNING",
        "python -m jobs.reindex --repo /src/web --name=web --ref feature/x --build-id web__b2 --full",
        1_700_000_100_000,
    ),
    FakeJob(None, "RUNNING", f"driver {CANARY}", 1_700_000_200_000),  # a driver: no submission id
    FakeJob("raysubmit_other", "FAILED", "python train.py --key " + CANARY, 1_600_000_000_000, error_type="x"),
]


def client_for(tmp_path: Path, jobs: JobList | None = None) -> TestClient:
    settings = SamespaceSettings(admin={"token": TOKEN, "config_path": tmp_path / "config.json"})
    app = build_admin_asgi(AdminApi(settings), settings, jobs=jobs or (lambda: JOBS))
    return TestClient(app, base_url=BASE, root_path="/admin")


@pytest.mark.parametrize("path", OPEN)
def test_the_shell_and_its_script_are_open_with_strict_headers(tmp_path: Path, path: str) -> None:
    response = client_for(tmp_path).get(path)
    assert response.status_code == 200
    assert {name: response.headers.get(name) for name in STRICT_HEADERS} == STRICT_HEADERS
    csp = dict(part.strip().split(" ", 1) for part in response.headers["content-security-policy"].split(";"))
    assert csp["default-src"] == "'self'" and csp["script-src"] == "'self'"  # no inline script, no eval
    assert csp["frame-ancestors"] == "'none'" and csp["form-action"] == "'none'" and csp["base-uri"] == "'none'"
    assert "unsafe" not in response.headers["content-security-policy"]
    expected_type = "text/html" if path.endswith("/ui") else "text/javascript"
    assert response.headers["content-type"].startswith(expected_type)
    assert "set-cookie" not in response.headers


@pytest.mark.parametrize(("method", "path"), STILL_CLOSED)
@pytest.mark.parametrize("token", [None, "wrong"])
def test_every_other_request_still_needs_the_token(tmp_path: Path, method: str, path: str, token: str | None) -> None:
    headers = bearer(token) if token else {}
    response = client_for(tmp_path).request(method, path, headers=headers)
    assert response.status_code == 401 and response.content == b""


def test_the_shell_holds_no_data_and_no_inline_script(tmp_path: Path) -> None:
    response = client_for(tmp_path).get("/admin/ui")
    page = response.text
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page, flags=re.DOTALL)
    script = client_for(tmp_path).get("/admin/ui.js").content
    integrity = "sha384-" + base64.b64encode(hashlib.sha384(script).digest()).decode()
    # the one script, from this origin, relative to /admin/, run only if its bytes are the ones served
    assert scripts == [(f' src="ui.js" integrity="{integrity}" defer', "")]
    (style,) = re.findall(r"<style>(.*?)</style>", page, flags=re.DOTALL)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert f"style-src 'sha256-{digest}'" in response.headers["content-security-policy"]  # the inline style only
    assert '<input id="token" type="password"' in page and "name=" not in page.split("<body>", 1)[1]
    assert 'id="dashboard" hidden></div>' in page  # empty: the script fills it from the API
    for figure in ("code-embedding", "ceiling", "samespace-", "verified", TOKEN):
        assert figure not in page


def test_the_script_writes_text_only_and_keeps_the_token_in_session_storage() -> None:
    script = page_assets().script
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script
    assert "localStorage" not in script and "document.cookie" not in script
    assert "sessionStorage.setItem(TOKEN_KEY, token)" in script and f'"{TOKEN_STORAGE_KEY}"' in script
    assert '"Authorization: Bearer "' not in script and 'Authorization: "Bearer " + token' in script
    for forbidden in ("location.href =", "location.assign", "history.pushState", "history.replaceState", "?token"):
        assert forbidden not in script  # the token never reaches a URL or the history


def test_the_static_files_are_served_with_every_placeholder_filled(tmp_path: Path) -> None:
    client = client_for(tmp_path)
    for path in OPEN:
        assert re.search(r"__[A-Z_]+__", client.get(path).text) is None
    script = client.get("/admin/ui.js").text
    assert '"code-embedding"' in script and '"aggregate"' in script  # the roles and policies, as JSON


def test_the_page_is_served_inside_the_mcp_app_too(tmp_path: Path) -> None:
    from cluster.search import CodeSearchService
    from serve_apps.mcp import AskService, build_asgi_app

    settings = SamespaceSettings(
        admin={"token": TOKEN, "config_path": tmp_path / "config.json"}, serve={"token": "serve-token-for-the-ui"}
    )
    service, asker = cast(CodeSearchService, object()), cast(AskService, object())  # no tool is called here
    admin = build_admin_asgi(AdminApi(settings), settings, jobs=lambda: JOBS)
    client = TestClient(build_asgi_app(service, asker, settings, admin=admin), base_url=BASE)
    assert client.get("/admin/ui").status_code == 200  # neither the serve token nor the admin token
    assert client.get("/admin/ui.js").status_code == 200
    assert client.get("/admin/ui", headers={"host": "evil.example"}).status_code == 421  # Host is still checked
    assert client.get("/admin/jobs").status_code == 401
    assert client.get("/admin/jobs", headers=bearer(TOKEN)).status_code == 200
    assert client.get("/ui").status_code == 401  # the MCP app's own routes: the serve token


def test_the_jobs_route_lists_submitted_jobs_newest_first_and_nothing_of_their_environment(tmp_path: Path) -> None:
    response = client_for(tmp_path).get("/admin/jobs", headers=bearer(TOKEN))
    assert response.status_code == 200
    jobs = response.json()["jobs"]
    assert [j["submission_id"] for j in jobs] == ["samespace-web__b2", "samespace-api__b1", "raysubmit_other"]
    web, api, other = jobs
    assert (web["kind"], web["index"], web["build"], web["ref"], web["full"]) == (
        "reindex",
        "web",
        "web__b2",
        "feature/x",
        True,
    )
    assert (api["status"], api["start_time"], api["end_time"], api["index"]) == (
        "SUCCEEDED",
        1_700_000_000.0,
        1_700_000_030.5,
        "api",
    )
    assert (other["kind"], other["index"], other["error_type"]) == ("other", None, "x")
    assert set(api) == {"submission_id", "status", "start_time", "end_time", "error_type", "kind", "index"} | {
        "build",
        "ref",
        "full",
    }
    assert CANARY not in response.text and "entrypoint" not in response.text and "runtime_env" not in response.text
    limited = client_for(tmp_path).get("/admin/jobs?limit=1", headers=bearer(TOKEN)).json()["jobs"]
    assert [j["submission_id"] for j in limited] == ["samespace-web__b2"]
    assert client_for(tmp_path).get("/admin/jobs?limit=0", headers=bearer(TOKEN)).status_code == 422


def test_the_jobs_route_says_when_the_job_api_does_not_answer(tmp_path: Path) -> None:
    def down() -> Sequence[Any]:
        raise ConnectionError(f"dashboard at {CANARY} refused")

    response = client_for(tmp_path, jobs=down).get("/admin/jobs", headers=bearer(TOKEN))
    assert response.status_code == 503
    assert response.json() == {"detail": "the job API did not answer (ConnectionError)"}


@pytest.mark.parametrize(
    ("entrypoint", "expected"),
    [
        ("python -m jobs.reindex --repo /r --name api", ("reindex", "api", None, None)),
        ("/v/bin/python -m jobs.reindex --name=api --build-id=b1 --ref v1.2", ("reindex", "api", "b1", "v1.2")),
        ("python -m jobs.reindex --repo /r", ("reindex", None, None, None)),
        ("python -m jobs.other --name api", ("other", None, None, None)),
        ("python -m 'unbalanced --name api", ("other", None, None, None)),
        ("", ("other", None, None, None)),
    ],
)
def test_what_a_job_builds_is_read_from_its_reindex_arguments(
    entrypoint: str, expected: tuple[str, str | None, str | None, str | None]
) -> None:
    target = reindex_target(entrypoint)
    assert (target["kind"], target["index"], target["build"], target["ref"]) == expected


def test_recent_jobs_clips_what_it_shows() -> None:
    long_name = "n" * 1000
    (row,) = recent_jobs([FakeJob("s" * 1000, "PENDING", f"python -m jobs.reindex --name {long_name}", None)], 10)
    assert len(row["submission_id"]) == 200 and len(row["index"]) == 200 and row["start_time"] is None


@pytest.mark.parametrize(
    ("path", "root", "expected"),
    [
        ("/admin/ui", "/admin", "/ui"),
        ("/ui", "/admin", "/ui"),  # a server that strips the root itself
        ("/idx/admin/ui.js", "/idx/admin", "/ui.js"),
        ("/admin", "/admin", "/"),
        ("/adminx/ui", "/admin", "/adminx/ui"),
        ("/admin/admin/ui", "/admin", "/admin/ui"),
    ],
)
def test_route_path_is_the_path_below_the_root(path: str, root: str, expected: str) -> None:
    assert route_path({"path": path, "root_path": root}) == expected


def test_a_token_file_rewritten_short_while_serving_fails_closed(tmp_path: Path) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text(TOKEN)
    settings = SamespaceSettings(admin={"token_file": token_file, "config_path": tmp_path / "config.json"})
    client = TestClient(
        build_admin_asgi(AdminApi(settings), settings, jobs=lambda: JOBS), base_url=BASE, root_path="/admin"
    )
    assert client.get("/admin/jobs", headers=bearer(TOKEN)).status_code == 200
    token_file.write_text("short")
    response = client.get("/admin/jobs", headers=bearer("short"))
    assert response.status_code == 401 and b"short" not in response.content
