"""The sync actor: one per namespace, the Ray shell of `cluster.sync.manager.IndexManager`.

It submits reindex jobs through Ray's job API (the dashboard of this cluster, found through the
GCS; the token of a token-auth cluster is read from RAY_AUTH_TOKEN_PATH like every Ray client), reads
build states from the index actor, and runs the sync pass every `index.sync_period_s` on a thread of
its own. Started by the first management request, and again by an MCP replica at start when the
durable config holds registrations, so sync survives a restart.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any

import ray
from ray.actor import ActorHandle

from actors.handles import find_actor, get_or_start
from actors.index_actor import get_index_actor
from cluster.config import ConfigStore, IndexOrigin, IndexRegistration
from cluster.index import BuildState, IndexAcl, IndexRecord
from cluster.naming import SYNC_ACTOR_NAME
from cluster.settings import ALLOWED_ROOTS_ENV, SamespaceSettings
from cluster.sync import BuildReport, IndexCaller, IndexManager

log = logging.getLogger("samespace.sync")
AGENT_WAIT_S = 120.0  # a fresh cluster's job agent may answer well after the job API does


def submit_job(client: Any, entrypoint: str, env: dict[str, str], submission_id: str | None = None) -> str:
    """Submit a job, waiting out "No available agent to submit job" on a freshly started cluster."""
    deadline = time.monotonic() + AGENT_WAIT_S
    while True:
        try:
            return str(
                client.submit_job(entrypoint=entrypoint, submission_id=submission_id, runtime_env={"env_vars": env})
            )
        except RuntimeError as exc:
            if "No available agent" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def job_client() -> Any:
    """Ray's JobSubmissionClient for this cluster, from inside it (an actor, a replica). Blocking."""
    from ray.job_submission import JobSubmissionClient

    # Given the GCS address, the client looks the job API's address up in the GCS (the dashboard's).
    return JobSubmissionClient(ray.get_runtime_context().gcs_address)


class RayJobs:
    """`cluster.sync.JobRunner` over Ray's JobSubmissionClient."""

    def __init__(self, settings: SamespaceSettings) -> None:
        self._client = job_client()
        # The job's driver reads its settings from the environment: it must touch this cluster state.
        self._env = {
            "SAMESPACE_RAY__NAMESPACE": settings.ray.namespace,
            "SAMESPACE_STORE__KIND": settings.store.kind,
            "SAMESPACE_STORE__DATA_DIR": str(settings.store.data_dir),
            **({"SAMESPACE_STORE__URL": settings.store.url} if settings.store.url else {}),
            # A --confined job (an MCP client's index) confines its folder again against these roots.
            ALLOWED_ROOTS_ENV: json.dumps([str(root) for root in settings.index.allowed_roots]),
        }

    def submit(self, argv: list[str], submission_id: str) -> str:
        entrypoint = shlex.join([sys.executable, "-m", "jobs.reindex", *argv])
        return submit_job(self._client, entrypoint, self._env, submission_id)

    def status(self, job_id: str) -> str:
        return str(self._client.get_job_status(job_id).value)

    def stop(self, job_id: str) -> None:
        self._client.stop_job(job_id)


class IndexActorReader:
    """`cluster.sync.IndexReader` over the index actor."""

    def __init__(self, settings: SamespaceSettings) -> None:
        self._actor = get_index_actor(settings)

    def builds(self) -> dict[str, BuildState]:
        found: dict[str, BuildState] = _get(self._actor.builds.remote())
        return found

    def records(self) -> list[IndexRecord]:
        found: list[IndexRecord] = _get(self._actor.records.remote())
        return found

    def remove(self, name: str) -> list[str]:
        dropped: list[str] = _get(self._actor.remove.remote(name))
        return dropped


def _get(ref: Any) -> Any:
    """`ray.get` of one actor call, typed as what the actor returned (Ray's stubs say list[Never])."""
    return ray.get(ref)


@ray.remote(  # type: ignore[call-overload]  # Ray's stubs list task options only, not actor ones
    num_cpus=0, max_restarts=-1, max_concurrency=16
)
class SyncActor:
    def __init__(self, settings: SamespaceSettings) -> None:
        self._manager = IndexManager(
            RayJobs(settings),
            IndexActorReader(settings),
            ConfigStore(settings.admin.config_path),
            settings.index.sync_debounce_s,
            clock=time.time,
            roots=settings.index.allowed_roots,
            home=Path.home(),
            limits=settings.limits,
            acl=IndexAcl(settings.index.acl, settings.limits),
        )
        self._period_s = settings.index.sync_period_s
        self._stop = threading.Event()
        threading.Thread(target=self._sync_loop, name="samespace-sync", daemon=True).start()

    def __repr__(self) -> str:
        return "SyncActor()"

    def _sync_loop(self) -> None:
        while not self._stop.wait(self._period_s):
            try:
                for report in self._manager.sync_once():
                    log.info("sync: %s changed, build %s", report.ticket.index, report.ticket.build)
            except Exception:
                log.exception("sync pass failed")

    # `caller`: who asks (cluster.sync.IndexCaller, from the request's principal): an index an OAuth
    # caller registered over MCP is changed over MCP only by its owner or an admin.
    def request(
        self, folder: str, name: str, ref: str | None, full: bool, origin: IndexOrigin, caller: IndexCaller
    ) -> BuildReport:
        return self._manager.request(folder, name, ref, full, origin=origin, caller=caller)

    def refresh(self, name: str, full: bool, origin: IndexOrigin, caller: IndexCaller) -> BuildReport:
        return self._manager.refresh(name, full, origin=origin, caller=caller)

    def remove(self, name: str, origin: IndexOrigin, caller: IndexCaller) -> list[str]:
        return self._manager.remove(name, origin=origin, caller=caller)

    def report(self, name: str) -> BuildReport | None:
        return self._manager.report(name)

    def reports(self) -> list[BuildReport]:
        return self._manager.reports()

    def registrations(self) -> dict[str, IndexRegistration]:
        return self._manager.registrations()

    def sync_now(self) -> list[BuildReport]:
        return self._manager.sync_once()

    def hook(self, folders: list[str], names: list[str]) -> list[BuildReport]:
        wanted = set(names)
        return self._manager.hook(lambda r: r.name in wanted or r.folder in folders)


def get_sync_actor(settings: SamespaceSettings) -> ActorHandle:
    return get_or_start(SyncActor, settings, SYNC_ACTOR_NAME, settings)


def find_sync_actor(settings: SamespaceSettings) -> ActorHandle | None:
    return find_actor(settings, SYNC_ACTOR_NAME)
