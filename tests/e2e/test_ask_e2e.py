"""ask_code end to end: real Ray, real Serve over HTTP, the real MCP client, the real model and store.

The chat roles are scripted tool-calling models behind real HTTP: two vLLM-style local endpoints
(rlm, code-assistant) and a dedicated OpenRouter fake (cloud code-assistant, cloud rlm, a cloud
code-embedding lane). Endpoints are killed by PID in the middle of asks. The world (repository,
endpoints, deployment) is tests/support/ask_env.py; the progress of an ask is test_ask_progress_e2e.py.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import ray

from samespace.clients import call_tool, result_text
from tests.support.ask_env import (
    ANSWERING_CODER_RULE,
    ANSWERING_RLM_RULES,
    CLOUD_CODER,
    CLOUD_RLM,
    QUESTION,
    REPO,
    AskEnv,
    ask_env,
)
from tests.support.fakes.scripted_chat import ChatRule, ScriptedToolCall
from tests.support.ray_cluster import McpServer, RayCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NAMESPACE = "ask"

# Nonces route one test's asks to that test's scripted behaviour.
N_ONCE, N_ROUNDS, N_GARBAGE, N_WINDOW = "nonce-once", "nonce-rounds", "nonce-garbage", "nonce-window"
N_KILL_RLM, N_KILL_CODER, N_CLOUD_CODER, N_KILL_CLOUD, N_ALL_DOWN = (
    "nonce-kill-rlm",
    "nonce-kill-coder",
    "nonce-cloud-coder",
    "nonce-kill-cloud",
    "nonce-all-down",
)
SLOW_S = 4.0

RLM_RULES = [
    ChatRule(when_all=[N_GARBAGE, "subQuestions"], content="{not: json,, at all"),
    ChatRule(
        when_all=[N_GARBAGE],
        requires_tools=True,
        times=1,
        tool_calls=[
            ScriptedToolCall(name="search_symbols", arguments="{not json"),
            ScriptedToolCall(name="drop_tables", arguments={"query": "x"}),
            ScriptedToolCall(
                name="read_range", arguments={"path": "billing/adjust.py", "start_line": "one", "end_line": 2}
            ),
        ],
    ),
    ChatRule(when_all=[N_ONCE, "subQuestions"], content="I would rather not plan."),
    ChatRule(
        when_all=[N_ROUNDS],
        requires_tools=True,
        tool_calls=[ScriptedToolCall(name="search_files", arguments={"query": "billing"})],
    ),
    ChatRule(when_all=[N_KILL_RLM], requires_tools=True, latency_s=SLOW_S, content="never delivered"),
    ChatRule(when_all=[N_KILL_CLOUD], requires_tools=True, latency_s=SLOW_S, content="Draft: {citations}"),
    *ANSWERING_RLM_RULES,
]
CODER_RULES = [
    ChatRule(when_all=[N_KILL_CODER], latency_s=SLOW_S, content="never delivered"),
    ANSWERING_CODER_RULE,
]
CLOUD_RULES = [
    ChatRule(model=CLOUD_CODER, when_all=[N_KILL_CODER], status=503),
    ChatRule(model=CLOUD_CODER, content="Cloud answer: {citations}."),
    ChatRule(model=CLOUD_RLM, content="the cloud rlm must not be asked under local-only"),
]


@pytest.fixture(scope="module")
def env(ray_cluster: RayCluster, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AskEnv]:
    with ask_env(
        mcp_server,
        tmp_path_factory,
        namespace=NAMESPACE,
        app="ask",
        rlm_rules=RLM_RULES,
        coder_rules=CODER_RULES,
        cloud_rules=CLOUD_RULES,
    ) as started:
        yield started


@pytest.fixture(autouse=True)
def endpoints_up(env: AskEnv) -> Iterator[None]:
    """Every test starts with all three endpoints answering, and leaves them so: a test that kills one
    restarts it even when it fails halfway, so no later test meets a dead endpoint."""
    env.restart_stopped_endpoints()
    yield
    env.restart_stopped_endpoints()


def cited_paths(result: dict[str, Any]) -> set[str]:
    return {c["path"] for c in result["citations"]}


def chat_requests(server: Any, nonce: str, model: str | None = None) -> list[dict[str, Any]]:
    return [
        r for r in server.chat_log() if nonce in str(r.get("messages")) and (model is None or r.get("model") == model)
    ]


def ask_in_background(env: AskEnv, question: str) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = env.ask(question)
        except BaseException as exc:  # noqa: BLE001  a thread's failure, whatever it is, goes to the test's assertion
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def test_plain_top_10_retrieval_misses_the_function_the_answer_needs(env: AskEnv) -> None:
    result = asyncio.run(call_tool(env.mcp_url, "search_code", {"query": QUESTION, "k": 10, "repo": REPO}))
    hits = result.structured_content["hits"]  # type: ignore[index]
    assert len(hits) == 10 and "billing/adjust.py" not in {h["path"] for h in hits}


def test_ask_code_finds_the_eleventh_chunk_in_a_second_round_and_cites_it(env: AskEnv) -> None:
    result = asyncio.run(call_tool(env.mcp_url, "ask_code", {"question": QUESTION, "repo": REPO}))
    assert not result.is_error, result_text(result)
    answer = result.structured_content
    assert answer is not None
    produced = answer["produced"]
    assert produced["mode"] == "synthesis" and produced["fallbacks"] == []
    assert "search_symbols(query='zeta_adjust')" in produced["tools_called"]
    adjust = [c for c in answer["citations"] if c["path"] == "billing/adjust.py"]
    assert adjust and adjust[0]["via"] == "rlm" and adjust[0]["symbol"] == "zeta_adjust"
    assert "billing/adjust.py:1-2" in answer["answer"]
    assert produced["rlm_provider"] == "samespace-chat-rlm-0"
    assert produced["synthesis_provider"] == "samespace-chat-code-assistant-0"
    assert produced["rounds"] >= 2 and produced["context_tokens"] == {"rlm": 32768, "code-assistant": 32768}
    assert set(produced["timings"]) == {"retrieval_ms", "gather_ms", "synthesis_ms", "total_ms"}
    assert chat_requests(env.cloud, "late fee", CLOUD_RLM) == []  # default fallback mode: local only


def test_the_question_is_embedded_exactly_once_per_ask(env: AskEnv) -> None:
    question = f"Which function adjusts an amount after the late fee? ({N_ONCE})"
    result = env.ask(question)
    assert result["produced"]["plan"] == []  # unparseable plan: the question itself was searched again
    searches = [t for t in result["produced"]["tools_called"] if t.startswith("search_code")]
    assert searches  # ... and that search reused the cached vector:
    embedder = ray.get_actor("samespace-embedder-cpu0", namespace=NAMESPACE)
    assert ray.get(embedder.encode_count.remote(question)) == 1


def test_rounds_stop_at_max_rounds_and_the_last_round_makes_no_tool_call(env: AskEnv) -> None:
    result = env.ask(f"List the billing files ({N_ROUNDS})")
    rounds = [r for r in chat_requests(env.rlm, N_ROUNDS) if "tools" in r]
    assert [r["tool_choice"] for r in rounds] == ["auto", "none"]  # max_rounds = 2
    assert result["produced"]["rounds"] == 2 and result["produced"]["rlm_status"] == "answered"
    assert result["produced"]["tools_called"].count("search_files(query='billing')") == 1


def test_a_smaller_window_read_from_the_endpoint_shrinks_the_evidence_budget(env: AskEnv) -> None:
    wide = env.ask(f"{QUESTION} ({N_WINDOW}-wide)")
    env.rlm.update(max_model_len=3000)
    env.coder.update(max_model_len=3000)
    try:
        narrow = env.ask(f"{QUESTION} ({N_WINDOW}-narrow)")
    finally:
        env.rlm.update(max_model_len=32768)
        env.coder.update(max_model_len=32768)
    assert narrow["produced"]["context_tokens"] == {"rlm": 3000, "code-assistant": 3000}
    for step in ("rlm", "code-assistant"):
        assert narrow["produced"]["evidence_budget_chars"][step] < wide["produced"]["evidence_budget_chars"][step]
    assert narrow["produced"]["evidence_budget_chars"]["rlm"] < 4000 < wide["produced"]["evidence_budget_chars"]["rlm"]
    assert narrow["produced"]["mode"] == "synthesis"  # the smaller requests were accepted by the 3000-token server


def test_malformed_plans_and_tool_calls_are_survived(env: AskEnv) -> None:
    result = env.ask(f"{QUESTION} ({N_GARBAGE})")
    rejected = result["produced"]["rejected_tool_calls"]
    assert len(rejected) == 3 and any("unknown tool" in r for r in rejected)
    assert any("not JSON" in r for r in rejected) and any("start_line" in r for r in rejected)
    assert result["produced"]["mode"] == "synthesis" and result["citations"]


def test_rlm_killed_mid_ask_the_answer_comes_from_what_was_gathered(env: AskEnv) -> None:
    thread, box = ask_in_background(env, f"{QUESTION} ({N_KILL_RLM})")
    wait_until(lambda: any("tools" in r for r in chat_requests(env.rlm, N_KILL_RLM)), what="the rlm's first round")
    env.rlm.kill()
    thread.join(90)
    result = box.get("result")
    assert result is not None, box.get("error")
    produced = result["produced"]
    assert produced["rlm_status"] == "endpoint-error" and produced["mode"] == "synthesis"
    assert any(f.startswith("rlm: endpoint-error") for f in produced["fallbacks"])
    assert result["citations"]
    assert chat_requests(env.cloud, N_KILL_RLM, CLOUD_RLM) == []  # local-only: the cloud rlm stays out


def test_code_assistant_killed_mid_ask_the_draft_answers(env: AskEnv) -> None:
    thread, box = ask_in_background(env, f"{QUESTION} ({N_KILL_CODER})")
    wait_until(lambda: chat_requests(env.coder, N_KILL_CODER), what="the synthesis request")
    env.coder.kill()
    thread.join(90)
    result = box.get("result")
    assert result is not None, box.get("error")
    produced = result["produced"]
    assert produced["mode"] == "draft" and "synthesis unavailable → the RLM's draft" in produced["fallbacks"]
    assert chat_requests(env.cloud, N_KILL_CODER, CLOUD_CODER)  # the cloud reserve was tried (and failed)
    assert "billing/adjust.py" in cited_paths(result)

    while_down = env.ask(f"{QUESTION} ({N_CLOUD_CODER})")  # local assistant still dead: the cloud reserve writes
    assert while_down["produced"]["mode"] == "synthesis"
    assert while_down["produced"]["synthesis_provider"].endswith("-OR-CodeAssistant")
    assert while_down["answer"].startswith("Cloud answer:")


def test_cloud_lane_killed_mid_ask_then_everything_down_leaves_a_citations_only_answer(env: AskEnv) -> None:
    thread, box = ask_in_background(env, f"{QUESTION} ({N_KILL_CLOUD})")
    wait_until(lambda: any("tools" in r for r in chat_requests(env.rlm, N_KILL_CLOUD)), what="the rlm's first round")
    env.cloud.kill()  # the cloud embedding lane (and the cloud chat reserve) is gone mid-ask
    thread.join(90)
    result = box.get("result")
    assert result is not None, box.get("error")
    assert result["produced"]["mode"] == "synthesis" and result["citations"]

    env.rlm.kill()
    env.coder.kill()
    down = env.ask(f"{QUESTION} ({N_ALL_DOWN})")  # `endpoints_up` restarts all three afterwards
    produced = down["produced"]
    assert produced["mode"] == "citations-only" and down["answer"].startswith("No model could write an answer")
    assert any(f.startswith("rlm: unavailable") for f in produced["fallbacks"])
    assert "synthesis unavailable → citations only" in produced["fallbacks"]
    assert down["citations"] and all(c["via"] == "seed" for c in down["citations"])  # from local retrieval


async def test_the_rlm_tools_are_mcp_tools_too(env: AskEnv) -> None:
    symbols = await call_tool(env.mcp_url, "search_symbols", {"query": "zeta_adjust", "repo": REPO})
    hit = symbols.structured_content["hits"][0]  # type: ignore[index]
    assert (hit["path"], hit["start_line"], hit["match"]) == ("billing/adjust.py", 1, "exact")
    files = await call_tool(env.mcp_url, "search_files", {"query": "adjust", "repo": REPO})
    assert files.structured_content["files"][0]["path"] == "billing/adjust.py"  # type: ignore[index]
    around = await call_tool(env.mcp_url, "neighbors", {"path": "README.md", "line": 1, "repo": REPO})
    assert around.structured_content["anchor"]["path"] == "README.md"  # type: ignore[index]
    overview = await call_tool(env.mcp_url, "repo_overview", {"repo": REPO})
    shape = overview.structured_content
    assert shape is not None and shape["files"] == 14 and shape["readme"].startswith("# Shop")
    missing = await call_tool(env.mcp_url, "neighbors", {"path": "nope.py", "line": 1, "repo": REPO})
    assert missing.is_error and "nope.py" in result_text(missing)


def test_a_bad_ask_body_is_422_naming_the_field(env: AskEnv) -> None:
    response = httpx.post(f"{env.base}/rlm/ask", json={"question": "", "deep": "maybe"}, timeout=30)
    assert response.status_code == 422
    fields = {tuple(e["loc"]) for e in response.json()["detail"]}
    assert ("body", "question") in fields and ("body", "deep") in fields
