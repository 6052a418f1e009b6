"""The serve-side pieces of index management: one MCP endpoint answering JSON or SSE by whether a
request asked for progress, the webhook's URL matching (its signature and replay protection:
test_git_hook.py), default names, progress lines."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from cluster.index import BuildProgress
from cluster.sync import BuildPhase, BuildReport, BuildTicket
from serve_apps.admin._indexes import normalize_url, pushed_urls
from serve_apps.index_service import default_index_name, progress_message
from serve_apps.mcp._progress_router import MAX_BODY_BYTES, ProgressRouter


def tagged(tag: str) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": tag.encode() + b":" + body})

    return app


def post(router: ProgressRouter, chunks: list[bytes], method: str = "POST") -> tuple[int, bytes]:
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(router({"type": "http", "method": method}, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def test_a_request_asking_for_progress_gets_the_stream_app_every_other_one_json() -> None:
    router = ProgressRouter(tagged("json"), tagged("sse"))
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search_code", "arguments": {}}}
    plain = json.dumps(call).encode()
    assert post(router, [plain]) == (200, b"json:" + plain)
    call["params"]["_meta"] = {"progressToken": 7}  # type: ignore[index]
    asking = json.dumps(call).encode()
    assert post(router, [asking[:20], asking[20:]]) == (200, b"sse:" + asking)  # the whole body reaches the app
    assert post(router, [b""], method="GET")[1] == b"json:"
    assert post(router, [b"x" * (MAX_BODY_BYTES + 1)])[0] == 413


def test_a_push_names_its_repository_in_every_spelling_a_remote_may_use() -> None:
    same = {
        "git@github.com:Org/Api.git",
        "https://github.com/org/api",
        "https://user@github.com/org/api.git/",
        "ssh://git@github.com/org/api.git",
    }
    assert {normalize_url(url) for url in same} == {"github.com/org/api"}
    payload = {"repository": {"clone_url": "https://github.com/org/api.git", "ssh_url": "git@github.com:org/api.git"}}
    assert pushed_urls(payload) == {"github.com/org/api"}
    assert pushed_urls({"repository": "x"}) == set() == pushed_urls([1])


def test_default_names_and_progress_lines() -> None:
    assert default_index_name(Path("/src/api"), None) == "api"
    assert default_index_name(Path("/src/api"), "feature/login") == "api.feature-login"
    assert default_index_name(Path("/src/my repo!"), "v1.2") == "my-repo-.v1.2"
    ticket = BuildTicket(index="api", build="api__b1", job_id="samespace-api__b1", folder="/src/api", submitted_at=0)
    progress = BuildProgress(files_done=3, files_total=9, chunks_done=30, chunks_total=90, chunks_per_s=12.5, eta_s=4.8)
    building = BuildReport(ticket=ticket, phase=BuildPhase.BUILDING, done=False, progress=progress)
    assert progress_message(building) == "building api: 3/9 files, 30/90 chunks, 12.5 chunks/s, ETA 5 s"
    failed = BuildReport(ticket=ticket, phase=BuildPhase.FAILED, done=True, error="job failed")
    assert progress_message(failed) == "failed api: job failed"
    assert progress_message(building.model_copy(update={"phase": BuildPhase.COMMITTED})) == "committed api"
