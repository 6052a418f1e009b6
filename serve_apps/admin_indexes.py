"""The admin API's index routes: index, refresh and remove any indexable folder (the admin token is the
authority; `index.allowed_roots` confines MCP clients only), the builds and registrations, and the git
host's push webhook.

    GET    /admin/indexes                 registrations (folder, ref, last signature) and builds
    POST   /admin/indexes                 {"path", "name"?, "ref"?, "full"?} → the build's ticket
    POST   /admin/indexes/{name}/refresh  {"full"?}
    DELETE /admin/indexes/{name}
    POST   /admin/hooks/git[?index=name]  a push webhook: no bearer token, an HMAC-SHA256 signature of
                                          the body with `index.hook_secret` instead (GitHub's
                                          X-Hub-Signature-256: sha256=<hex>); refreshes the named
                                          indexes and those whose folder's remote is the pushed one
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from cluster.errors import IndexNotFound, PathRefused, RefNotFound, SamespaceError, original_error
from cluster.ingest import remote_urls
from cluster.settings import SamespaceSettings
from cluster.sync import BuildReport
from serve_apps.code_search import index_status
from serve_apps.index_tools import IndexService

HOOK_ROUTE = "/hooks/git"
SIGNATURE_HEADER = "x-hub-signature-256"
MAX_HOOK_BODY_BYTES = 1 << 20


class IndexRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, max_length=4096, description="Absolute path of the folder to index.")
    name: str | None = Field(default=None, min_length=1, max_length=63)
    ref: str | None = Field(default=None, min_length=1, max_length=200)
    full: bool = False


class RefreshRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    full: bool = False


def hook_signature_valid(secret: str, body: bytes, header: str | None) -> bool:
    """GitHub's X-Hub-Signature-256: 'sha256=' + hex HMAC-SHA256 of the raw body, compared in constant time."""
    if not header or not header.startswith("sha256="):
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header.removeprefix("sha256="))


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
    if isinstance(error, PathRefused):
        return 403
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
    @app.get("/indexes")
    async def list_indexes() -> dict[str, Any]:
        """Registrations, the builds the sync actor follows, and every index with its commit and
        freshness (what `index_status` answers an MCP client)."""
        from actors import get_index_actor

        registrations = await indexes.registrations()
        builds = await indexes.reports()
        status = await index_status(await asyncio.to_thread(get_index_actor, settings))
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
        report: BuildReport = await _answer(indexes.refresh(name, body.full if body else False))
        return report

    @app.delete("/indexes/{name}")
    async def remove(name: str) -> dict[str, Any]:
        return {"index": name, "builds": await _answer(indexes.remove(name))}

    @app.post(HOOK_ROUTE)
    async def git_hook(request: Request) -> dict[str, Any]:
        secret = settings.index.hook_secret
        body = await request.body()
        if secret is None or len(body) > MAX_HOOK_BODY_BYTES:
            raise HTTPException(404 if secret is None else 413)
        if not hook_signature_valid(secret.get_secret_value(), body, request.headers.get(SIGNATURE_HEADER)):
            raise HTTPException(401, "bad or missing signature")
        try:
            urls = pushed_urls(json.loads(body))
        except ValueError:
            urls = set()
        names = set(request.query_params.getlist("index"))
        registrations = await indexes.registrations()
        folders = [
            r.folder for r in registrations.values() if urls & {normalize_url(u) for u in remote_urls(Path(r.folder))}
        ]
        reports = await indexes.hook(folders, sorted(names))
        return {"refreshed": [report.ticket.index for report in reports]}
