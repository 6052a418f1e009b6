"""The admin API on real Serve, as its end-to-end tests drive it: the canary key and token, the routes,
one authenticated call (its answer kept for the canary scan), polling, and the moves that restart the
namespace's actors or read back what the containers and the upstream fake saw.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import ray

from tests.support.ray_cluster import McpServer, RayCluster

CANARY_KEY = "sk-or-v1-" + "ad31" * 12
TOKEN = "admin-token-for-tests"
NAMESPACE = "admin"
MODEL, PIN = "qwen/qwen3-embedding-4b", "exact"  # the fixture's code-embedding route
NEW_MODEL, NEW_PIN = "sentence-transformers/all-minilm-l6-v2", "pin-b"
FIXTURE_ROUTE = {"code-embedding": {"model": MODEL, "provider": PIN}}
DEADLINE_S = 60.0  # a condition polled for; generous, the machine is shared
ROUTES = [
    ("GET", "/providers"),
    ("GET", "/gate"),
    ("POST", "/gate/verify"),
    ("GET", "/budget"),
    ("PUT", "/budget"),
    ("PUT", "/budget/caps"),
    ("GET", "/health"),
    ("GET", "/openrouter"),
    ("POST", "/openrouter"),
    ("POST", "/openrouter/repush"),
    ("GET", "/sidecars"),
]


def call(admin: dict[str, Any], method: str, path: str, body: Any = None, token: str | None = TOKEN) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    response = admin["client"].request(method, path, json=body, headers=headers)
    admin["responses"].append(response.text)
    return response


def eventually(read: Callable[[], Any], done: Callable[[Any], bool], deadline_s: float = DEADLINE_S) -> Any:
    """Poll `read` until `done` holds of its value, or the deadline passes; the last value either way
    (the assertions after the call say what was wrong)."""
    deadline = time.monotonic() + deadline_s
    while not done(value := read()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return value


def role_answered(response: dict[str, Any], role: str = "code-embedding") -> bool:
    return bool(response["roles"][role]["status"] == "ok")


def push_key(admin: dict[str, Any]) -> None:
    """This test's own starting point: the key held, the fixture's route, the default policy."""
    assert call(
        admin,
        "POST",
        "/openrouter",
        {"api_key": CANARY_KEY, "models": FIXTURE_ROUTE, "policies": {"code-embedding": "aggregate"}},
    ).json()["ok"]


def local_embedder_answers(admin: dict[str, Any]) -> None:
    """Wait until this namespace's local embedder has loaded its model (a cold actor does not answer)."""
    from actors.dispatcher import get_dispatcher
    from cluster.build import await_reference
    from cluster.roles import Role

    dispatcher = get_dispatcher(admin["settings"], Role.CODE_EMBEDDING)
    await_reference(lambda: ray.get(dispatcher.reference.remote()), 300.0, lambda line: None)


def restarted(handle: Any, address: str) -> None:
    """Kill an actor and wait until Ray restarted it and it is alive again (restarts are slow on a
    loaded machine, and a kill lands asynchronously: a fixed sleep was a flake)."""
    import time

    from ray.util.state import get_actor

    actor_id = handle._actor_id.hex()  # noqa: SLF001  a handle has no public id; the state API needs it
    before = get_actor(actor_id, address=address).num_restarts
    ray.kill(handle, no_restart=False)
    deadline = time.monotonic() + 120
    while (now := get_actor(actor_id, address=address)).num_restarts == before or now.state != "ALIVE":
        assert time.monotonic() < deadline, "the killed actor did not come back within 120 s"
        time.sleep(0.5)


def restart_code_embedding_containers(admin: dict[str, Any]) -> None:
    """Kill this namespace's code-embedding containers; Ray restarts them (with no key)."""
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry["namespace"] == NAMESPACE and entry["name"].endswith("-OR-CodeEmbedding"):
            restarted(ray.get_actor(entry["name"], namespace=NAMESPACE), admin["dashboard"])


def embeds(fake: Any, **filters: str) -> int:
    """Embedding requests the fake answered, by the model and the pinned upstream they named."""
    return int(fake.stats().total("ok", path="/embeddings", **filters))


def cloud_views(admin: dict[str, Any], role: str = "code-embedding") -> list[dict[str, Any]]:
    return [v for v in call(admin, "GET", "/providers").json()[role] if v["provider"]["kind"] == "cloud"]


def containers_of(state: dict[str, Any], role: str = "code-embedding") -> list[dict[str, Any]]:
    return [c for c in state["containers"] if c["role"] == role]


@contextmanager
def serving_admin(
    ray_cluster: RayCluster, mcp_server: McpServer, fake_openrouter: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """The admin app on this session's Serve in its own namespace, with an authenticated client, the
    settings, the config folder and the answers the tests got; its app and actors go when it closes."""
    from ray import serve

    from cluster.settings import SamespaceSettings
    from serve_apps.admin import AdminIngress

    fake_openrouter.configure(keys={CANARY_KEY: {"label": "admin"}}, upstreams={"exact": {"vectors": "same"}})
    config_dir = tmp_path_factory.mktemp("admin-config")
    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": tmp_path_factory.mktemp("admin-data")},
        admin={"token": TOKEN, "config_path": config_dir / "config.json"},
        cloud={
            "enabled": True,
            "base_url": fake_openrouter.base_url,
            "routes": {
                "code-embedding": {"model": "qwen/qwen3-embedding-4b", "upstream": "exact"},
                "reranker": {"model": "qwen/qwen3-reranker-8b"},
            },
        },
    )
    serve.run(AdminIngress.bind(settings), name="admin", route_prefix="/admin")
    base = f"http://127.0.0.1:{mcp_server.port}/admin"
    with httpx.Client(base_url=base, timeout=60) as client:
        yield {
            "client": client,
            "settings": settings,
            "config_dir": config_dir,
            "responses": [],
            "dashboard": ray_cluster.dashboard_url,
        }
    serve.delete("admin")
    for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
        ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))
