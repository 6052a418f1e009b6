"""Submitting the real reindex job to the test cluster and waiting for it."""

from __future__ import annotations

import time
from pathlib import Path

from ray.job_submission import JobStatus, JobSubmissionClient

from actors.sync import submit_job
from tests.support.ray_cluster import RayCluster, reindex_entrypoint

TERMINAL = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}


def submit_reindex(cluster: RayCluster, repo: Path, name: str) -> tuple[JobSubmissionClient, str]:
    client = JobSubmissionClient(cluster.dashboard_url)
    return client, submit_job(client, reindex_entrypoint(repo, name), cluster.env)


def wait_for_job(client: JobSubmissionClient, job_id: str, timeout_s: float = 300.0) -> JobStatus:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = client.get_job_status(job_id)
        if status in TERMINAL:
            return status
        time.sleep(0.5)
    client.stop_job(job_id)
    raise TimeoutError(f"job {job_id} still running after {timeout_s}s:\n{client.get_job_logs(job_id)}")


def reindex(cluster: RayCluster, repo: Path, name: str) -> str:
    """Run a reindex job to completion; return its log. Fails the test if the job failed."""
    client, job_id = submit_reindex(cluster, repo, name)
    status = wait_for_job(client, job_id)
    logs = client.get_job_logs(job_id)
    assert status == JobStatus.SUCCEEDED, logs
    return logs
