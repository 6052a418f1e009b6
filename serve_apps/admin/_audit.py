"""The audit log on the admin surface: one line per admin action, and `GET /admin/audit` to read it.

Every admin request that changes something (any method but GET, HEAD and OPTIONS) that reached a route
is written down when it ends: the acting principal (`cluster.auth.current_principal()`, which the HTTP
layer sets), `<METHOD> /admin<route>` (the route's template, never the raw path or the body), the index
a route names (`{name}`), the outcome by the answer's status, and how long it took. A request refused
before the routes (a missing or wrong token, 401) is not an action and is not written.

`GET /admin/audit?subject=&action=&outcome=&index=&since=&until=&limit=` answers the matching records,
newest first (`cluster.auth.AuditQuery`: an unknown parameter is a 422). The log is one per process
(`replica_audit_log`): the MCP tools and the admin routes of a replica append to the same object.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import Response

from cluster.auth import AuditLog, AuditOutcome, AuditQuery, AuditRecord, audit_path, current_principal
from cluster.settings import SamespaceSettings

AUDIT_ROUTE = "/audit"
ADMIN_PREFIX = "/admin"
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

_LOGS: dict[Path, AuditLog] = {}  # one per data_dir in this process


def replica_audit_log(settings: SamespaceSettings) -> AuditLog:
    """This process's audit log for `settings` (`<store.data_dir>/audit.jsonl`), made at the first call."""
    path = audit_path(settings)
    found = _LOGS.get(path)
    if found is None or found.settings != settings.audit:
        found = _LOGS[path] = AuditLog(path, settings.audit, time.time)
    return found


def outcome_of_status(status: int) -> AuditOutcome:
    """An admin answer's outcome: 2xx/3xx ok, 401/403 denied, 429 quota, another 4xx error, 5xx failed."""
    if status < 400:
        return "ok"
    if status in (401, 403):
        return "denied"
    if status == 429:
        return "quota"
    return "error" if status < 500 else "failed"


def admin_record(audit: AuditLog, request: Request, status: int, ms: float) -> AuditRecord | None:
    """The line of one admin request that reached a route (None: it matched none)."""
    route = request.scope.get("route")
    template = getattr(route, "path", None)
    if not isinstance(template, str):
        return None
    name = request.scope.get("path_params", {}).get("name")
    return AuditRecord.by(
        current_principal(),
        time=audit.now(),
        surface="admin",
        action=f"{request.method} {ADMIN_PREFIX}{template}",
        indexes=[name] if isinstance(name, str) else [],
        outcome=outcome_of_status(status),
        ms=ms,
    )


def add_audit(app: FastAPI, audit: AuditLog) -> None:
    """The admin actions written down (a middleware: add it before the token check, so it runs inside it
    and sees the caller the outer layers set) and `GET /audit`."""

    @app.middleware("http")
    async def audited(request: Request, call_next: Any) -> Response:
        if request.method in READ_METHODS:
            response: Response = await call_next(request)
            return response
        began, status = time.perf_counter(), 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            record = admin_record(audit, request, status, (time.perf_counter() - began) * 1000)
            if record is not None:
                await asyncio.to_thread(audit.append, record)

    @app.get(AUDIT_ROUTE)
    async def audit_records(query: Annotated[AuditQuery, Query()]) -> dict[str, Any]:
        """The matching audit records, newest first."""
        records = await asyncio.to_thread(audit.read, query)
        return {"records": [record.model_dump(mode="json", exclude_none=True) for record in records]}
