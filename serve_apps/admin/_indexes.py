"""The admin API's index routes: index, refresh and remove any indexable folder (the admin token is the
authority; `index.allowed_roots` confines MCP clients only), the builds and registrations, and the git
host's push webhook.

    GET    /admin/indexes                 registrations (folder, ref, last signature) and builds
    POST   /admin/indexes                 {"path", "name"?, "ref"?, "full"?} → the build's ticket
    POST   /admin/indexes/{name}/refresh  {"full"?}
    DELETE /admin/indexes/{name}
    POST   /admin/hooks/git[?index=name]  a push webhook: no bearer token, an HMAC-SHA256 signature of
                                          the whole request (method, path, query, timestamp, delivery
                                          id, body) with `index.hook_secret` instead, replay-safe
                                          (serve_apps/admin/_hook_auth.py); refreshes the named indexes and
                                          those whose folder's remote is the pushed one. 404 while
                                          `index.hook_secret` is unset, before the body is read.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from cluster.errors import (
    IndexNotFound,
    IndexRefused,
    LimitExceeded,
    PathRefused,
    RefNotFound,
    SamespaceError,
    original_error,
)
from cluster.index import UNRESTRICTED_READER
from cluster.ingest import remote_urls
from cluster.search import IndexStatusReader
from cluster.settings import SamespaceSettings, limit_name
from cluster.sync import BuildReport
from serve_apps.admin._hook_auth import (
    SIGNATURE_HEADER,
    DeliveryLedger,
    DeliveryVerdict,
    MalformedHookHeaders,
    parse_hook_headers,
    signature_valid,
    signed_message,
)
from serve_apps.body_limits import read_capped_body
from serve_apps.index_service import IndexService

HOOK_ROUTE = "/hooks/git"


class IndexRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, max_length=4096, description="Absolute path of the folder to index.")
    name: str | None = Field(default=None, min_length=1, max_length=63)
    ref: str | None = Field(default=None, min_length=1, max_length=200)
    full: bool = False


class RefreshRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    full: bool = False


def pushed_urls(payload: Any) -> set[str]:
    """The repository URLs a push payload names (GitHub, GitLab, Gitea shapes)."""
    repository = payload.get("repository") if isinstance(payload, dict) else None
    if not isinstance(repository, dict):
        return set()
    keys = ("clone_url", "ssh_url", "git_url", "html_url", "url", "git_http_url", "git_ssh_url")
    return {normalize_url(str(repository[key])) for key in keys if isinstance(repository.get(key), str)}


def normalize_url(url: str) -> str:
    """'git@github.com:o/r.git', 'https://github.com/o/r' → 'github.com/o/r'."""
    url = url.strip().lower().removesuffix("/").removesuffix(".git")
    for prefix in ("https://", "http://", "ssh://", "git://"):
        url = url.removeprefix(prefix)
    url = url.split("@", 1)[-1]
    return url.replace(":", "/", 1) if "/" in url and ":" in url.split("/", 1)[0] else url


def _status(error: SamespaceError) -> int:
    if isinstance(error, PathRefused | IndexRefused):
        return 403
    if isinstance(error, LimitExceeded):
        return 429
    if isinstance(error, IndexNotFound):
        return 404
    if isinstance(error, RefNotFound):
        return 422
    return 400


async def _answer(call: Any) -> Any:
    try:
        return await call
    except SamespaceError as exc:
        error = original_error(exc)
        raise HTTPException(_status(error), str(error)) from exc


def add_index_routes(app: FastAPI, indexes: IndexService, settings: SamespaceSettings) -> None:
    status_reader = IndexStatusReader(settings.limits)  # git asked at most once per limits.status_git_period_s
    deliveries = DeliveryLedger(settings.limits.hook_window_s, settings.limits.max_hook_deliveries, time.time)

    @app.get("/indexes")
    async def list_indexes() -> dict[str, Any]:
        """Registrations, the builds the sync actor follows, and every index with its commit and
        freshness (what `index_status` answers an MCP client)."""
        from actors import get_index_actor
        from actors.search_ports import IndexActorPort

        registrations = await indexes.registrations()
        builds = await indexes.reports()
        port = IndexActorPort(await asyncio.to_thread(get_index_actor, settings))
        status = await status_reader.read(port, reader=UNRESTRICTED_READER)  # the admin API reads every index
        return {
            "registrations": [r.model_dump(mode="json") for r in registrations.values()],
            "builds": [b.model_dump(mode="json") for b in builds],
            "indexes": [i.model_dump(mode="json") for i in status.indexes],
        }

    @app.post("/indexes")
    async def index_folder(body: IndexRequest) -> BuildReport:
        report: BuildReport = await _answer(
            indexes.index_repository(body.path, body.name, body.ref, body.full, confined=False)
        )
        return report

    @app.post("/indexes/{name}/refresh")
    async def refresh(name: str, body: RefreshRequest | None = None) -> BuildReport:
        report: BuildReport = await _answer(indexes.refresh(name, body.full if body else False, confined=False))
        return report

    @app.delete("/indexes/{name}")
    async def remove(name: str) -> dict[str, Any]:
        return {"index": name, "builds": await _answer(indexes.remove(name, confined=False))}

    @app.post(HOOK_ROUTE)
    async def git_hook(request: Request) -> dict[str, Any]:
        secret = settings.index.hook_secret
        if secret is None:
            raise HTTPException(404)  # off: nothing is read
        body = await _authenticated_body(request, secret.get_secret_value(), settings, deliveries)
        try:
            urls = pushed_urls(json.loads(body))
        except (ValueError, RecursionError):  # not JSON, or nested past the parser: no repository named
            urls = set()
        names = set(request.query_params.getlist("index"))
        registrations = await indexes.registrations()
        folders = [
            r.folder for r in registrations.values() if urls & {normalize_url(u) for u in remote_urls(Path(r.folder))}
        ]
        reports = await indexes.hook(folders, sorted(names))
        return {"refreshed": [report.ticket.index for report in reports]}


async def _authenticated_body(
    request: Request, secret: str, settings: SamespaceSettings, deliveries: DeliveryLedger
) -> bytes:
    """The body of a delivery that is signed, fresh and new (serve_apps/admin/_hook_auth.py), read as a capped
    stream only once its headers pass; an HTTPException otherwise (401, 400, 413, 409, 429)."""
    if SIGNATURE_HEADER not in request.headers:
        raise HTTPException(401, "missing signature")
    try:
        headers = parse_hook_headers(request.headers)
    except MalformedHookHeaders as exc:
        raise HTTPException(400, str(exc)) from None
    window = f"timestamp more than {limit_name('hook_window_s')} from now"
    if not deliveries.fresh(headers.signed_at):
        raise HTTPException(401, window)
    body = await read_capped_body(request, settings.limits.max_hook_body_bytes, "max_hook_body_bytes")
    path, query = request.scope["path"], request.scope.get("query_string", b"")  # as received: prefix, raw query
    message = signed_message(request.method, path, query, headers.timestamp, headers.delivery, body)
    if not signature_valid(secret, message, headers.signature):
        raise HTTPException(401, "bad signature")
    verdict = deliveries.admit(headers.delivery, headers.signed_at)
    if verdict is DeliveryVerdict.STALE:
        raise HTTPException(401, window)
    if verdict is DeliveryVerdict.REPLAYED:
        raise HTTPException(409, "delivery already accepted")
    if verdict is DeliveryVerdict.FULL:
        raise HTTPException(429, f"too many deliveries within the window: see {limit_name('max_hook_deliveries')}")
    return body
