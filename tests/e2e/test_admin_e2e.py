"""The admin API on real Serve over HTTP: bearer auth, validation, the write-only key, live pushes.

One module on purpose: its last test scans the config, the data and every answer this module's admin
app gave for the canary key. The constants, the app and the helpers: tests/support/admin_api.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

from tests.support.admin_api import (
    CANARY_KEY,
    FIXTURE_ROUTE,
    MODEL,
    NAMESPACE,
    NEW_MODEL,
    NEW_PIN,
    PIN,
    ROUTES,
    TOKEN,
    call,
    cloud_views,
    containers_of,
    embeds,
    eventually,
    local_embedder_answers,
    push_key,
    restart_code_embedding_containers,
    restarted,
    role_answered,
    serving_admin,
)
from tests.support.ray_cluster import McpServer, RayCluster

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def admin(
    ray_cluster: RayCluster, mcp_server: McpServer, fake_openrouter: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    with serving_admin(ray_cluster, mcp_server, fake_openrouter, tmp_path_factory) as served:
        yield served


@pytest.fixture
def no_key_anywhere(admin: dict[str, Any]) -> None:
    """A fresh cluster's state: nothing pushed, every container as configured and keyless."""
    from actors.registry import ensure_cloud_containers
    from cluster.config.store import ConfigStore, PersistedConfig

    ConfigStore(admin["settings"].admin.config_path).write(PersistedConfig())
    assert call(admin, "POST", "/openrouter/repush").json()["ok"]
    containers = ensure_cloud_containers(admin["settings"])
    assert containers
    ray.get([c.handle.set_key.remote(None) for c in containers])


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize("token", [None, "wrong"])
def test_every_route_is_401_without_the_right_token(
    admin: dict[str, Any], method: str, path: str, token: str | None
) -> None:
    response = call(admin, method, path, {"api_key": CANARY_KEY}, token=token)
    assert response.status_code == 401 and response.content == b""


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/openrouter", {"policies": {"rlm": "sometimes"}}, "policies"),
        ("POST", "/openrouter", {"policies": {"rerankr": "local"}}, "policies"),
        (
            "POST",
            "/openrouter",
            {"api_key": CANARY_KEY, "models": {"code-embedding": {"model": "m"}}},
            "models.code-embedding.provider",
        ),
        ("POST", "/openrouter", {"api_key": CANARY_KEY, "models": {"reranker": {"model": "m", "dims": -1}}}, "dims"),
        ("POST", "/openrouter", {"base_url": "https://user:" + CANARY_KEY + "@openrouter.ai/api/v1"}, "base_url"),
        ("POST", "/openrouter", {"base_url": "ftp://openrouter.ai/api/v1"}, "base_url"),
        ("PUT", "/budget", {"max_concurrent": 0}, "max_concurrent"),
        ("PUT", "/budget", {"max_concurrent": 999}, "max_concurrent"),
        ("PUT", "/budget/caps", {"caps": {"code-embedding": -1}}, '"caps","code-embedding"'),
        ("PUT", "/budget/caps", {"caps": {"rerankr": 1.0}}, "caps"),
        ("PUT", "/budget/caps", {"caps": {}}, "caps"),
    ],
)
def test_a_bad_body_is_422_naming_the_field_and_changes_nothing(
    admin: dict[str, Any], method: str, path: str, body: dict[str, Any], field: str
) -> None:
    before = call(admin, "GET", "/openrouter").json()
    response = call(admin, method, path, body)
    assert response.status_code == 422 and field in response.text
    assert CANARY_KEY not in response.text  # never echoes input
    assert call(admin, "GET", "/openrouter").json() == before


def test_the_key_is_pushed_to_the_containers_and_never_comes_back(admin: dict[str, Any], no_key_anywhere: None) -> None:
    refused = call(admin, "POST", "/openrouter", {"policies": {"code-embedding": "aggregate"}}).json()
    assert refused["ok"] is False and "no key has been pushed" in refused["issues"][0]
    pushed = call(admin, "POST", "/openrouter", {"api_key": CANARY_KEY}).json()
    assert pushed["ok"] and any(name.endswith("-OR-CodeEmbedding") for name in pushed["pushed_to"])
    state = call(admin, "GET", "/openrouter").json()
    assert state["key_pushed"] is True and state["last_pushed_at"] > 0
    assert CANARY_KEY not in str(state) and CANARY_KEY[-4:] not in str(state)
    providers = call(admin, "GET", "/providers").json()
    cloud = [v for v in providers["code-embedding"] if v["provider"]["kind"] == "cloud"]
    assert cloud and all(v["provider"]["eligible"] for v in cloud)


def test_a_policy_change_reaches_the_providers(admin: dict[str, Any]) -> None:
    push_key(admin)
    try:
        assert call(admin, "POST", "/openrouter", {"policies": {"code-embedding": "backup"}}).json()["ok"]
        views = call(admin, "GET", "/providers").json()["code-embedding"]
        cloud = [v for v in views if v["provider"]["kind"] == "cloud"]
        assert cloud and all(v["policy_in_force"] == v["policy_applied"] == "backup" for v in cloud)
        assert call(admin, "GET", "/openrouter").json()["policies"]["code-embedding"] == "backup"
    finally:
        assert call(admin, "POST", "/openrouter", {"policies": {"code-embedding": "aggregate"}}).json()["ok"]


def test_spend_caps_are_set_shown_persisted_and_removed(admin: dict[str, Any]) -> None:
    from cluster.config import ConfigStore

    try:
        spend = call(admin, "PUT", "/budget/caps", {"caps": {"rlm": 0.5, "code-assistant": 2}}).json()["spend"]
        assert spend["roles"]["rlm"]["cap"] == 0.5 and spend["roles"]["rlm"]["state"] == "ok"
        shown = call(admin, "GET", "/budget").json()["spend"]
        assert shown["roles"]["code-assistant"]["cap"] == 2 and shown["resets_at"].endswith("T00:00:00+00:00")
        stored = ConfigStore(admin["settings"].admin.config_path).read().spend_caps
        assert {role.value: cap for role, cap in stored.items()} == {"rlm": 0.5, "code-assistant": 2.0}
    finally:
        spend = call(admin, "PUT", "/budget/caps", {"caps": {"rlm": None, "code-assistant": None}}).json()["spend"]
    assert all(view["state"] == "uncapped" for view in spend["roles"].values())


def test_the_budget_override_is_set_and_cleared(admin: dict[str, Any]) -> None:
    from cluster.roles import Role

    state = call(admin, "PUT", "/budget", {"max_concurrent": 32}).json()
    assert state["ceiling"] == 32 and state["source"] == "manual"
    state = call(admin, "PUT", "/budget", {"max_concurrent": None}).json()
    assert state["source"] != "manual"
    assert call(
        admin,
        "POST",
        "/openrouter",
        {"api_key": CANARY_KEY, "models": FIXTURE_ROUTE, "policies": {"code-embedding": "aggregate"}},
    ).json()["ok"]
    local_embedder_answers(admin)
    health = call(admin, "GET", "/health").json()
    assert health["ray"] == "ok" and health["roles"]["code-embedding"]["state"] == "serving"
    assert health["roles"]["code-embedding"]["serving"] and set(health["roles"]) == {r.value for r in Role}
    assert "code-embedding" in call(admin, "POST", "/gate/verify").json()


def test_the_cli_pushes_a_key_from_a_file_and_sets_a_policy(
    admin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from samespace.clients import admin_command as main

    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    key_file = tmp_path / "key"
    key_file.write_text(CANARY_KEY + "\n")
    monkeypatch.setenv("SAMESPACE_ADMIN__TOKEN_FILE", str(token_file))
    url = str(admin["client"].base_url)
    assert main(["--url", url, "push-key", "--file", str(key_file)]) == 0
    assert main(["--url", url, "set-policy", "code-embedding", "aggregate"]) == 0
    assert main(["--url", url, "status"]) == 0
    out = capsys.readouterr().out
    admin["responses"].append(out)
    assert '"ok": true' in out and CANARY_KEY not in out
    views = call(admin, "GET", "/providers").json()["code-embedding"]
    assert views and all(v["policy_in_force"] == "aggregate" for v in views)


def test_restarted_actors_keep_the_pushed_config_and_come_back_needing_the_key(
    admin: dict[str, Any], fake_openrouter: Any
) -> None:
    from actors.dispatcher import get_dispatcher
    from cluster.roles import Role

    same_server = fake_openrouter.base_url + "/"  # another spelling of the fake: a different pushed value
    push = {
        "api_key": CANARY_KEY,
        "policies": {"code-embedding": "local"},
        "base_url": same_server,
        "models": {"code-embedding": {"model": NEW_MODEL, "provider": NEW_PIN}},
    }
    try:
        assert call(admin, "POST", "/openrouter", push).json()["ok"]
        restarted(get_dispatcher(admin["settings"], Role.CODE_EMBEDDING), admin["dashboard"])
        restart_code_embedding_containers(admin)

        def back(providers: dict[str, Any]) -> bool:  # the dispatcher answers and every container describes itself
            cloud = [v for v in providers["code-embedding"] if v["provider"]["kind"] == "cloud"]
            return (
                role_answered(providers)
                and bool(cloud)
                and all("did not answer" not in (v["provider"]["reason"] or "") for v in cloud)
            )

        providers = eventually(lambda: call(admin, "GET", "/providers").json(), back)
        assert role_answered(providers), providers["roles"]
        views = providers["code-embedding"]
        assert {v["policy_in_force"] for v in views} == {"local"}  # the restarted dispatcher kept it
        cloud = [v for v in views if v["provider"]["kind"] == "cloud"]
        assert cloud and all(v["policy_applied"] == "local" for v in cloud)  # ... and so did the containers
        assert all(not v["provider"]["eligible"] and "no OpenRouter key" in v["provider"]["reason"] for v in cloud)
        assert all((v["provider"]["model"], v["provider"]["upstream"]) == (NEW_MODEL, NEW_PIN) for v in cloud)
        state = call(admin, "GET", "/openrouter").json()
        held = containers_of(state)
        assert held and all(c["base_url"] == same_server and not c["key_held"] for c in held)  # the pushed URL
        assert state["disagreements"] == [] and state["base_url"] == same_server
    finally:
        restore = {"api_key": CANARY_KEY, "base_url": fake_openrouter.base_url, "models": FIXTURE_ROUTE}
        assert call(admin, "POST", "/openrouter", restore).json()["ok"]


def test_one_push_of_model_pin_and_policy_is_what_the_upstream_receives(
    admin: dict[str, Any], fake_openrouter: Any
) -> None:
    """Models and policies in ONE push; the next cloud call names the new model and pin."""
    from actors.dispatcher import get_dispatcher
    from cluster.roles import Role

    assert call(
        admin,
        "POST",
        "/openrouter",
        {"api_key": CANARY_KEY, "models": FIXTURE_ROUTE, "policies": {"code-embedding": "aggregate"}},
    ).json()["ok"]
    push = {
        "models": {"code-embedding": {"model": NEW_MODEL, "provider": NEW_PIN}},
        "policies": {"code-embedding": "cloud"},
    }
    try:
        pushed = call(admin, "POST", "/openrouter", push).json()
        assert pushed["ok"] and pushed["issues"] == [], pushed
        old, new = (
            embeds(fake_openrouter, model=MODEL, upstream=PIN),
            embeds(fake_openrouter, model=NEW_MODEL, upstream=NEW_PIN),
        )
        dispatcher = get_dispatcher(admin["settings"], Role.CODE_EMBEDDING)
        _, identity, provider = ray.get(dispatcher.encode_query.remote("multiply x", "pins"))
        assert provider.endswith("-OR-CodeEmbedding")  # policy cloud: the query went to the cloud
        assert identity.model == f"openrouter:{NEW_MODEL}" and identity.weights_sha256 == f"upstream:{NEW_PIN}"
        assert embeds(fake_openrouter, model=NEW_MODEL, upstream=NEW_PIN) > new  # the upstream got the new pin
        assert embeds(fake_openrouter, model=MODEL, upstream=PIN) == old  # ... and not one call on the old

        state = call(admin, "GET", "/openrouter").json()
        assert state["roles"]["code-embedding"]["model"] == NEW_MODEL and state["policies"]["code-embedding"] == "cloud"
        held = containers_of(state)
        assert held and all(
            (c["route"]["model"], c["route"]["upstream"], c["policy"]) == (NEW_MODEL, NEW_PIN, "cloud") for c in held
        )
        assert state["disagreements"] == []
        cloud = cloud_views(admin)
        assert cloud and all(
            v["provider"]["model"] == NEW_MODEL
            and v["provider"]["upstream"] == NEW_PIN
            and v["policy_in_force"] == v["policy_applied"] == "cloud"
            and v["serves"] == "pool"
            for v in cloud
        )
    finally:
        restore = {"models": FIXTURE_ROUTE, "policies": {"code-embedding": "aggregate"}}
        assert call(admin, "POST", "/openrouter", restore).json()["ok"]


def test_a_pushed_base_url_reaches_the_running_containers(admin: dict[str, Any], fake_openrouter: Any) -> None:
    from actors.dispatcher import get_dispatcher
    from cluster.roles import Role
    from tests.support.fakes.openrouter_fake import FakeConfig, KeyConfig
    from tests.support.fakes.openrouter_server import FakeOpenRouterServer

    setup = {"api_key": CANARY_KEY, "models": FIXTURE_ROUTE, "policies": {"code-embedding": "cloud"}}
    with FakeOpenRouterServer(config=FakeConfig(keys={CANARY_KEY: KeyConfig(label="second")}), preload=False) as second:
        try:
            assert call(admin, "POST", "/openrouter", setup).json()["ok"]
            assert call(admin, "POST", "/openrouter", {"base_url": second.base_url}).json()["ok"]
            first_before = embeds(fake_openrouter)
            dispatcher = get_dispatcher(admin["settings"], Role.CODE_EMBEDDING)
            _, _, provider = ray.get(dispatcher.encode_query.remote("multiply y", "second"))
            assert provider.endswith("-OR-CodeEmbedding")
            assert embeds(second, model=MODEL, upstream=PIN) >= 1  # the running container sent it there
            assert embeds(fake_openrouter) == first_before  # ... and nothing to the old URL
            state = call(admin, "GET", "/openrouter").json()
            assert state["base_url"] == state["pushed"]["base_url"] == second.base_url
            assert state["containers"] and all(c["base_url"] == second.base_url for c in state["containers"])
            assert state["disagreements"] == []
        finally:
            restore = {"base_url": fake_openrouter.base_url, "policies": {"code-embedding": "aggregate"}}
            assert call(admin, "POST", "/openrouter", restore).json()["ok"]


def test_a_container_started_under_a_push_forgets_it_when_the_store_does(
    admin: dict[str, Any], fake_openrouter: Any, no_key_anywhere: None
) -> None:
    """A container created while a base URL was pushed is started from the configured settings,
    not from that push: once the store is reset, a restart brings it back with the configured URL
    (it once came back with the old push, which the admin API then reported as a disagreement)."""
    from actors.registry import ensure_cloud_containers

    pushed = fake_openrouter.base_url + "/"
    for container in ensure_cloud_containers(admin["settings"]):  # gone for good: the next push creates them
        ray.kill(container.handle, no_restart=True)
    try:
        assert call(admin, "POST", "/openrouter", {"api_key": CANARY_KEY, "base_url": pushed}).json()["ok"]
        assert {c["base_url"] for c in containers_of(call(admin, "GET", "/openrouter").json())} == {pushed}
    finally:
        from cluster.config.store import ConfigStore, PersistedConfig

        ConfigStore(admin["settings"].admin.config_path).write(PersistedConfig())  # nothing pushed any more
        assert call(admin, "POST", "/openrouter/repush").json()["ok"]
    restart_code_embedding_containers(admin)
    state = call(admin, "GET", "/openrouter").json()
    held = containers_of(state)
    assert held and {c["base_url"] for c in held} == {fake_openrouter.base_url}, state
    assert state["disagreements"] == []


def test_health_and_status_say_once_that_a_restart_lost_the_key(
    admin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from actors.config_push import key_problem
    from samespace.clients import admin_command as main

    way_out = "`make set-policy ROLE=code-embedding POLICY=local`"
    assert call(
        admin,
        "POST",
        "/openrouter",
        {"api_key": CANARY_KEY, "models": FIXTURE_ROUTE, "policies": {"code-embedding": "cloud"}},
    ).json()["ok"]
    try:
        assert call(admin, "GET", "/health").json()["problems"] == []  # a key is held: nothing to say
        restart_code_embedding_containers(admin)
        health = eventually(lambda: call(admin, "GET", "/health").json(), lambda h: len(h["problems"]) == 1)
        assert health["roles"]["code-embedding"] == {"policy": "cloud", "serving": [], "state": "none"}
        assert len(health["problems"]) == 1, (health, cloud_views(admin))
        (problem,) = health["problems"]
        assert "code-embedding (policy cloud) needs one" in problem and "a restart forgets it" in problem
        assert "`make push-key < key.txt`" in problem and way_out in problem and "\n" not in problem
        assert key_problem(admin["settings"]) == problem  # what the reindex job prints, from a driver

        token_file = tmp_path / "token"
        token_file.write_text(TOKEN)
        monkeypatch.setenv("SAMESPACE_ADMIN__TOKEN_FILE", str(token_file))
        url = str(admin["client"].base_url)
        assert main(["--url", url, "status"]) == 0
        out = capsys.readouterr().out
        admin["responses"].append(out)
        assert out.count(problem) == 1 and "Traceback" not in out

        assert main(["--url", url, "set-policy", "code-embedding", "local"]) == 0  # the second way out
        assert call(admin, "GET", "/health").json()["problems"] == []
        assert call(admin, "POST", "/openrouter", {"policies": {"code-embedding": "cloud"}}).json()["ok"]
        assert len(call(admin, "GET", "/health").json()["problems"]) == 1
        assert call(admin, "POST", "/openrouter", {"api_key": CANARY_KEY}).json()["ok"]  # the first way out
        assert call(admin, "GET", "/health").json()["problems"] == []
        assert main(["--url", url, "status"]) == 0
        assert "make push-key" not in capsys.readouterr().out
    finally:
        restore = {"api_key": CANARY_KEY, "policies": {"code-embedding": "aggregate"}}
        assert call(admin, "POST", "/openrouter", restore).json()["ok"]


def test_cloud_traffic_and_upstream_faults_under_the_canary_key(
    admin: dict[str, Any], fake_openrouter: Any, tmp_path: Path
) -> None:
    """A reindex and queries through the cloud path, then 401, 429, 500 and malformed answers."""
    from actors.build_ports import run_reindex
    from actors.dispatcher import get_dispatcher
    from cluster.errors import AuthFailed, MalformedResponse, RateLimited, UpstreamError, UpstreamUnavailable
    from cluster.roles import Role

    assert call(
        admin,
        "POST",
        "/openrouter",
        {"api_key": CANARY_KEY, "models": FIXTURE_ROUTE, "policies": {"code-embedding": "cloud"}},
    ).json()["ok"]
    repo = tmp_path / "canary-repo"
    repo.mkdir()
    for f in range(4):
        (repo / f"m{f}.py").write_text("\n\n".join(f"def fn_{f}_{g}(x):\n    return x * {g}" for g in range(12)))
    record = run_reindex(admin["settings"], repo, "canary", emit=lambda line: admin["responses"].append(line))
    assert record.chunks == 48 and all("-OR-" in p for p in record.providers)  # every row via the cloud
    dispatcher = get_dispatcher(admin["settings"], Role.CODE_EMBEDDING)
    ray.get(dispatcher.encode_query.remote("multiply x", "canary"))

    container = next(
        ray.get_actor(e["name"], namespace=NAMESPACE)
        for e in ray.util.list_named_actors(all_namespaces=True)
        if e["namespace"] == NAMESPACE and e["name"].endswith("-OR-CodeEmbedding")
    )
    ray.get(container.embed.remote(["def f(x): return x"], "canary", "bulk"))  # a clean cloud call first
    faults: list[tuple[dict[str, Any], type[UpstreamError]]] = [
        ({"fail_rate_429": 1.0}, RateLimited),
        ({"fail_5xx_rate": 1.0}, UpstreamUnavailable),
        ({"malformed": "invalid-json"}, MalformedResponse),
    ]
    try:
        for fault, expected in faults:
            fake_openrouter.configure(
                keys={CANARY_KEY: {"label": "admin"}}, upstreams={"exact": {"vectors": "same", **fault}}
            )
            with pytest.raises(expected) as caught:  # the actor's own error type reaches the caller
                ray.get(container.embed.remote(["x"], "canary", "bulk"))
            admin["responses"].append(str(caught.value))
            assert CANARY_KEY not in str(caught.value)
        fake_openrouter.configure(keys={}, upstreams={"exact": {"vectors": "same"}})  # the key is now unknown: 401
        with pytest.raises(AuthFailed) as refused:
            ray.get(container.embed.remote(["x"], "canary", "bulk"))
        assert CANARY_KEY not in str(refused.value)
    finally:
        fake_openrouter.configure(keys={CANARY_KEY: {"label": "admin"}}, upstreams={"exact": {"vectors": "same"}})
    for method, path in ROUTES:
        if method == "GET":
            assert call(admin, method, path).status_code == 200


def test_the_canary_key_is_nowhere_after_all_of_the_above(admin: dict[str, Any], ray_cluster: RayCluster) -> None:
    from ray.util.state import list_actors, list_tasks

    push_key(admin)  # this test's own key traffic, whatever ran before it
    for method, path in ROUTES:
        if method == "GET":
            assert call(admin, method, path).status_code == 200
    session_dir = Path(ray._private.worker._global_node.get_session_dir_path())  # noqa: SLF001  no public accessor
    needle = CANARY_KEY.encode()
    roots = (session_dir, admin["config_dir"], admin["settings"].store.data_dir)
    leaks = [
        str(p)
        for root in roots
        for p in root.rglob("*")
        if p.is_file() and p.stat().st_size < 50_000_000 and needle in p.read_bytes()
    ]
    assert leaks == []
    assert all(CANARY_KEY not in text for text in admin["responses"])
    address = ray_cluster.dashboard_url  # this session's Ray: others may run beside it
    listings = str(list_actors(address=address, limit=10_000, detail=True)) + str(
        list_tasks(address=address, limit=200_000, detail=True)  # a whole suite's tasks (tests/conftest.py)
    )
    assert CANARY_KEY not in listings
