"""Daily cloud spend caps on a real cluster (DESIGN §7): the OpenRouter fake charges `usage.cost`
per response as the real API does; a cap crossed in the middle of a real reindex job drops the cloud
lane and the local embedder serves the rest, with nothing lost; under `cloud` the call fails with a
clear error; the spend survives a restart of the budget actor."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray
from pydantic import SecretStr
from ray.job_submission import JobStatus, JobSubmissionClient

from actors.sync import submit_job
from cluster.settings import FanoutSettings
from cluster.telemetry import Metric
from tests.support.jobs import wait_for_job
from tests.support.metrics import gauge, scraped_until, total
from tests.support.ray_cluster import RayCluster, reindex_entrypoint
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NAMESPACE = "spend-caps"
KEY = "sk-or-v1-" + "5bead" * 10
MODEL, UPSTREAM = "qwen/qwen3-embedding-4b", "pinned-same"
PRICE = 1e-4  # credits per prompt token: a 64-chunk batch of ~40-word chunks costs about 0.25
ADMIN_TOKEN = "spend-admin-token"
INDEX = "spendy"


@dataclass
class SpendCluster:
    settings: Any
    fake: Any
    dispatcher: Any
    budget: Any
    env: dict[str, str]


def write_repo(root: Path, files: int = 30) -> Path:
    for i in range(files):
        body = "\n\n".join(
            f"def handler_{i}_{j}(request, store):\n"
            f"    '''Handle request kind {j} of module {i}: validate, load, update and answer.'''\n"
            f"    record = store.load(request.key_{j})\n"
            f"    record.update(request.payload_{j}, source='module_{i}')\n"
            f"    return store.save(record, version={i * 10 + j})"
            for j in range(6)
        )
        (root / f"module_{i}.py").write_text(body + "\n")
    return root


@pytest.fixture(scope="module")
def spend(
    ray_cluster: RayCluster, fake_openrouter: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SpendCluster]:
    from actors import ensure_embedders, ensure_virtual_containers
    from actors.budget import get_budget_actor
    from actors.config_push import push_policy
    from actors.dispatcher import get_dispatcher
    from cluster.roles import Role
    from cluster.settings import SamespaceSettings
    from tests.support.fakes.openrouter_fake import DEFAULT_MODELS, ModelEntry

    models = [m for m in DEFAULT_MODELS if m.id != MODEL]
    models.append(ModelEntry(id=MODEL, context_length=32768, output_modalities=["embeddings"], prompt_price=PRICE))
    fake_openrouter.configure(
        keys={KEY: {"label": "spend"}}, upstreams={UPSTREAM: {"vectors": "same", "latency_s": 0.05}}, models=models
    )
    data_dir = tmp_path_factory.mktemp("spend-data")
    config_path = tmp_path_factory.mktemp("spend-config") / "config.json"
    routes = {"code-embedding": {"model": MODEL, "upstream": UPSTREAM}}
    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": data_dir},
        admin={"token": ADMIN_TOKEN, "config_path": config_path},
        cloud={"enabled": True, "base_url": fake_openrouter.base_url, "routes": routes},
    )
    env = {
        **ray_cluster.env,
        "SAMESPACE_RAY__NAMESPACE": NAMESPACE,
        "SAMESPACE_STORE__DATA_DIR": str(data_dir),
        "SAMESPACE_ADMIN__CONFIG_PATH": str(config_path),
        "SAMESPACE_CLOUD__ENABLED": "true",
        "SAMESPACE_CLOUD__BASE_URL": fake_openrouter.base_url,
        "SAMESPACE_CLOUD__ROUTES": json.dumps(routes),
    }
    containers = ensure_virtual_containers(settings)
    ray.get([c.set_key.remote(SecretStr(KEY)) for c in containers])
    (local,) = ensure_embedders(settings)
    ray.get(local.describe.remote(), timeout=600)  # the model loaded (the machine may be busy)
    dispatcher = get_dispatcher(settings, Role.CODE_EMBEDDING)
    push_policy(settings, Role.CODE_EMBEDDING, "aggregate")
    yield SpendCluster(settings, fake_openrouter, dispatcher, get_budget_actor(settings), env)
    for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
        ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


def admin(cluster: SpendCluster, method: str, path: str, body: Any = None) -> httpx.Response:
    """The real admin app in this process (it reaches the actors through Ray), over ASGI."""
    import asyncio

    from serve_apps.admin import AdminApi, build_admin_asgi

    app = build_admin_asgi(AdminApi(cluster.settings), cluster.settings)

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            return await client.request(method, path, json=body, headers=headers)

    return asyncio.run(send())


def embedding_spend(cluster: SpendCluster) -> dict[str, Any]:
    roles: dict[str, Any] = admin(cluster, "GET", "/budget").json()["spend"]["roles"]
    return dict(roles.get("code-embedding", {"spent": 0.0, "calls": 0, "refused": 0, "state": "uncapped"}))


def served_by(log: str) -> dict[str, int]:
    line = re.search(r"served by: (.+)", log)
    assert line is not None, log
    return {name: int(count) for name, count in (pair.split("=") for pair in line.group(1).split(", "))}


def cloud_embeddings(fake: Any) -> int:
    return int(fake.stats().total("ok", path="/embeddings", upstream=UPSTREAM))


def test_a_cap_crossed_mid_reindex_switches_the_rest_to_local_with_nothing_lost(
    spend: SpendCluster, ray_cluster: RayCluster, tmp_path: Path
) -> None:
    from cluster.naming import pc_name

    before, cap = cap_just_above_the_spend_so_far(spend)
    cloud_before = cloud_embeddings(spend.fake)

    log = reindex_to_success(spend, ray_cluster, write_repo(tmp_path))

    after = embedding_spend(spend)
    cloud_lane = f"{pc_name(socket.gethostname())}-OR-CodeEmbedding"
    counts = served_by(log)
    chunks = int(re.search(r"committed 'spendy': (\d+) chunks", log).group(1))  # type: ignore[union-attr]
    report = {"cap": cap, "spent_before": before["spent"], "after": after, "served_by": counts, "chunks": chunks}
    print("spend cap:", json.dumps(report))
    assert counts.get(cloud_lane, 0) > 0, report  # the cloud served part of the reindex ...
    assert sum(n for lane, n in counts.items() if lane != cloud_lane) > 0, report  # ... and local the rest
    assert sum(counts.values()) == chunks, report  # nothing lost: every chunk embedded once, by someone
    assert after["state"] == "capped" and after["spent"] >= cap, report
    assert after["calls"] - before["calls"] == cloud_embeddings(spend.fake) - cloud_before, report  # one per response
    # Once over the cap the cloud lane gets no batch: what it served is what it had in flight when it crossed.
    assert after["calls"] - before["calls"] <= FanoutSettings().depth, report

    assert_one_row_per_chunk(spend, chunks, report)
    assert_a_capped_cloud_policy_fails_saying_why(spend, after)
    wait_for_the_spend_and_cap_gauges(ray_cluster, after["spent"], cap)
    assert_the_spend_survives_a_budget_actor_restart(spend, after)
    assert_the_cloud_serves_again_once_uncapped(spend)


def cap_just_above_the_spend_so_far(spend: SpendCluster) -> tuple[dict[str, Any], float]:
    """What was spent before the job, and a cap set just above it through the admin API."""
    # The gate verifies the cloud lane first (its probe is charged too): what was spent before the job.
    ray.get(spend.dispatcher.embed.remote(["def warm(): return 1"] * 8))
    before = embedding_spend(spend)
    assert before["calls"] >= 1 and before["spent"] > 0  # usage.cost of the probe and the batch, as reported
    cap = round(before["spent"] + 0.0001, 6)  # the job's first cloud batch (>= 10 tokens) crosses it
    assert admin(spend, "PUT", "/budget/caps", {"caps": {"code-embedding": cap}}).status_code == 200
    return before, cap


def reindex_to_success(spend: SpendCluster, ray_cluster: RayCluster, repo: Path) -> str:
    """Run a real reindex job of `repo` into INDEX; its log, once it succeeded."""
    client = JobSubmissionClient(ray_cluster.dashboard_url)
    job_id = submit_job(client, reindex_entrypoint(repo, INDEX), spend.env)
    status = wait_for_job(client, job_id, timeout_s=600)
    log = client.get_job_logs(job_id)
    assert status == JobStatus.SUCCEEDED, log
    return log


def assert_one_row_per_chunk(spend: SpendCluster, chunks: int, report: dict[str, Any]) -> None:
    """The store holds one row per chunk, from both lanes' vectors."""
    from actors import get_index_actor

    index = get_index_actor(spend.settings)
    record = ray.get(index.record.remote(INDEX))
    rows, offset = 0, None
    while True:
        page, offset = ray.get(index.point_keys.remote(record.build, offset))
        rows += len(page)
        if offset is None:
            break
    assert rows == chunks == record.chunks, report


def assert_a_capped_cloud_policy_fails_saying_why(spend: SpendCluster, after: dict[str, Any]) -> None:
    """Under `cloud` there is no local lane to carry on: the call fails, saying why."""
    from actors.config_push import push_policy
    from cluster.errors import NoProviderLeft
    from cluster.roles import Role

    push_policy(spend.settings, Role.CODE_EMBEDDING, "cloud")
    try:
        with pytest.raises(NoProviderLeft, match="spend cap"):
            ray.get(spend.dispatcher.embed.remote(["def capped(): pass"] * 4))
    finally:
        push_policy(spend.settings, Role.CODE_EMBEDDING, "aggregate")
    refused = embedding_spend(spend)
    assert refused["refused"] > after["refused"] and refused["calls"] == after["calls"], refused  # no request sent


def wait_for_the_spend_and_cap_gauges(ray_cluster: RayCluster, spent: float, cap: float) -> None:
    """The spend and the cap on Ray's metrics endpoint, as the admin API says."""
    spent_series, cap_series = gauge(Metric.CLOUD_SPEND_CREDITS), gauge(Metric.CLOUD_SPEND_CAP_CREDITS)
    scraped_until(
        ray_cluster,
        lambda samples: (
            total(samples, spent_series, role="code-embedding") == pytest.approx(spent)
            and total(samples, cap_series, role="code-embedding") == pytest.approx(cap)
        ),
        "the spend and cap gauges of code-embedding",
    )


def assert_the_spend_survives_a_budget_actor_restart(spend: SpendCluster, after: dict[str, Any]) -> None:
    """Spend is durable: a restarted budget actor reads today's spend back."""
    ray.kill(spend.budget, no_restart=False)
    restarted = wait_until(lambda: _spend_or_none(spend), what="the budget actor back after a kill")
    assert restarted["spent"] == pytest.approx(after["spent"]) and restarted["state"] == "capped"


def assert_the_cloud_serves_again_once_uncapped(spend: SpendCluster) -> None:
    """Removing the cap lets the cloud serve again (once the gate re-verifies the lane it refused)."""
    from actors.config_push import push_policy
    from cluster.roles import Role

    assert admin(spend, "PUT", "/budget/caps", {"caps": {"code-embedding": None}}).status_code == 200
    push_policy(spend.settings, Role.CODE_EMBEDDING, "cloud")
    try:
        wait_until(lambda: _cloud_serves(spend), what="the uncapped cloud lane serving under `cloud`")
    finally:
        push_policy(spend.settings, Role.CODE_EMBEDDING, "aggregate")
    assert embedding_spend(spend)["state"] == "uncapped"


def _cloud_serves(cluster: SpendCluster) -> bool:
    admin(cluster, "POST", "/gate/verify")
    try:
        outcome = ray.get(cluster.dispatcher.embed.remote(["def uncapped(): pass"] * 4))
    except Exception:  # noqa: BLE001 - the gate has not re-verified the lane yet
        return False
    return all(name.endswith("-OR-CodeEmbedding") for name in outcome.served_by)  # only the cloud serves `cloud`


def _spend_or_none(cluster: SpendCluster) -> dict[str, Any] | None:
    try:
        return embedding_spend(cluster)
    except Exception:  # noqa: BLE001 - the actor is restarting
        return None
