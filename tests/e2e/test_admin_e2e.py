"""The admin API on real Serve over HTTP: bearer auth, validation, the write-only key, live pushes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray

from conftest import McpServer, RayCluster

pytestmark = pytest.mark.ray

CANARY_KEY = "sk-or-v1-" + "ad31" * 12
TOKEN = "admin-token-for-tests"
NAMESPACE = "admin"
ROUTES = [("GET", "/providers"), ("GET", "/gate"), ("POST", "/gate/verify"), ("GET", "/budget"),
          ("PUT", "/budget"), ("GET", "/health"), ("GET", "/openrouter"), ("POST", "/openrouter"),
          ("POST", "/openrouter/repush"), ("GET", "/sidecars")]


@pytest.fixture(scope="module")
def admin(ray_cluster: RayCluster, mcp_server: McpServer, fake_openrouter: Any,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from ray import serve

    from cluster.settings import SamespaceSettings
    from serve_apps.admin_app import AdminIngress

    fake_openrouter.configure(keys={CANARY_KEY: {"label": "admin"}}, upstreams={"exact": {"vectors": "same"}})
    config_dir = tmp_path_factory.mktemp("admin-config")
    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": tmp_path_factory.mktemp("admin-data")},
        admin={"token": TOKEN, "config_path": config_dir / "config.json"},
        cloud={"enabled": True, "base_url": fake_openrouter.base_url,
               "routes": {"code-embedding": {"model": "qwen/qwen3-embedding-4b", "upstream": "exact"},
                          "reranker": {"model": "qwen/qwen3-reranker-8b"}}},
    )
    serve.run(AdminIngress.bind(settings), name="admin", route_prefix="/admin")
    base = f"http://127.0.0.1:{mcp_server.port}/admin"
    with httpx.Client(base_url=base, timeout=60) as client:
        yield {"client": client, "settings": settings, "config_dir": config_dir, "responses": []}
    serve.delete("admin")
    for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
        ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


def call(admin: dict[str, Any], method: str, path: str, body: Any = None, token: str | None = TOKEN) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    response = admin["client"].request(method, path, json=body, headers=headers)
    admin["responses"].append(response.text)
    return response


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize("token", [None, "wrong"])
def test_every_route_is_401_without_the_right_token(admin: dict[str, Any], method: str, path: str, token: str | None) -> None:
    response = call(admin, method, path, {"api_key": CANARY_KEY}, token=token)
    assert response.status_code == 401 and response.content == b""


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/openrouter", {"policies": {"rlm": "sometimes"}}, "policies"),
        ("POST", "/openrouter", {"policies": {"rerankr": "local"}}, "policies"),
        ("POST", "/openrouter", {"api_key": CANARY_KEY, "models": {"code-embedding": {"model": "m"}}},
         "models.code-embedding.provider"),
        ("POST", "/openrouter", {"api_key": CANARY_KEY, "models": {"reranker": {"model": "m", "dims": -1}}}, "dims"),
        ("PUT", "/budget", {"max_concurrent": 0}, "max_concurrent"),
        ("PUT", "/budget", {"max_concurrent": 999}, "max_concurrent"),
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


def test_the_key_is_pushed_to_the_containers_and_never_comes_back(admin: dict[str, Any]) -> None:
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
    assert call(admin, "POST", "/openrouter", {"policies": {"code-embedding": "backup"}}).json()["ok"]
    views = call(admin, "GET", "/providers").json()["code-embedding"]
    cloud = [v for v in views if v["provider"]["kind"] == "cloud"]
    assert cloud and all(v["policy_in_force"] == v["policy_applied"] == "backup" for v in cloud)
    assert call(admin, "GET", "/openrouter").json()["policies"]["code-embedding"] == "backup"


def test_the_budget_override_is_set_and_cleared(admin: dict[str, Any]) -> None:
    from cluster.roles import Role

    state = call(admin, "PUT", "/budget", {"max_concurrent": 32}).json()
    assert state["ceiling"] == 32 and state["source"] == "manual"
    state = call(admin, "PUT", "/budget", {"max_concurrent": None}).json()
    assert state["source"] != "manual"
    health = call(admin, "GET", "/health").json()
    assert health["ray"] == "ok" and health["roles"]["code-embedding"]["state"] == "serving"
    assert health["roles"]["code-embedding"]["serving"] and set(health["roles"]) == {r.value for r in Role}
    assert "code-embedding" in call(admin, "POST", "/gate/verify").json()


def test_the_cli_pushes_a_key_from_a_file_and_sets_a_policy(
    admin: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from serve_apps.admin_client import main

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
    assert all(v["policy_in_force"] == "aggregate" for v in views)


def test_restarted_actors_keep_the_pushed_config_and_come_back_needing_the_key(admin: dict[str, Any]) -> None:
    import time

    from actors.dispatcher import get_dispatcher
    from cluster.roles import Role

    assert call(admin, "POST", "/openrouter", {"policies": {"code-embedding": "local"}}).json()["ok"]
    ray.kill(get_dispatcher(admin["settings"], Role.CODE_EMBEDDING), no_restart=False)
    containers = [e["name"] for e in ray.util.list_named_actors(all_namespaces=True)
                  if e["namespace"] == NAMESPACE and e["name"].endswith("-OR-CodeEmbedding")]
    for name in containers:
        ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=False)
    time.sleep(2)
    views = call(admin, "GET", "/providers").json()["code-embedding"]
    assert {v["policy_in_force"] for v in views} == {"local"}  # the restarted dispatcher kept it
    cloud = [v for v in views if v["provider"]["kind"] == "cloud"]
    assert cloud and all(v["policy_applied"] == "local" for v in cloud)  # ... and so did the containers
    assert all(not v["provider"]["eligible"] and "no OpenRouter key" in v["provider"]["reason"] for v in cloud)
    assert call(admin, "POST", "/openrouter", {"api_key": CANARY_KEY}).json()["ok"]


def test_cloud_traffic_and_upstream_faults_under_the_canary_key(
    admin: dict[str, Any], fake_openrouter: Any, tmp_path: Path
) -> None:
    """A reindex and queries through the cloud path, then 401, 429, 500 and malformed answers."""
    from actors.dispatcher import get_dispatcher
    from cluster.roles import Role
    from jobs.reindex import run_reindex

    assert call(admin, "POST", "/openrouter", {"api_key": CANARY_KEY, "policies": {"code-embedding": "cloud"}}).json()["ok"]
    repo = tmp_path / "canary-repo"
    repo.mkdir()
    for f in range(4):
        (repo / f"m{f}.py").write_text("\n\n".join(f"def fn_{f}_{g}(x):\n    return x * {g}" for g in range(12)))
    record = run_reindex(admin["settings"], repo, "canary", emit=lambda line: admin["responses"].append(line))
    assert record.chunks == 48 and all("-OR-" in p for p in record.providers)  # every row via the cloud
    dispatcher = get_dispatcher(admin["settings"], Role.CODE_EMBEDDING)
    ray.get(dispatcher.encode_query.remote("multiply x", "canary"))

    container = next(ray.get_actor(e["name"], namespace=NAMESPACE) for e in ray.util.list_named_actors(all_namespaces=True)
                     if e["namespace"] == NAMESPACE and e["name"].endswith("-OR-CodeEmbedding"))
    ray.get(container.embed.remote(["def f(x): return x"], "canary", "bulk"))  # a clean cloud call first
    faults = [{"fail_rate_429": 1.0}, {"fail_5xx_rate": 1.0}, {"malformed": "invalid-json"}]
    try:
        for fault in faults:
            fake_openrouter.configure(keys={CANARY_KEY: {"label": "admin"}}, upstreams={"exact": {"vectors": "same", **fault}})
            with pytest.raises(Exception) as caught:
                ray.get(container.embed.remote(["x"], "canary", "bulk"))
            admin["responses"].append(str(caught.value))
            assert CANARY_KEY not in str(caught.value)
        fake_openrouter.configure(keys={}, upstreams={"exact": {"vectors": "same"}})  # the key is now unknown: 401
        with pytest.raises(Exception) as caught:
            ray.get(container.embed.remote(["x"], "canary", "bulk"))
        assert "AuthFailed" in str(caught.value) and CANARY_KEY not in str(caught.value)
    finally:
        fake_openrouter.configure(keys={CANARY_KEY: {"label": "admin"}}, upstreams={"exact": {"vectors": "same"}})
    for method, path in ROUTES:
        if method == "GET":
            assert call(admin, method, path).status_code == 200


def test_the_canary_key_is_nowhere_after_all_of_the_above(admin: dict[str, Any], ray_cluster: RayCluster) -> None:
    from ray.util.state import list_actors, list_tasks

    session_dir = Path(ray._private.worker._global_node.get_session_dir_path())  # noqa: SLF001
    needle = CANARY_KEY.encode()
    roots = (session_dir, admin["config_dir"], admin["settings"].store.data_dir)
    leaks = [str(p) for root in roots for p in root.rglob("*")
             if p.is_file() and p.stat().st_size < 50_000_000 and needle in p.read_bytes()]
    assert leaks == []
    assert all(CANARY_KEY not in text for text in admin["responses"])
    listings = str(list_actors(limit=10_000, detail=True)) + str(list_tasks(limit=10_000, detail=True))
    assert CANARY_KEY not in listings
