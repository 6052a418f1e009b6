"""The admin API's jobs route: the recent Ray jobs of this cluster, for the operator page.

    GET /admin/jobs[?limit=N]   submitted jobs, newest first: submission id, status, start and end
                                time (unix s), and for a reindex job the index, build and ref it builds

Read through Ray's job API at the address the sync actor submits to (`actors.sync.job_client`: the
dashboard's, found in the GCS). Only submitted jobs are listed (a driver such as a Serve controller's
has no submission id). What a job runs is read from its entrypoint's `jobs.reindex` arguments and
nothing else of it leaves this module: never the entrypoint itself, its environment, the runtime env
or the job's log.
"""

from __future__ import annotations

import asyncio
import shlex
import threading
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI, HTTPException, Query

JOBS_ROUTE = "/jobs"
JOBS_TIMEOUT_S = 15.0  # the job API answers in well under a second; a stuck dashboard must not hang the page
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
MAX_FIELD_CHARS = 200  # an index name, build id or ref as shown: clipped, never a whole argument list
REINDEX_MODULE = "jobs.reindex"

JobList = Callable[[], Sequence[Any]]  # Ray's `JobDetails` (or anything with the same attributes)


class RayJobList:
    """The cluster's jobs through one JobSubmissionClient, made at the first call and again after a failure."""

    def __init__(self) -> None:
        self._client: Any = None
        self._lock = threading.Lock()

    def __call__(self) -> Sequence[Any]:
        from actors.sync import job_client

        with self._lock:
            if self._client is None:
                self._client = job_client()
            client = self._client
        try:
            return list(client.list_jobs())
        except Exception:
            with self._lock:
                self._client = None  # the dashboard may have moved (a restarted head): look it up again
            raise


def reindex_target(entrypoint: str) -> dict[str, Any]:
    """What a `python -m jobs.reindex ...` entrypoint builds: kind, index, build, ref, full.
    Any other entrypoint is kind 'other' with nothing read from it."""
    nothing: dict[str, Any] = {"kind": "other", "index": None, "build": None, "ref": None, "full": False}
    try:
        argv = shlex.split(entrypoint)
    except ValueError:
        return nothing
    at = next((i for i in range(len(argv) - 1) if argv[i] == "-m" and argv[i + 1] == REINDEX_MODULE), None)
    if at is None:
        return nothing
    args = argv[at + 2 :]
    return {
        "kind": "reindex",
        "index": _flag(args, "--name"),
        "build": _flag(args, "--build-id"),
        "ref": _flag(args, "--ref"),
        "full": "--full" in args,
    }


def _flag(args: list[str], name: str) -> str | None:
    """The value of `--name value` or `--name=value`, clipped; None when absent."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1][:MAX_FIELD_CHARS]
        if arg.startswith(name + "="):
            return arg[len(name) + 1 :][:MAX_FIELD_CHARS]
    return None


def _seconds(ms: Any) -> float | None:
    """Ray reports job times in ms since the epoch; the page reads unix seconds, like every other route."""
    return round(ms / 1000.0, 3) if isinstance(ms, int | float) and ms > 0 else None


def job_row(job: Any) -> dict[str, Any] | None:
    """One submitted job as the route lists it; None for a job with no submission id (a driver)."""
    submission_id = getattr(job, "submission_id", None)
    if not submission_id:
        return None
    status = getattr(job, "status", None)
    return {
        "submission_id": str(submission_id)[:MAX_FIELD_CHARS],
        "status": str(getattr(status, "value", status)),
        "start_time": _seconds(getattr(job, "start_time", None)),
        "end_time": _seconds(getattr(job, "end_time", None)),
        "error_type": getattr(job, "error_type", None),
        **reindex_target(str(getattr(job, "entrypoint", "") or "")),
    }


def recent_jobs(jobs: Sequence[Any], limit: int) -> list[dict[str, Any]]:
    rows = [row for row in map(job_row, jobs) if row is not None]
    rows.sort(key=lambda row: row["start_time"] or 0.0, reverse=True)
    return rows[:limit]


def add_job_routes(app: FastAPI, jobs: JobList | None = None) -> None:
    """`GET /jobs` on the admin app (behind its token); `jobs` lists the cluster's jobs (default: Ray's job API)."""
    source: JobList = jobs if jobs is not None else RayJobList()

    @app.get(JOBS_ROUTE)
    async def list_jobs(limit: int = Query(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)) -> dict[str, Any]:
        try:
            found = await asyncio.wait_for(asyncio.to_thread(source), JOBS_TIMEOUT_S)
        except Exception as exc:  # the job API is down or slow: the page shows this in place
            raise HTTPException(503, f"the job API did not answer ({type(exc).__name__})") from exc
        return {"jobs": recent_jobs(found, limit)}
