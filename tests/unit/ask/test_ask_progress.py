"""An ask's progress at the serving edge, on the real apps without Ray: `ask_code` turns the steps into MCP
progress notifications for a caller with a progress token, and `POST /rlm/ask` into server-sent events
for a request that accepts `text/event-stream` (JSON stays the default). The asker is scripted here; the
pipeline's own events are tested in test_ask_pipeline.py, the whole path in tests/e2e/test_ask_progress_e2e.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest
from starlette.testclient import TestClient

from cluster.ask.ask_progress import AskProgress, ProgressCallback
from cluster.ask.pipeline import AskRequest, AskResult, AskTrace, Citation
from cluster.auth import Principal, acting_as
from cluster.errors import IndexNotFound
from cluster.settings import SamespaceSettings
from serve_apps.mcp._ask import AskService, ask_events

BASE = "http://127.0.0.1:8000"
STEPS = [
    AskProgress(kind="plan", step=1, message="plan made: search_code('late fee')", rounds=2),
    AskProgress(kind="round", step=2, message="round 1 of 2: the retrieval model reads the evidence", round=1),
    AskProgress(kind="tool", step=3, message="round 1: search_symbols(query='fee') → 1 found", tool="search_symbols"),
    AskProgress(kind="synthesis", step=4, message="synthesis started: an answer from 3 evidence blocks"),
    AskProgress(kind="done", step=5, total=5, message="done: synthesis answer, 1 citations"),
]
RESULT = AskResult(
    question="How is the late fee computed?",
    answer="In billing/fees.py:1-4.",
    citations=[Citation(repo="shop", path="billing/fees.py", start_line=1, end_line=4, via="seed")],
    produced=AskTrace(mode="synthesis", deep=True),
)


class ScriptedAsker:
    """`AskService.ask` as the apps call it: the scripted steps to the listener, then the result (or `fail`)."""

    def __init__(self, fail: Exception | None = None, hang: bool = False) -> None:
        self.fail = fail
        self.hang = hang
        self.listened: list[bool] = []
        self.cancelled = False

    async def ask(self, request: AskRequest, progress: ProgressCallback | None = None) -> AskResult:
        self.listened.append(progress is not None)
        for event in STEPS[: 1 if self.hang else None]:
            if progress is not None:
                await progress(event)
        if self.hang:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise
        if self.fail is not None:
            raise self.fail
        return RESULT


def app_client(asker: ScriptedAsker) -> TestClient:
    from serve_apps.mcp import build_asgi_app

    api = build_asgi_app(cast(Any, None), cast(AskService, asker), SamespaceSettings())
    return TestClient(api, base_url=BASE)


def events(body: str) -> list[tuple[str, Any]]:
    """(event, data) of each server-sent event in a body (either line ending); comment lines are skipped."""
    found = []
    for frame in body.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in frame.splitlines() if line and not line.startswith(":"))
        if fields:
            found.append((fields.get("event", "message"), json.loads(fields["data"])))
    return found


def test_rlm_ask_streams_progress_then_the_result_to_a_client_that_accepts_events() -> None:
    asker = ScriptedAsker()
    with app_client(asker) as client:
        response = client.post("/rlm/ask", json={"question": RESULT.question}, headers={"accept": "text/event-stream"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    received = events(response.text)
    assert [name for name, _ in received] == ["progress"] * 5 + ["result"]
    assert [AskProgress.model_validate(data) for _, data in received[:5]] == STEPS
    assert AskResult.model_validate(received[-1][1]) == RESULT


def test_rlm_ask_answers_json_by_default_and_listens_to_nothing() -> None:
    asker = ScriptedAsker()
    with app_client(asker) as client:
        response = client.post("/rlm/ask", json={"question": RESULT.question})
    assert response.headers["content-type"] == "application/json"
    assert AskResult.model_validate(response.json()) == RESULT and asker.listened == [False]


@pytest.mark.parametrize(
    ("failure", "shown"),
    [
        (IndexNotFound("nope", ["shop"]), "unknown repo 'nope'; indexed repos: shop"),
        (RuntimeError("a detail for the log only"), "the ask failed (RuntimeError)"),
    ],
)
def test_a_failed_streamed_ask_ends_with_one_error_event(failure: Exception, shown: str) -> None:
    with app_client(ScriptedAsker(fail=failure)) as client:
        response = client.post("/rlm/ask", json={"question": "q"}, headers={"accept": "text/event-stream"})
    received = events(response.text)
    assert [name for name, _ in received] == ["progress"] * 5 + ["error"]
    assert received[-1][1] == {"error": shown}


def test_a_client_that_leaves_the_stream_cancels_the_ask() -> None:
    asker = ScriptedAsker(hang=True)

    async def leave_after_the_first_event() -> str:
        stream = ask_events(cast(AskService, asker), AskRequest(question="q"))
        first = await anext(stream)
        await stream.aclose()  # what Starlette does when the client disconnects
        await asyncio.sleep(0)
        return first

    first = asyncio.run(leave_after_the_first_event())
    assert first.startswith("event: progress\ndata: ") and asker.cancelled


def mcp_call(client: TestClient, meta: dict[str, Any] | None) -> Any:
    params: dict[str, Any] = {"name": "ask_code", "arguments": {"question": RESULT.question}}
    if meta is not None:
        params["_meta"] = meta
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    with acting_as(Principal.shared("local")):  # the caller the HTTP guard sets (ANONYMOUS holds no scope)
        return client.post("/mcp/", json=body, headers={"accept": "application/json, text/event-stream"})


def test_ask_code_sends_each_step_as_a_progress_notification_to_a_caller_with_a_token() -> None:
    asker = ScriptedAsker()
    with app_client(asker) as client:
        response = mcp_call(client, {"progressToken": "ask-1"})
    assert response.headers["content-type"].startswith("text/event-stream")
    messages = [data for _, data in events(response.text)]
    notes = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert [(n["progressToken"], n["progress"], n.get("total"), n["message"]) for n in notes] == [
        ("ask-1", s.step, s.total, s.message) for s in STEPS
    ]
    result = next(m["result"] for m in messages if m.get("id") == 7)
    assert AskResult.model_validate(result["structuredContent"]) == RESULT and asker.listened == [True]


def test_ask_code_without_a_token_answers_json_and_listens_to_nothing() -> None:
    asker = ScriptedAsker()
    with app_client(asker) as client:
        response = mcp_call(client, None)
    assert response.headers["content-type"].startswith("application/json")
    assert AskResult.model_validate(response.json()["result"]["structuredContent"]) == RESULT
    assert asker.listened == [False]
