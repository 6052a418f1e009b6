"""Chaos under load: with MCP clients searching and a reindex in flight, one part of the cluster is
killed; then nothing committed is lost, every answer is the index's before or after the build (never a
mix), the errors clients saw are named and bounded, the cluster recovers by itself within
RECOVERY_BOUND_S, and the next reindex succeeds.

Killed in turn (one test each, any order): the MCP replica, the embedder actor, the index actor, the
dispatcher, the budget actor, the reindex job's driver (SIGKILL), a whole worker node (a second real
raylet, SIGKILL to its process group). Real Ray with its job API, real Serve over HTTP, the real model
and store, the `mcp` package's client. Each test prints its row of the chaos table
(`pytest tests/e2e/test_chaos_e2e.py -s`); `make test-slow` runs them, `make test` leaves them out.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.job_submission import JobStatus, JobSubmissionClient

from actors.sync import submit_job
from tests.support.chaos_load import UNNAMED, Answer, SearchLoad, recovery_s
from tests.support.jobs import wait_for_job
from tests.support.ray_cluster import McpServer, RayCluster, reindex_entrypoint
from tests.support.second_node import SecondNode
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.chaos, pytest.mark.timeout(900)]

NAMESPACE = "chaos"
ROUTE = "/chaos"
INDEX = "chaosrepo"
DEPLOYMENT = "McpChaos"
RECOVERY_BOUND_S = 90.0  # the stated bound: the cluster answers again, by itself, within this
MAX_ERRORS = 40  # calls failed per kill, all clients together (3 clients, ~2 calls/s each while failing)
MODULES = 48
QUERIES = (
    "reconcile the ledger balances at month end",
    "export legacy records to a csv file",
    "clamp the shipment weight to the carrier limit",
    "validate the invoice total against its lines",
    "retry the payment with exponential backoff",
    "compute the warehouse restock quantity",
)


def write_variant(repo: Path, variant: int) -> None:
    """Two versions of one repository whose search answers differ: variant 1 adds a ledger module, drops
    the legacy exporter and rewrites a third of the modules."""
    topics = ("invoice", "shipment", "customer", "warehouse", "payment", "refund", "carrier", "catalog")
    for m in range(MODULES):
        topic = topics[m % len(topics)]
        rewritten = variant == 1 and m % 3 == 0
        functions = [
            f"def {topic}_{m}_step_{i}(record, limit={i + m}):\n"
            f'    """{"Rewritten: " if rewritten else ""}step {i} of {topic} batch {m}: '
            f'{"normalise" if rewritten else "validate"} the {topic} record and clamp it."""\n'
            f"    value = record.get('{topic}_{m}_{i}', {i}) {'+ 1' if rewritten else '* 2'}\n"
            f"    return min(value, limit)\n"
            for i in range(6)
        ]
        (repo / f"{topic}_{m}.py").write_text("\n\n".join(functions))
    ledger, legacy = repo / "ledger.py", repo / "legacy_export.py"
    if variant == 1:
        ledger.write_text(
            "def reconcile_ledger(entries, statement):\n"
            '    """Reconcile the ledger balances against the bank statement at month end."""\n'
            "    return sum(e.amount for e in entries) - statement.closing_balance\n"
        )
        legacy.unlink(missing_ok=True)
    else:
        legacy.write_text(
            "def export_legacy_records(rows, path):\n"
            '    """Export the legacy records to a csv file, one row per record."""\n'
            "    import csv\n"
            "    with open(path, 'w', newline='') as f:\n"
            "        csv.writer(f).writerows(rows)\n"
        )
        ledger.unlink(missing_ok=True)


@dataclass
class Row:
    """One line of the chaos table."""

    killed: str
    errors: dict[str, int]
    calls: int
    recovery_s: float
    lost: int
    in_flight_job: str
    next_job: str
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        errors = ", ".join(f"{name} x{count}" for name, count in sorted(self.errors.items())) or "none"
        return (
            f"| {self.killed} | {sum(self.errors.values())} of {self.calls} ({errors}) | {self.recovery_s:.1f} s "
            f"| {self.lost} | {self.in_flight_job} | {self.next_job} |"
        )


@dataclass
class Env:
    url: str
    repo: Path
    settings: Any
    client: JobSubmissionClient
    job_env: dict[str, str]
    tmp: Path
    variant: int = 0

    def submit(self, full: bool = False) -> str:
        entrypoint = reindex_entrypoint(self.repo, INDEX) + (" --full" if full else "")
        return submit_job(self.client, entrypoint, self.job_env)

    def reindex(self) -> str:
        job = self.submit()
        status = wait_for_job(self.client, job, timeout_s=300)
        assert status == JobStatus.SUCCEEDED, self.client.get_job_logs(job)
        return job

    def index(self) -> Any:
        from actors import get_index_actor

        return get_index_actor(self.settings)

    def answers(self) -> dict[str, Answer]:
        """Each query's answer, outside any chaos, all clients agreeing."""
        load = SearchLoad(self.url, QUERIES, INDEX, clients=1)
        outcomes = [load_once(load, query) for query in QUERIES]
        return dict(zip(QUERIES, outcomes, strict=True))

    def building(self) -> dict[str, Any] | None:
        state = ray.get(self.index().builds.remote()).get(INDEX)
        return state.model_dump() if state is not None and state.state == "building" else None

    def stored_points(self, build: str) -> int:
        index, count, offset = self.index(), 0, None
        while True:
            keys, offset = ray.get(index.point_keys.remote(build, offset, 1024))
            count += len(keys)
            if offset is None:
                return count


def load_once(load: SearchLoad, query: str) -> Answer:
    import asyncio

    answer, error = asyncio.run(load._call(query))  # noqa: SLF001  one call of the load's own client
    assert error is None and answer is not None, error
    return answer


@pytest.fixture(scope="module")
def env(ray_cluster: RayCluster, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    from ray import serve

    from cluster.settings import SamespaceSettings
    from serve_apps.mcp import McpIngress

    base = tmp_path_factory.mktemp("chaos")
    repo = base / "repo"
    repo.mkdir()
    write_variant(repo, 0)
    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": base / "data"},
        embedding={"accelerator_resource": "fake_gpu", "cpu_embedder": "always"},
    )
    job_env = {
        **ray_cluster.env,
        "SAMESPACE_RAY__NAMESPACE": NAMESPACE,
        "SAMESPACE_STORE__DATA_DIR": str(base / "data"),
        "SAMESPACE_EMBEDDING__ACCELERATOR_RESOURCE": "fake_gpu",
        "SAMESPACE_EMBEDDING__CPU_EMBEDDER": "always",
    }
    serve.run(McpIngress.options(name=DEPLOYMENT, num_replicas=2).bind(settings), name="mcp-chaos", route_prefix=ROUTE)
    env = Env(
        url=f"http://127.0.0.1:{mcp_server.port}{ROUTE}/mcp/",
        repo=repo,
        settings=settings,
        client=JobSubmissionClient(ray_cluster.dashboard_url),
        job_env=job_env,
        tmp=base,
    )
    try:
        env.reindex()
        yield env
    finally:
        serve.delete("mcp-chaos")
        for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
            ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


def named(name: str) -> Any:
    return ray.get_actor(name, namespace=NAMESPACE)


def ready(handle: Any) -> bool:
    try:
        ray.get(handle.__ray_ready__.remote(), timeout=5)
        return True
    except Exception:  # noqa: BLE001  restarting, or not yet
        return False


def replicas_running() -> int:
    from ray import serve

    status = serve.status().applications["mcp-chaos"].deployments[DEPLOYMENT]
    return int(status.replica_states.get("RUNNING", 0))


def kill_actor(name: str) -> Callable[[Env, str], Callable[[], bool]]:
    def kill(env: Env, job: str) -> Callable[[], bool]:
        handle = named(name)
        ray.kill(handle, no_restart=False)
        return lambda: ready(named(name))

    return kill


def kill_replica(env: Env, job: str) -> Callable[[], bool]:
    replicas = [
        e
        for e in ray.util.list_named_actors(all_namespaces=True)
        if e["namespace"] == "serve" and DEPLOYMENT in e["name"]
    ]
    assert len(replicas) == 2, replicas
    ray.kill(ray.get_actor(replicas[0]["name"], namespace="serve"), no_restart=True)
    return lambda: replicas_running() == 2


def kill_driver(env: Env, job: str) -> Callable[[], bool]:
    pid = wait_until(lambda: (env.client.get_job_info(job).driver_info or _NoDriver).pid, 30, what="the driver's pid")
    os.kill(int(pid), signal.SIGKILL)
    return lambda: env.client.get_job_status(job) in (JobStatus.FAILED, JobStatus.STOPPED)


class _NoDriver:
    pid = None


def start_budget(env: Env) -> None:
    from actors.budget import get_budget_actor

    ray.get(get_budget_actor(env.settings).snapshot.remote())


def start_dispatcher(env: Env) -> None:
    from actors.dispatcher import get_dispatcher
    from cluster.roles import Role

    ray.get(get_dispatcher(env.settings, Role.CODE_EMBEDDING).__ray_ready__.remote())


KILLS: dict[str, tuple[Callable[[Env, str], Callable[[], bool]], Callable[[Env], None] | None]] = {
    "MCP replica": (kill_replica, None),
    "embedder actor": (kill_actor("samespace-embedder-cpu0"), None),
    "index actor": (kill_actor("samespace-index"), None),
    "dispatcher": (kill_actor("samespace-dispatch-code-embedding"), start_dispatcher),
    "budget actor": (kill_actor("samespace-budget"), start_budget),
    "reindex driver": (kill_driver, None),
}


def chaos(env: Env, killed: str, kill: Callable[[Env, str], Callable[[], bool]], node: bool = False) -> Row:
    """Load, a full reindex to the other variant, the kill mid-build, recovery, the checks; the table row."""
    before = env.answers()
    record_before = ray.get(env.index().record.remote(INDEX))
    env.variant = 1 - env.variant
    write_variant(env.repo, env.variant)

    load = SearchLoad(env.url, QUERIES, INDEX).start()
    time.sleep(2)  # calls land before anything is killed
    served_before = node_served(env) if node else 0
    job = env.submit(full=True)
    wait_until(lambda: (env.building() or {}).get("progress", {}).get("chunks_done", 0) > 0, 180, what="rows")
    if node:  # the node's embedder must hold batches of this build when it dies
        wait_until(lambda: node_served(env) > served_before, 180, what="the worker node's embedder serving the build")
    in_flight = env.client.get_job_status(job)
    assert in_flight == JobStatus.RUNNING
    killed_at = time.monotonic()
    recovered = kill(env, job)
    in_flight_status = wait_for_job(env.client, job, timeout_s=300)
    if node:  # the node's lane is dropped and its batches re-queued on the head's embedder: the build completes
        assert in_flight_status == JobStatus.SUCCEEDED, env.client.get_job_logs(job)
    wait_until(recovered, RECOVERY_BOUND_S, what=f"{killed} back")
    component_back_s = time.monotonic() - killed_at
    time.sleep(3)  # a few calls after recovery
    outcomes = load.stop()

    after_kill = [o for o in outcomes if o.ended >= killed_at]
    assert [o for o in outcomes if o.ended < killed_at and o.error is not None] == [], "errors before the kill"
    assert any(o.error is None for o in outcomes if o.started >= killed_at + component_back_s - 1), "no success after"
    record_now = ray.get(env.index().record.remote(INDEX))
    lost = record_now.chunks - env.stored_points(record_now.build)  # committed rows missing from the serving build
    assert record_now.build in (record_before.build, _committed_build(env, job, in_flight_status))

    next_job = env.reindex()  # the next reindex succeeds
    after = env.answers()
    mixed = [o for o in outcomes if o.answer is not None and o.answer not in (before[o.query], after[o.query])]
    assert mixed == [], f"answers of neither build: {mixed[:3]}"
    assert sum(before[q] != after[q] for q in QUERIES) >= 2  # the builds really answer differently

    row = Row(
        killed=killed,
        errors=dict(load.errors()),
        calls=len(after_kill),
        recovery_s=max(recovery_s(outcomes, killed_at), component_back_s),
        lost=lost,
        in_flight_job=f"{in_flight.value} -> {in_flight_status.value}",
        next_job=env.client.get_job_status(next_job).value,
    )
    print(f"\nCHAOS {json.dumps(row.__dict__)}\n{row.line()}")
    assert lost == 0
    assert UNNAMED not in row.errors, row.errors  # every error says what failed
    assert sum(row.errors.values()) <= MAX_ERRORS, row.errors
    assert row.recovery_s <= RECOVERY_BOUND_S, row
    failures = [o for o in outcomes if o.error is not None]
    assert all(o.started <= killed_at + row.recovery_s for o in failures)
    return row


def _committed_build(env: Env, job: str, status: JobStatus) -> str | None:
    """The build the in-flight job committed, if it did."""
    if status != JobStatus.SUCCEEDED:
        return None
    record = ray.get(env.index().record.remote(INDEX))
    return str(record.build)


def node_served(env: Env) -> int:
    """Texts the worker node's embedder has served so far."""
    handles = [e["name"] for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]
    (gpu,) = [name for name in handles if name.startswith("samespace-embedder") and name.endswith("-gpu0")]
    return int(ray.get(named(gpu).describe.remote()).served)


@pytest.mark.parametrize("killed", list(KILLS))
def test_a_kill_under_load_loses_nothing_and_the_cluster_recovers(env: Env, killed: str) -> None:
    kill, prepare = KILLS[killed]
    if prepare is not None:
        prepare(env)
    chaos(env, killed, kill)


def alive_nodes() -> int:
    return len([n for n in ray.nodes() if n["Alive"]])


def test_a_worker_node_dying_under_load_loses_nothing(env: Env) -> None:
    from actors import ensure_embedders

    nodes_before = alive_nodes()
    node = SecondNode(ray.get_runtime_context().gcs_address, env.tmp / f"node-{time.time_ns()}.log")
    try:
        wait_until(lambda: alive_nodes() == nodes_before + 1, 90, what="the second node joining")
        ray.get([h.__ray_ready__.remote() for h in ensure_embedders(env.settings)], timeout=180)

        def crash(env: Env, job: str) -> Callable[[], bool]:
            node.crash()
            return lambda: alive_nodes() == nodes_before  # the GCS has marked it dead: the cluster is whole

        chaos(env, "worker node", crash, node=True)
    finally:
        node.crash()
