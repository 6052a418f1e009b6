"""An ask's progress end to end: real Ray, real Serve over HTTP, the real model and store, the scripted
chat endpoints of tests/support/ask_env.py.

The `mcp` package's client calls ask_code with a progress callback and hears each step in order —
plan made, the planned search, round 1 of 2, the tool that round called, round 2 of 2, synthesis
started, done — before the answer; httpx streams `POST /rlm/ask` with `Accept: text/event-stream` and
reads the same steps as `progress` events while they happen, then the `result`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.ask_env import ANSWERING_CODER_RULE, ANSWERING_RLM_RULES, QUESTION, REPO, AskEnv, ask_env
from tests.support.fakes.scripted_chat import ChatRule
from tests.support.ray_cluster import McpServer, RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NAMESPACE = "askprogress"
N_SLOW_SYNTHESIS = "nonce-slow-synthesis"
SYNTHESIS_S = 2.0  # how long the streamed ask's synthesis takes: its earlier events must arrive before

CODER_RULES = [
    ChatRule(when_all=[N_SLOW_SYNTHESIS], latency_s=SYNTHESIS_S, content="The late fee is computed here: {citations}."),
    ANSWERING_CODER_RULE,
]


@pytest.fixture(scope="module")
def env(ray_cluster: RayCluster, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AskEnv]:
    with ask_env(
        mcp_server,
        tmp_path_factory,
        namespace=NAMESPACE,
        app="askprogress",
        rlm_rules=ANSWERING_RLM_RULES,
        coder_rules=CODER_RULES,
        cloud_rules=[],
    ) as started:
        yield started


def expected_steps(messages: list[str]) -> None:
    """The steps of the shop's ask, in the order they happen."""
    assert len(messages) == 7, messages
    assert messages[0] == "plan made: search_code('late fee overdue invoice')"
    assert messages[1].startswith("planned search: search_code(query='late fee overdue invoice') → ")
    assert messages[2] == "round 1 of 2: the retrieval model reads the evidence"
    assert messages[3].startswith("round 1: search_symbols(query='zeta_adjust') → ")
    assert messages[4] == "round 2 of 2: the retrieval model drafts from the evidence (last round)"
    assert messages[5].startswith("synthesis started: an answer from ")
    assert messages[6].startswith("done: synthesis answer, ")


async def ask_code_with_progress(url: str, arguments: dict[str, Any]) -> tuple[Any, list[tuple[float, Any, Any]]]:
    from mcp import Client

    heard: list[tuple[float, Any, Any]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    async with Client(url) as client:
        result = await client.call_tool("ask_code", arguments, progress_callback=on_progress)
    return result, heard


def test_ask_code_reports_plan_rounds_tools_synthesis_and_done_to_an_mcp_client(env: AskEnv) -> None:
    result, heard = asyncio.run(ask_code_with_progress(env.mcp_url, {"question": QUESTION, "repo": REPO}))
    assert not result.is_error, result.content
    expected_steps([message for _, _, message in heard])
    assert [progress for progress, _, _ in heard] == [1, 2, 3, 4, 5, 6, 7]  # only increases
    assert [total for _, total, _ in heard] == [None] * 6 + [7]  # known once the ask is done
    answer = result.structured_content
    assert answer["produced"]["mode"] == "synthesis"
    assert "billing/adjust.py" in {c["path"] for c in answer["citations"]}
    assert heard[-1][2] == f"done: synthesis answer, {len(answer['citations'])} citations"


def read_events(response: httpx.Response) -> list[tuple[str, Any, float]]:
    """(event, data, arrival time) of each server-sent event, read as the stream delivers them."""
    found: list[tuple[str, Any, float]] = []
    name, data = "message", ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data = line.removeprefix("data: ")
        elif not line and data:
            found.append((name, json.loads(data), time.monotonic()))
            name, data = "message", ""
    return found


def test_rlm_ask_streams_the_progress_then_the_result_to_a_client_that_accepts_events(env: AskEnv) -> None:
    body = {"question": f"{QUESTION} ({N_SLOW_SYNTHESIS})", "repo": REPO}
    headers = {"accept": "text/event-stream"}
    with httpx.stream("POST", f"{env.base}/rlm/ask", json=body, headers=headers, timeout=120) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = read_events(response)
    assert [name for name, _, _ in events] == ["progress"] * 7 + ["result"]
    progress = [data for _, data, _ in events[:-1]]
    expected_steps([p["message"] for p in progress])
    assert [p["kind"] for p in progress] == ["plan", "tool", "round", "tool", "round", "synthesis", "done"]
    assert [p["step"] for p in progress] == [1, 2, 3, 4, 5, 6, 7] and progress[-1]["total"] == 7
    assert progress[3]["tool"] == "search_symbols(query='zeta_adjust')" and progress[3]["round"] == 1
    result = events[-1][1]
    assert result["produced"]["mode"] == "synthesis" and "billing/adjust.py" in {c["path"] for c in result["citations"]}
    synthesis_heard, done_heard = events[5][2], events[6][2]
    assert done_heard - synthesis_heard >= SYNTHESIS_S * 0.8  # streamed as it happened, not sent at the end
    plain = env.ask(f"{QUESTION} (plain)")  # without the header: one JSON body, as before
    assert plain["produced"]["mode"] == "synthesis"
