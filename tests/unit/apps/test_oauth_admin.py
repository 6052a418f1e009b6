"""The admin API and the operator page's data under auth.mode oauth: the admin token, or an OAuth access
token with samespace:admin (403 insufficient_scope without it, the 401 challenge for no token or a
refused one), checked before any body is parsed; the route runs as its caller."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, cast

import pytest
from starlette.testclient import TestClient

from cluster.auth import AccessScope, Principal, current_principal
from cluster.errors import TokenRejected
from cluster.settings import SamespaceSettings
from serve_apps.admin import AdminApi, build_admin_asgi
from serve_apps.admin._app import ADMIN_TOKEN_CALLER

BASE = "http://127.0.0.1:8000"
ISSUER = "https://idp.example/realms/team"
METADATA_URL = "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"
ADMIN_TOKEN = "admin-token-oauth-5521"
OPERATOR = "operator-access-token-e41a"  # samespace:admin
READER = "reader-access-token-9b07"  # samespace:read only
ALL_TOKENS = (ADMIN_TOKEN, OPERATOR, READER)
CALLERS = {
    OPERATOR: Principal(kind="oauth", subject="dana", issuer=ISSUER, scopes=frozenset({AccessScope.ADMIN.value})),
    READER: Principal(kind="oauth", subject="alice", issuer=ISSUER, scopes=frozenset({AccessScope.READ.value})),
}


class TableVerifier:
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def verify(self, token: str) -> Principal:
        self.seen.append(token)
        if token in CALLERS:
            return CALLERS[token]
        raise TokenRejected("another issuer")


class Jobs:
    """The job list the operator page reads, recording who asked (it runs in a worker thread)."""

    def __init__(self) -> None:
        self.callers: list[Principal] = []

    def __call__(self) -> list[Any]:
        self.callers.append(current_principal())
        return []


def admin_client(
    tmp_path: Path, oauth: bool = True, mounted: bool = False
) -> tuple[TestClient, Jobs, TableVerifier | None]:
    auth = {"mode": "oauth", "issuer": ISSUER} if oauth else {}
    settings = SamespaceSettings(auth=auth, admin={"token": ADMIN_TOKEN, "config_path": tmp_path / "config.json"})
    jobs, verifier = Jobs(), TableVerifier() if oauth else None
    admin = build_admin_asgi(AdminApi(settings), settings, jobs=jobs, verifier=verifier)
    if not mounted:
        return TestClient(admin, base_url=BASE, root_path="/admin"), jobs, verifier
    from serve_apps.mcp import build_asgi_app

    app = build_asgi_app(cast(Any, None), cast(Any, None), settings, admin=admin, verifier=verifier or TableVerifier())
    return TestClient(app, base_url=BASE), jobs, verifier


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.mark.parametrize("mounted", [False, True])
def test_an_admin_scope_token_and_the_admin_token_reach_the_routes_as_their_callers(
    tmp_path: Path, mounted: bool
) -> None:
    client, jobs, _ = admin_client(tmp_path, mounted=mounted)
    assert client.get("/admin/jobs", headers=bearer(OPERATOR)).json() == {"jobs": []}
    assert client.get("/admin/jobs", headers=bearer(ADMIN_TOKEN)).json() == {"jobs": []}
    assert client.get("/admin/jobs", headers={"authorization": f"bearer {ADMIN_TOKEN}"}).status_code == 200
    assert jobs.callers == [CALLERS[OPERATOR], ADMIN_TOKEN_CALLER, ADMIN_TOKEN_CALLER]
    assert (ADMIN_TOKEN_CALLER.kind, ADMIN_TOKEN_CALLER.subject) == ("token", "admin-token")
    assert ADMIN_TOKEN_CALLER.scopes == {s.value for s in AccessScope} and ADMIN_TOKEN_CALLER.is_admin


@pytest.mark.parametrize("mounted", [False, True])
def test_a_read_token_is_403_naming_samespace_admin(tmp_path: Path, mounted: bool) -> None:
    client, jobs, _ = admin_client(tmp_path, mounted=mounted)
    response = client.get("/admin/jobs", headers=bearer(READER))
    assert response.status_code == 403
    assert response.headers["www-authenticate"] == (
        f'Bearer error="insufficient_scope", scope="samespace:admin", resource_metadata="{METADATA_URL}"'
    )
    assert response.json()["scope"] == "samespace:admin"
    assert jobs.callers == []


def test_no_token_or_a_refused_one_gets_the_challenge(tmp_path: Path) -> None:
    client, jobs, verifier = admin_client(tmp_path)
    missing = client.get("/admin/jobs")
    assert (missing.status_code, missing.headers["www-authenticate"]) == (
        401,
        f'Bearer resource_metadata="{METADATA_URL}"',
    )
    refused = client.get("/admin/jobs", headers=bearer("not-the-admin-token"))
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_token"
    assert refused.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    assert jobs.callers == [] and verifier is not None and verifier.seen == ["not-the-admin-token"]


def test_the_token_is_checked_before_the_body_is_parsed(tmp_path: Path) -> None:
    client, _, _ = admin_client(tmp_path)
    json_body = {"content-type": "application/json"}
    assert client.put("/admin/budget/caps", content=b"{not json", headers=json_body).status_code == 401
    read_only = client.put("/admin/budget/caps", content=b"{not json", headers={**json_body, **bearer(READER)})
    assert read_only.status_code == 403
    admitted = client.put("/admin/budget/caps", content=b"{not json", headers={**json_body, **bearer(OPERATOR)})
    assert admitted.status_code == 422  # only now is the body read


def test_the_operator_pages_shell_stays_open_and_runs_as_no_one(tmp_path: Path) -> None:
    client, _, verifier = admin_client(tmp_path)
    assert client.get("/admin/ui").status_code == 200 and client.get("/admin/ui.js").status_code == 200
    assert verifier is not None and verifier.seen == []


def test_without_oauth_the_admin_token_alone_is_taken_and_a_refusal_has_no_detail(tmp_path: Path) -> None:
    client, jobs, _ = admin_client(tmp_path, oauth=False)
    for headers in [{}, bearer(OPERATOR)]:
        refused = client.get("/admin/jobs", headers=headers)
        assert (refused.status_code, refused.content, refused.headers.get("www-authenticate")) == (401, b"", None)
    assert client.get("/admin/jobs", headers=bearer(ADMIN_TOKEN)).status_code == 200
    assert jobs.callers == [ADMIN_TOKEN_CALLER]


def test_no_token_appears_in_an_admin_answer_or_a_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client, _, _ = admin_client(tmp_path, mounted=True)
    answers = [
        client.get("/admin/jobs", headers=bearer(READER)),
        client.get("/admin/jobs", headers=bearer(ADMIN_TOKEN + "x")),
        client.get("/admin/jobs", headers={**bearer(OPERATOR), "origin": "http://evil.example"}),
    ]
    assert [a.status_code for a in answers] == [403, 401, 403]
    assert caplog.records
    for token in ALL_TOKENS:
        assert token not in caplog.text
        assert all(token not in a.text and token not in str(a.headers) for a in answers)
