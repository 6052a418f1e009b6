"""A sidecar that fronts OpenRouter for two masters, end to end on real processes (DESIGN §4, §7, §8).

One reference sidecar (`python -m sidecar`, a child process) serves `code-embedding` through the
project's OpenRouter fake as the virtual container `orws-OR-CodeEmbedding`, and reports to two
masters: master A is the session's Ray cluster (its MCP app, admin API and `/sidecar` routes under
a route prefix), master B a second Ray cluster in its own process, on its own ports. A second
sidecar, `orskew`, reports to A only with its container pinned to an upstream whose vectors are
not the reference's. Each master pushes its own key through `POST /admin/openrouter`.

What is checked, against truths samespace did not write (the fake's own counters per key, the
rows' writers read back from the index, the processes' logs and files):
- a reindex on each master is served through the sidecar's virtual container; on A, under
  `aggregate`, beside the in-cluster container and the local embedder, and the budget's permits
  and the role's spend count the sidecar's calls, call for call with what the fake served;
- the key goes where it is pushed and nowhere else: `targets` narrows it, and key B serves only
  B's requests; the canary keys appear in no log, file or response of either side;
- the key-wide budget holds across both lanes (429s no higher than the in-cluster lane's alone);
- the gate refuses the sidecar pinned to the wrong upstream: it writes no row;
- master B killed, the sidecar keeps serving A.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray

from tests.support.fakes.openrouter_server import free_port
from tests.support.fakes.remote_master import RemoteMaster
from tests.support.fakes.repos import function_repo
from tests.support.fakes.sidecar_process import SidecarProcess, openrouter_serve_arg
from tests.support.index_rows import rows_by_writer
from tests.support.ray_cluster import CanaryScan, McpServer, RayCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NAMESPACE_A, NAMESPACE_B = "or-fleet-a", "or-fleet-b"
PREFIX_A = "/or-fleet-a"
FLEET_A, FLEET_B = "fleet-token-or-a-7d1e", "fleet-token-or-b-7d1e"
ADMIN_A, ADMIN_B = "admin-token-or-a-7d1e", "admin-token-or-b-7d1e"
KEY_A = "sk-or-v1-" + "c4n4rya" * 8
KEY_B = "sk-or-v1-" + "c4n4ryb" * 8
MODEL = "qwen/qwen3-embedding-4b"
EXACT, SKEWED = "pinned-exact", "pinned-skewed"
SIDECAR_HOST, SKEW_HOST = "orws", "orskew"
SIDECAR_VC, SKEW_VC = f"{SIDECAR_HOST}-OR-CodeEmbedding", f"{SKEW_HOST}-OR-CodeEmbedding"
FLEET = {"ping_interval_s": 1, "stale_after_s": 3, "command_timeout_s": 30, "virtual_discovery_s": 1}
ROUTES = {"code-embedding": {"model": MODEL, "upstream": EXACT}}
IN_FLIGHT = 2  # master A's budget (an operator override) and key A's in-flight limit at the fake


@dataclass
class TwoMasters:
    settings_a: Any
    admin_a: httpx.Client
    master_b: RemoteMaster
    admin_b: httpx.Client
    sidecar: SidecarProcess
    skew: SidecarProcess
    fake: Any
    repo: Path
    in_cluster_vc: str

    def providers(self, admin: httpx.Client) -> dict[str, dict[str, Any]]:
        """The code-embedding providers a master lists, by name."""
        response = admin.get("/providers")
        response.raise_for_status()
        return {view["provider"]["name"]: view for view in response.json()["code-embedding"]}

    def wait_eligible(
        self, admin: httpx.Client, name: str, timeout_s: float = 90.0, *, listed_only: bool = False
    ) -> dict[str, Any]:
        """Wait until the master lists the provider (`listed_only`), or lists it eligible."""

        def eligible() -> dict[str, Any] | None:
            view = self.providers(admin).get(name)
            return view if view is not None and (listed_only or view["provider"]["eligible"]) else None

        try:
            return wait_until(eligible, timeout_s=timeout_s, interval_s=0.5, what=f"{name} eligible")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.providers(admin).get(name)}\n{self.sidecar.log()[-3000:]}") from None

    def push_key(self, admin: httpx.Client, key: str, targets: list[str] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"api_key": key}
        if targets is not None:
            body["targets"] = targets
        response = admin.post("/openrouter", json=body)
        assert response.status_code == 200, response.text
        assert key not in response.text
        return dict(response.json())

    def reindex_a(self, index: str, repo: Path | None = None) -> Counter[str]:
        from actors.build_ports import run_reindex

        record = run_reindex(self.settings_a, repo or self.repo, index, emit=lambda line: None, full=True)
        return rows_by_writer(self.settings_a, record.build)

    def requests(self, key_label: str, counter: str = "requests") -> int:
        return int(self.fake.stats().total(counter, key=key_label, path="/embeddings"))  # type: ignore[arg-type]

    def budget_a(self) -> dict[str, Any]:
        response = self.admin_a.get("/budget")
        response.raise_for_status()
        return dict(response.json())


def master_a_settings(root: Path, openrouter_url: str) -> dict[str, Any]:
    """The session cluster's master: an in-cluster virtual container and the local embedder beside
    the sidecar's lane, under `aggregate`."""
    return {
        "ray": {"namespace": NAMESPACE_A},
        "store": {"data_dir": root / "data"},
        "admin": {"token": ADMIN_A, "config_path": root / "config" / "config.json"},
        "cloud": {"enabled": True, "base_url": openrouter_url, "routes": ROUTES},
        "policies": {"code-embedding": "aggregate"},
        "fleet_token": FLEET_A,
        "fleet": FLEET,
    }


def openrouter_sidecar(masters: list[tuple[str, str]], upstream: str, host: str, fake: Any) -> SidecarProcess:
    """A reference sidecar serving code-embedding through the fake, pinned to `upstream`."""
    return SidecarProcess(
        masters=masters,
        serves=[openrouter_serve_arg("code-embedding", MODEL, upstream)],
        openrouter_base_url=fake.base_url,
        hostname=host,
        agent_url=f"http://127.0.0.1:{free_port()}",
        log_level="DEBUG",  # the most a sidecar ever logs: the canary must be absent even here
    )


def master_b_settings(root: Path) -> dict[str, Any]:
    return {
        "ray": {"namespace": NAMESPACE_B},
        "store": {"data_dir": str(root / "data")},
        "admin": {"token": ADMIN_B, "config_path": str(root / "config" / "config.json")},
        "fleet_token": FLEET_B,
        "fleet": FLEET,
        # No in-cluster container: B's cloud capacity is the sidecar's virtual container alone.
        "policies": {"code-embedding": "cloud"},
    }


@pytest.fixture(scope="module")
def masters(
    ray_cluster: RayCluster,
    mcp_server: McpServer,
    fake_openrouter: Any,
    canary_scan: CanaryScan,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[TwoMasters]:
    from ray import serve

    from actors import ensure_embedders, ensure_virtual_containers
    from cluster.settings import SamespaceSettings
    from serve_apps.admin import AdminIngress
    from serve_apps.mcp import McpIngress

    fake_openrouter.configure(
        # Key A refuses (402) a request beyond two in flight: a lane outside the budget would meet it.
        keys={KEY_A: {"label": "key-a", "in_flight_budget": IN_FLIGHT}, KEY_B: {"label": "key-b"}},
        upstreams={EXACT: {"vectors": "same", "latency_s": 0.02}, SKEWED: {"vectors": "perturbed", "sigma": 0.3}},
    )
    fake_openrouter.reset()
    root = tmp_path_factory.mktemp("or-fleet")
    settings_a = SamespaceSettings(**master_a_settings(root / "a", fake_openrouter.base_url))
    for secret in (KEY_A, KEY_B):
        canary_scan.watch(secret, root)
    serve.run(McpIngress.options(num_replicas=1).bind(settings_a), name=NAMESPACE_A, route_prefix=PREFIX_A)
    serve.run(AdminIngress.bind(settings_a), name=f"{NAMESPACE_A}-admin", route_prefix=f"{PREFIX_A}-admin")
    (in_cluster,) = ensure_virtual_containers(settings_a)
    (local,) = ensure_embedders(settings_a)
    ray.get(local.describe.remote(), timeout=600)  # the model loaded (the machine may be busy)
    master_b = RemoteMaster(master_b_settings(root / "b"), free_port(), root / "b")
    admin_a = httpx.Client(
        base_url=f"http://127.0.0.1:{mcp_server.port}{PREFIX_A}-admin",
        headers={"Authorization": f"Bearer {ADMIN_A}"},
        timeout=120,
    )
    admin_b = httpx.Client(
        base_url=f"{master_b.url}/admin", headers={"Authorization": f"Bearer {ADMIN_B}"}, timeout=120
    )
    url_a = f"http://127.0.0.1:{mcp_server.port}{PREFIX_A}"
    # The two masters' sidecar, and one on A pinned to the skewed upstream.
    sidecar = openrouter_sidecar([(url_a, FLEET_A), (master_b.url, FLEET_B)], EXACT, SIDECAR_HOST, fake_openrouter)
    skew = openrouter_sidecar([(url_a, FLEET_A)], SKEWED, SKEW_HOST, fake_openrouter)
    try:
        master_b.wait_ready()
        for secret in (KEY_A, KEY_B):  # master B's Ray session: its logs, events and spilled objects
            canary_scan.watch(secret, master_b.session_dir())
        sidecar.start()
        skew.start()
        yield TwoMasters(
            settings_a,
            admin_a,
            master_b,
            admin_b,
            sidecar,
            skew,
            fake_openrouter,
            function_repo(root / "repo" / "shop", files=24),
            ray.get(in_cluster.describe.remote()).name,
        )
    finally:
        admin_a.close()
        admin_b.close()
        for process in (sidecar, skew):
            process.close()
        master_b.stop()
        serve.delete(NAMESPACE_A)
        serve.delete(f"{NAMESPACE_A}-admin")
        for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE_A]:
            ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE_A))
        for process in (sidecar, skew):
            log = process.log()
            assert KEY_A not in log and KEY_B not in log, "a key reached a sidecar's log"
        master_log = master_b.log()
        assert KEY_A not in master_log and KEY_B not in master_log, "a key reached master B's log"


def test_the_sidecar_fronts_openrouter_for_two_masters_under_the_budget_and_the_gate(masters: TwoMasters) -> None:
    m = masters
    # B: its key reaches the sidecar only (B has no in-cluster container), and B's reindex is served
    # wholly through the sidecar's virtual container, with B's key alone.
    listed = m.wait_eligible(m.admin_b, SIDECAR_VC, listed_only=True)
    assert listed["provider"]["kind"] == "cloud" and listed["provider"]["hosted"] == "sidecar", listed
    assert listed["provider"]["upstream"] == EXACT and not listed["provider"]["eligible"], listed
    pushed_b = m.push_key(m.admin_b, KEY_B)
    assert SIDECAR_VC in str(pushed_b), pushed_b
    m.wait_eligible(m.admin_b, SIDECAR_VC)
    assert m.requests("key-b") == 0
    answer = m.master_b.ask({"op": "reindex", "repo": str(m.repo), "index": "shop-b"})
    build_b = answer["record"]["build"]
    rows_b = m.master_b.ask({"op": "writers", "build": build_b})["writers"]
    assert set(rows_b) == {SIDECAR_VC} and sum(rows_b.values()) > 0, rows_b
    served_b = m.requests("key-b", "ok")
    assert served_b > 0
    assert m.requests("key-a") == 0, "master B's work used master A's key"

    # A, the key narrowed to the in-cluster container: the sidecar's container for A waits for a
    # key (B's key does not serve A) and the reindex runs on the in-cluster lanes alone.
    m.wait_eligible(m.admin_a, SIDECAR_VC, listed_only=True)
    m.wait_eligible(m.admin_a, SKEW_VC, listed_only=True)
    pushed = m.push_key(m.admin_a, KEY_A, targets=[m.in_cluster_vc])
    assert SIDECAR_VC not in str(pushed) and SKEW_VC not in str(pushed), pushed
    view = m.providers(m.admin_a)[SIDECAR_VC]
    assert not view["provider"]["eligible"] and "key" in view["provider"]["reason"], view
    assert m.admin_a.put("/budget", json={"max_concurrent": IN_FLIGHT}).status_code == 200
    before = m.budget_a()
    alone = m.reindex_a("shop-alone")
    assert SIDECAR_VC not in alone and m.in_cluster_vc in alone, alone
    after_alone = m.budget_a()
    limited_alone = after_alone["rate_limited"] - before["rate_limited"]
    assert m.requests("key-b", "ok") == served_b, "key B served a request of master A"

    # The key to every container: the sidecar's now serves A too, under A's budget.
    m.push_key(m.admin_a, KEY_A)
    m.wait_eligible(m.admin_a, SIDECAR_VC)
    requests_before = m.requests("key-a")
    both = m.reindex_a("shop-both")
    after = m.budget_a()
    assert both[SIDECAR_VC] > 0 and both[m.in_cluster_vc] > 0, both
    assert SKEW_VC not in both, both
    # The budget's permits count every request the fake received with key A, the sidecar's included.
    sent = m.requests("key-a") - requests_before
    assert after["requests"] - after_alone["requests"] == sent, (after["requests"], after_alone["requests"], sent)
    # The role's spend counts each call the fake answered: the sidecar's usage came back with its result.
    spend = after["spend"]["roles"]["code-embedding"]
    assert spend["calls"] == m.requests("key-a", "ok"), (spend, m.requests("key-a", "ok"))
    limited_both = after["rate_limited"] - after_alone["rate_limited"]
    print(
        f"A alone: {dict(alone)}, {after_alone['requests'] - before['requests']} permits, {limited_alone} answered 429;"
        f" A with the sidecar: {dict(both)}, {sent} permits, {limited_both} answered 429; B: {rows_b}"
    )
    assert limited_both <= limited_alone, (limited_both, limited_alone)
    # Key-wide: the two cloud lanes together never had more requests in flight than the budget allows.
    stats = m.fake.stats()
    assert stats.max_in_flight.get("key-a", 0) <= IN_FLIGHT, stats.max_in_flight
    assert m.requests("key-a", "errors") == 0

    # The gate refused the sidecar pinned to the wrong upstream.
    gate = {r["key"]["provider"]: r for r in m.admin_a.get("/gate").json()["code-embedding"]}
    assert SKEW_VC in gate and gate[SKEW_VC]["verdict"] == "vector-incompatible", gate.get(SKEW_VC)

    # Master B vanishes; the sidecar keeps serving A.
    m.master_b.kill()
    m.sidecar.wait_for_log("disconnected", timeout_s=60)
    small = function_repo(m.repo.parent / "small", files=6)
    after_kill = m.reindex_a("small-after-kill", small)
    assert after_kill[SIDECAR_VC] > 0, after_kill
