"""`POST /admin/openrouter` with `targets`: a target matching nothing is a 400 naming the field (never the
value, never the key) before anything is persisted or sent; a matched push hands the narrowed targets to
the actors and answers which containers took the key, by name. No Ray: the cloud is off in the cluster,
the sidecars and the actors' side are fakes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from starlette.testclient import TestClient

import actors.config_push
from cluster.admin import KeyTargets, PushPlan
from cluster.config.store import ConfigStore
from cluster.fleet import VirtualContainerView, VirtualHost
from cluster.roles import Role
from cluster.settings import SamespaceSettings
from serve_apps.admin import AdminApi, build_admin_asgi

ADMIN_TOKEN = "admin-token-key-push-7731"
KEY = "sk-or-v1-" + "c3" * 24


def view(name: str, role: Role) -> VirtualContainerView:
    return VirtualContainerView(name=name, own_name=name, role=role, key_held=False)


WS7 = VirtualHost(
    agent_id="a7",
    agent_url="http://ws-7:8098",
    hostname="ws-7",
    containers=[view("ws-7-OR-CodeEmbedding", Role.CODE_EMBEDDING), view("ws-7-OR-Reranker", Role.RERANKER)],
)


class Sent:
    """The actors' side of a push (`actors.config_push.put_in_force`), recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[PushPlan, SecretStr | None, KeyTargets | None]] = []

    async def __call__(
        self, settings: SamespaceSettings, plan: PushPlan, key: SecretStr | None, targets: KeyTargets | None = None
    ) -> tuple[list[Any], list[str], list[str]]:
        self.calls.append((plan, key, targets))
        named = (targets.sidecars.get("a7") or []) if targets is not None else []
        return [], [], list(named)


@pytest.fixture
def pushed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TestClient, Sent, Path]:
    config = tmp_path / "config.json"
    settings = SamespaceSettings(admin={"token": ADMIN_TOKEN, "config_path": config})
    api = AdminApi(settings)

    async def sidecar_hosts() -> list[VirtualHost]:
        return [WS7]

    monkeypatch.setattr(api, "_sidecar_hosts", sidecar_hosts)
    sent = Sent()
    monkeypatch.setattr(actors.config_push, "put_in_force", sent)
    client = TestClient(
        build_admin_asgi(api, settings, jobs=list), base_url="http://127.0.0.1:8000", root_path="/admin"
    )
    return client, sent, config


def post(client: TestClient, body: dict[str, Any]) -> Any:
    return client.post("/admin/openrouter", json=body, headers={"authorization": f"Bearer {ADMIN_TOKEN}"})


def test_a_target_matching_nothing_is_a_400_naming_the_field_and_nothing_is_persisted_or_sent(
    pushed: tuple[TestClient, Sent, Path],
) -> None:
    client, sent, config = pushed
    answer = post(client, {"api_key": KEY, "targets": ["ws-7", "ws-99-secretish"]})
    assert answer.status_code == 400
    detail = answer.json()["detail"]
    assert "targets" in detail and "targets[1]" in detail
    assert "ws-99-secretish" not in answer.text and KEY not in answer.text
    assert sent.calls == [] and not ConfigStore(config).read().key_pushed


def test_targets_without_a_key_are_refused_as_a_bad_body_without_echoing_it(
    pushed: tuple[TestClient, Sent, Path],
) -> None:
    client, sent, _ = pushed
    answer = post(client, {"targets": ["ws-7"]})
    assert answer.status_code == 422 and "ws-7" not in answer.text and sent.calls == []


def test_a_targeted_push_sends_the_narrowed_targets_and_says_which_containers_took_the_key(
    pushed: tuple[TestClient, Sent, Path],
) -> None:
    client, sent, config = pushed
    answer = post(client, {"api_key": KEY, "targets": ["ws-7-OR-CodeEmbedding"]})
    assert answer.status_code == 200
    body = answer.json()
    assert body["key_to"] == ["ws-7-OR-CodeEmbedding"] and body["pushed_to"] == ["ws-7-OR-CodeEmbedding"]
    assert KEY not in answer.text
    [(plan, key, targets)] = sent.calls
    assert plan.sends_key and key is not None and key.get_secret_value() == KEY
    assert targets == KeyTargets(in_cluster=frozenset(), sidecars={"a7": ["ws-7-OR-CodeEmbedding"]})
    stored = ConfigStore(config).read()
    assert stored.key_pushed and KEY not in config.read_text()


def test_a_push_without_targets_sends_the_key_everywhere(pushed: tuple[TestClient, Sent, Path]) -> None:
    client, sent, _ = pushed
    assert post(client, {"api_key": KEY}).status_code == 200
    [(_, _, targets)] = sent.calls
    assert targets == KeyTargets(in_cluster=None, sidecars={"a7": None})
