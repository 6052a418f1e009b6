"""What a virtual container holds against the durable config, and the base URL a push may carry."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.cloud.state import ContainerState, disagreements
from cluster.config.store import PersistedConfig, PersistedRole, overlay
from cluster.roles import Policy, Role
from cluster.settings import CloudSettings, RoleRoute, SamespaceSettings

STATIC_URL = "http://127.0.0.1:9/api/v1"
PUSHED_URL = "http://127.0.0.1:10/api/v1"


def settings(tmp_path: Path) -> SamespaceSettings:
    return SamespaceSettings(
        admin={"config_path": tmp_path / "config.json"},
        cloud={
            "enabled": True,
            "base_url": STATIC_URL,
            "routes": {"code-embedding": {"model": "static/model", "upstream": "old-pin"}},
        },
        policies={"code-embedding": "aggregate"},
    )


def state(route: RoleRoute, policy: Policy, base_url: str) -> ContainerState:
    return ContainerState(
        name="pc-OR-CodeEmbedding",
        role=Role.CODE_EMBEDDING,
        route=route,
        policy=policy,
        base_url=base_url,
        key_held=False,
    )


def test_a_container_holding_the_pushed_config_agrees_and_one_on_the_static_route_is_named(tmp_path: Path) -> None:
    pushed = PersistedConfig(
        roles={Role.CODE_EMBEDDING: PersistedRole(model="new/model", upstream="new-pin")},
        policies={Role.CODE_EMBEDDING: Policy.CLOUD},
        base_url=PUSHED_URL,
    )
    effective = overlay(settings(tmp_path), pushed)
    holds_push = state(RoleRoute(model="new/model", upstream="new-pin"), Policy.CLOUD, PUSHED_URL)
    assert disagreements(effective, [holds_push]) == []
    stale = state(RoleRoute(model="static/model", upstream="old-pin"), Policy.AGGREGATE, STATIC_URL)
    found = disagreements(effective, [stale])
    assert len(found) == 3
    assert "'static/model' pinned to 'old-pin', the config says 'new/model' pinned to 'new-pin'" in found[0]
    assert "applies policy aggregate, the config says cloud" in found[1]
    assert f"sends to {STATIC_URL}, the config says {PUSHED_URL}" in found[2]


def test_a_container_of_a_role_the_config_does_not_route_is_named(tmp_path: Path) -> None:
    effective = settings(tmp_path)
    rlm = ContainerState(
        name="pc-OR-Rlm",
        role=Role.RLM,
        route=RoleRoute(model="m"),
        policy=Policy.AGGREGATE,
        base_url=STATIC_URL,
        key_held=True,
    )
    assert disagreements(effective, [rlm]) == ["pc-OR-Rlm: serves rlm, which the config routes nowhere"]


def test_a_container_state_never_holds_the_key_only_whether_there_is_one() -> None:
    assert "key_held" in ContainerState.model_fields
    assert not any("secret" in str(f.annotation).lower() for f in ContainerState.model_fields.values())


@pytest.mark.parametrize("url", ["http://127.0.0.1:8765/api/v1", "https://openrouter.ai/api/v1"])
def test_a_plain_http_base_url_is_accepted(url: str) -> None:
    assert CloudSettings.check_base_url(url) == url
    assert CloudSettings(base_url=url).base_url == url


@pytest.mark.parametrize(
    "url",
    [
        "ftp://host/api",
        "openrouter.ai/api/v1",
        "http://:80/x",
        "http://host:99999/",
        "",
        "https://user:sk-or-v1-secret@openrouter.ai/api/v1",
        "https://openrouter.ai/api/v1?key=sk-or-v1-secret",
    ],
)
def test_a_base_url_that_is_not_plain_http_or_carries_a_secret_is_refused_without_echoing_it(url: str) -> None:
    with pytest.raises(ValueError, match=r"^cloud\.base_url must") as caught:
        CloudSettings.check_base_url(url)
    assert "sk-or-v1-secret" not in str(caught.value) and "host/api" not in str(caught.value)
    with pytest.raises(ValueError, match=r"cloud\.base_url must") as caught:
        CloudSettings(base_url=url)
    assert "sk-or-v1-secret" not in str(caught.value)
