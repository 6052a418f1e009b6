"""Admin actions in the audit log (serve_apps/admin/_audit.py), on the real admin app without Ray: every
action that reached a route is one line naming the acting principal, the route's template (never the
raw path), the index it names and its outcome; reads and refused tokens are not actions; `GET
/admin/audit` filters the lines behind the same bearer check and refuses an unknown filter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cluster.auth import Principal
from cluster.errors import IndexNotFound, TokenRejected
from cluster.settings import SamespaceSettings
from serve_apps.admin import AdminApi, build_admin_asgi, replica_audit_log

BASE = "http://127.0.0.1:8000"
TOKEN = "admin-token-audit-unit"
OPERATOR_TOKEN = "operator-access-token-7d2e"
OPERATOR = Principal(kind="oauth", subject="ops-lead", client_id="console", scopes=frozenset({"samespace:admin"}))


class OperatorVerifier:
    """The issuer's verdicts, as a table: the operator's access token, nothing else."""

    async def verify(self, token: str) -> Principal:
        if token == OPERATOR_TOKEN:
            return OPERATOR
        raise TokenRejected("invalid signature")


class FakeIndexes:
    """What the index routes ask of `IndexService`: a removal, known or not."""

    async def remove(self, name: str, confined: bool) -> list[str]:
        if name != "shop":
            raise IndexNotFound(name, ["shop"])
        return [f"{name}__b1"]


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    settings = SamespaceSettings(
        admin={"token": TOKEN, "config_path": tmp_path / "config.json"},
        store={"data_dir": tmp_path / "data"},
        auth={"mode": "oauth", "issuer": "https://idp.example/realms/team"},
    )
    indexes: Any = FakeIndexes()
    app = build_admin_asgi(AdminApi(settings), settings, indexes, jobs=list, verifier=OperatorVerifier())
    return TestClient(app, base_url=BASE, root_path="/admin")


def bearer(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def records(client: TestClient, **query: str) -> list[dict[str, Any]]:
    response = client.get("/admin/audit", params=query, headers=bearer())
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["records"]
    return found


def test_each_admin_action_is_one_line_with_the_acting_principal(client: TestClient, tmp_path: Path) -> None:
    assert client.delete("/admin/indexes/shop", headers=bearer(OPERATOR_TOKEN)).status_code == 200
    assert client.delete("/admin/indexes/nope", headers=bearer(OPERATOR_TOKEN)).status_code == 404
    assert client.delete("/admin/indexes/shop", headers=bearer("wrong-token-xx")).status_code == 401
    assert client.get("/admin/jobs", headers=bearer(OPERATOR_TOKEN)).status_code == 200  # a read: not an action
    lines = records(client)
    assert [(r["action"], r["indexes"], r["outcome"]) for r in lines] == [
        ("DELETE /admin/indexes/{name}", ["nope"], "error"),
        ("DELETE /admin/indexes/{name}", ["shop"], "ok"),
    ]
    assert {(r["subject"], r["client_id"], r["kind"], r["surface"]) for r in lines} == {
        ("ops-lead", "console", "oauth", "admin")
    }
    assert (tmp_path / "data" / "audit.jsonl").exists()


def test_the_audit_route_filters_and_needs_the_token(client: TestClient) -> None:
    client.delete("/admin/indexes/shop", headers=bearer(OPERATOR_TOKEN))
    client.delete("/admin/indexes/nope", headers=bearer())  # the admin token's caller
    assert [r["subject"] for r in records(client, subject="admin-token")] == ["admin-token"]
    assert [r["subject"] for r in records(client, subject="ops-lead")] == ["ops-lead"]
    assert [r["outcome"] for r in records(client, outcome="ok")] == ["ok"]
    assert [r["indexes"] for r in records(client, index="nope")] == [["nope"]]
    assert len(records(client, limit="1")) == 1
    assert records(client, since="2999-01-01T00:00:00Z") == []
    assert client.get("/admin/audit").status_code == 401
    refused = client.get("/admin/audit", params={"sort": "<script>"}, headers=bearer())
    assert refused.status_code == 422 and "<script>" not in refused.text  # unknown filter, input never echoed
    assert client.get("/admin/audit", params={"outcome": "maybe"}, headers=bearer()).status_code == 422


def test_one_log_per_process_and_data_dir(tmp_path: Path) -> None:
    settings = SamespaceSettings(store={"data_dir": tmp_path / "a"})
    assert replica_audit_log(settings) is replica_audit_log(settings)
    assert replica_audit_log(SamespaceSettings(store={"data_dir": tmp_path / "b"})) is not replica_audit_log(settings)
