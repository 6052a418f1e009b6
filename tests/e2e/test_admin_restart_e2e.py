"""The admin's status routes answer while an actor restarts: 200, that role `restarting` (or
`unavailable` once it is gone for good), the other roles as usual. Never a 500."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray

from tests.support.ray_cluster import McpServer, RayCluster

pytestmark = pytest.mark.ray

TOKEN = "admin-token-for-restart-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NAMESPACE = "admin-restart"  # the Serve app's actors
STAND_IN_NAMESPACE = "admin-stand-in"  # the in-process app's real dispatchers
RESTART_DEADLINE_S = 120.0  # restarts start processes: slow on a loaded, shared machine
STATUS_ROUTES = ("/providers", "/health", "/gate", "/sidecars", "/openrouter")


def kill_namespace(namespace: str) -> None:
    for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == namespace]:
        ray.kill(ray.get_actor(entry["name"], namespace=namespace))


@pytest.fixture(scope="module")
def served(
    ray_cluster: RayCluster, mcp_server: McpServer, fake_openrouter: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """The admin app on real Serve, with the cloud on (one code-embedding container per PC)."""
    from ray import serve

    from cluster.settings import SamespaceSettings
    from serve_apps.admin import AdminIngress

    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": tmp_path_factory.mktemp("restart-data")},
        admin={"token": TOKEN, "config_path": tmp_path_factory.mktemp("restart-config") / "config.json"},
        cloud={
            "enabled": True,
            "base_url": fake_openrouter.base_url,
            "routes": {"code-embedding": {"model": "qwen/qwen3-embedding-4b", "upstream": "exact"}},
        },
    )
    serve.run(AdminIngress.bind(settings), name="admin-restart", route_prefix="/admin-restart")
    base = f"http://127.0.0.1:{mcp_server.port}/admin-restart"
    with httpx.Client(base_url=base, headers=AUTH, timeout=120) as client:
        yield {"client": client, "settings": settings}
    serve.delete("admin-restart")
    kill_namespace(NAMESPACE)


@pytest.fixture(scope="module")
def in_process(ray_cluster: RayCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Settings for an admin app built in this process, whose embedding dispatcher a test replaces."""
    from cluster.settings import SamespaceSettings

    settings = SamespaceSettings(
        ray={"namespace": STAND_IN_NAMESPACE},
        store={"data_dir": tmp_path_factory.mktemp("stand-in-data")},
        admin={"token": TOKEN, "config_path": tmp_path_factory.mktemp("stand-in-config") / "config.json"},
    )
    yield {"settings": settings, "dashboard": ray_cluster.dashboard_url}
    kill_namespace(STAND_IN_NAMESPACE)


def stand_in_class() -> Any:
    """An embedding dispatcher's stand-in whose restart waits while the file `hold` exists: the
    restart window stays open until the test closes it. Defined in a function so that Ray ships
    the class by value (workers cannot import this test module)."""

    @ray.remote(num_cpus=0, max_restarts=-1)
    class StandInDispatcher:
        def __init__(self, hold: str) -> None:
            while Path(hold).exists():
                time.sleep(0.1)

        def providers(self) -> list[Any]:
            return []

        def gate_reports(self) -> list[Any]:
            return []

    return StandInDispatcher


def actor_state_is(handle: Any, state: str, dashboard: str) -> None:
    """Wait until Ray reports the actor in `state` (a kill lands asynchronously)."""
    from ray.util.state import get_actor

    actor_id = handle._actor_id.hex()  # noqa: SLF001 - the id the state API is keyed by
    deadline = time.monotonic() + RESTART_DEADLINE_S
    while (seen := get_actor(actor_id, address=dashboard)) is None or seen.state != state:
        assert time.monotonic() < deadline, f"the actor never reached {state} (last seen: {seen and seen.state})"
        time.sleep(0.2)


def until(read: Callable[[], Any], done: Callable[[Any], bool], deadline_s: float = RESTART_DEADLINE_S) -> Any:
    deadline = time.monotonic() + deadline_s
    while not done(value := read()) and time.monotonic() < deadline:
        time.sleep(0.3)
    return value


def statuses(providers: dict[str, Any]) -> dict[str, str]:
    return {role: answer["status"] for role, answer in providers["roles"].items()}


def test_status_routes_answer_200_while_the_dispatchers_and_containers_restart(served: dict[str, Any]) -> None:
    from actors.dispatcher import get_dispatcher
    from actors.registry import ensure_cloud_containers
    from cluster.roles import Role

    client, settings = served["client"], served["settings"]
    assert client.get("/openrouter").status_code == 200  # the containers exist
    before = client.get("/providers").json()
    assert set(statuses(before).values()) == {"ok"} and set(statuses(before)) == {r.value for r in Role}
    containers = ensure_cloud_containers(settings)
    assert containers
    for handle in [get_dispatcher(settings, role) for role in Role] + [c.handle for c in containers]:
        ray.kill(handle, no_restart=False)

    seen: set[str] = set()

    def read() -> dict[str, Any]:  # every status route, at once and again until the roles are back
        for path in STATUS_ROUTES:
            response = client.get(path)
            assert response.status_code == 200, (path, response.text)
        providers: dict[str, Any] = client.get("/providers").json()
        seen.update(statuses(providers).values())
        return providers

    def back(providers: dict[str, Any]) -> bool:
        cloud = [v for v in providers["code-embedding"] if v["provider"]["kind"] == "cloud"]
        return (
            set(statuses(providers).values()) == {"ok"}
            and bool(cloud)
            and all("did not answer" not in (v["provider"]["reason"] or "") for v in cloud)
        )

    after = until(read, back)
    assert back(after), after
    assert seen <= {"ok", "restarting"}, seen  # restarting, never unavailable: Ray brings them back


def test_a_role_whose_dispatcher_is_restarting_is_reported_and_the_other_roles_answer(
    in_process: dict[str, Any], tmp_path: Path
) -> None:
    from fastapi.testclient import TestClient

    from actors.dispatcher import get_dispatcher
    from cluster.roles import Role
    from serve_apps.admin import AdminApi, build_admin_asgi

    settings = in_process["settings"]
    hold = tmp_path / "hold-the-restart"
    stand_in = stand_in_class().remote(str(hold))
    api = AdminApi(
        settings,
        status_timeout_s=5.0,
        dispatcher=lambda role: stand_in if role is Role.EMBEDDING else get_dispatcher(settings, role),
    )
    client = TestClient(build_admin_asgi(api, settings), base_url="http://127.0.0.1:8000", headers=AUTH)
    try:
        started = until(lambda: client.get("/providers").json(), lambda p: set(statuses(p).values()) == {"ok"})
        assert set(statuses(started).values()) == {"ok"}, started["roles"]  # the real dispatchers started
        hold.touch()
        ray.kill(stand_in, no_restart=False)
        actor_state_is(stand_in, "RESTARTING", in_process["dashboard"])  # held there until `hold` goes

        providers = client.get("/providers")
        assert providers.status_code == 200
        answers = providers.json()["roles"]
        assert answers.pop("embedding")["status"] == "restarting" and providers.json()["embedding"] == []
        assert {answer["status"] for answer in answers.values()} == {"ok"}  # the other roles as usual
        health = client.get("/health")
        assert health.status_code == 200 and health.json()["roles"]["embedding"]["state"] == "restarting"
        assert health.json()["roles"]["code-embedding"]["state"] in {"serving", "none"}
        gate = client.get("/gate")
        assert gate.status_code == 200 and gate.json()["roles"]["embedding"]["status"] == "restarting"
        assert gate.json()["roles"]["code-embedding"]["status"] == "ok"
        sidecars = client.get("/sidecars")
        assert sidecars.status_code == 200 and sidecars.json()["gate"]["embedding"]["status"] == "restarting"

        hold.unlink()  # the restart completes
        back = until(lambda: client.get("/providers").json(), lambda p: set(statuses(p).values()) == {"ok"})
        assert set(statuses(back).values()) == {"ok"}, back["roles"]
    finally:
        hold.unlink(missing_ok=True)
        ray.kill(stand_in)


def test_a_role_whose_dispatcher_is_gone_for_good_is_reported_unavailable(in_process: dict[str, Any]) -> None:
    from fastapi.testclient import TestClient

    from actors.dispatcher import get_dispatcher
    from cluster.roles import Role
    from serve_apps.admin import AdminApi, build_admin_asgi

    settings = in_process["settings"]
    stand_in = stand_in_class().remote("/nonexistent/never-held")
    api = AdminApi(
        settings,
        status_timeout_s=5.0,
        dispatcher=lambda role: stand_in if role is Role.EMBEDDING else get_dispatcher(settings, role),
    )
    client = TestClient(build_admin_asgi(api, settings), base_url="http://127.0.0.1:8000", headers=AUTH)
    started = until(lambda: client.get("/providers").json(), lambda p: set(statuses(p).values()) == {"ok"})
    assert set(statuses(started).values()) == {"ok"}, started["roles"]
    ray.kill(stand_in, no_restart=True)
    actor_state_is(stand_in, "DEAD", in_process["dashboard"])

    providers = client.get("/providers")
    assert providers.status_code == 200
    answers = providers.json()["roles"]
    gone = answers.pop("embedding")
    assert gone["status"] == "unavailable" and "DEAD" in gone["detail"], gone
    assert {answer["status"] for answer in answers.values()} == {"ok"}
