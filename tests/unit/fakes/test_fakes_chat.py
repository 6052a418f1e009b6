"""The scripted chat model shared by the fakes: the vLLM-shaped local LLM fake and the OpenRouter fake's chat rules."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from tests.support.fakes.local_llm import LocalLlmConfig, LocalLlmState, build_local_llm_app
from tests.support.fakes.local_llm_server import FakeLocalLlmServer
from tests.support.fakes.openrouter_fake import FakeConfig, FakeState, KeyConfig, build_fake_app
from tests.support.fakes.openrouter_server import FakeOpenRouterServer
from tests.support.fakes.scripted_chat import (
    ChatRule,
    RequestLog,
    ScriptedToolCall,
    ScriptRunner,
    chat_completion_body,
    citations,
    conversation_text,
)

LOCAL_MODEL = "local/qwen3-8b"
KEY = "sk-or-v1-chat000000000000000000000000000000"
TOOLS = [{"type": "function", "function": {"name": "search_code", "parameters": {"type": "object"}}}]
SEARCH = ScriptedToolCall(name="search_code", arguments={"query": "reindex"})


def request(*messages: dict[str, Any], model: str = LOCAL_MODEL, tools: bool = True, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": list(messages), **extra}
    if tools:
        body["tools"] = TOOLS
    return body


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant_call(arguments: str) -> dict[str, Any]:
    call = {"id": "call_x", "type": "function", "function": {"name": "search_code", "arguments": arguments}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def tool(text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "call_x", "content": text}


# -- rule matching -----------------------------------------------------------------------------


def test_rules_are_tried_in_order_and_the_first_match_wins() -> None:
    first, second = ChatRule(when_all=["alias"], content="first"), ChatRule(content="second")
    runner = ScriptRunner([first, second])
    assert runner.match(request(user("switch the alias"))) is first
    assert runner.match(request(user("something else"))) is second
    assert ScriptRunner([]).match(request(user("x"))) is None


def test_when_all_when_none_last_role_and_model_look_at_every_message() -> None:
    rule = ChatRule(model="m/a", when_all=["SYSTEM-MARK", "needle"], when_none=["forbidden"], last_role="tool")
    runner = ScriptRunner([rule])
    system = {"role": "system", "content": [{"type": "text", "text": "SYSTEM-MARK"}]}
    convo = [system, user("q"), assistant_call('{"query": "needle"}'), tool("result")]
    assert runner.match(request(*convo, model="m/a")) is rule
    assert runner.match(request(*convo, model="m/b")) is None  # other model
    assert runner.match(request(*convo[:-1], model="m/a")) is None  # last role is assistant
    assert runner.match(request(*convo, tool("forbidden"), model="m/a")) is None
    assert runner.match(request(system, user("q"), tool("result"), model="m/a")) is None  # needle missing
    assert "needle" in conversation_text(request(*convo))


def test_tool_call_rules_are_skipped_without_tools_or_under_tool_choice_none() -> None:
    calls = ChatRule(tool_calls=[SEARCH])
    needs = ChatRule(requires_tools=True, content="needs tools")
    answer = ChatRule(content="plain answer")
    runner = ScriptRunner([calls, needs, answer])
    assert runner.match(request(user("q"))) is calls
    assert runner.match(request(user("q"), tool_choice="none")) is answer
    assert runner.match(request(user("q"), tools=False)) is answer
    assert runner.match(request(user("q"), tool_choice="required")) is calls
    assert ScriptRunner([needs, answer]).match(request(user("q"), tools=True)) is needs
    assert ScriptRunner([needs]).match(request(user("q"), tools=True, tool_choice="none")) is None


def test_times_limits_how_often_a_rule_fires_and_configure_resets_counts() -> None:
    once, fallback = ChatRule(times=1, content="once"), ChatRule(content="after")
    runner = ScriptRunner([once, fallback])
    assert [runner.match(request(user("q"))) for _ in range(3)] == [once, fallback, fallback]
    runner.reset_counts()
    assert runner.match(request(user("q"))) is once
    runner.configure([ChatRule(times=0, content="never")])
    assert runner.match(request(user("q"))) is None


def test_completion_body_carries_tool_calls_with_unique_ids_and_verbatim_string_arguments() -> None:
    rule = ChatRule(tool_calls=[SEARCH, ScriptedToolCall(name="search_code", arguments='{"query": ')])
    body = chat_completion_body(rule, request(user("q")), "cmpl-1", "m/x")
    assert body["object"] == "chat.completion" and body["id"] == "cmpl-1" and body["model"] == "m/x"
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "tool_calls" and choice["index"] == 0
    calls = choice["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ['{"query": "reindex"}', '{"query": ']
    assert all(c["type"] == "function" and c["id"].startswith("call_") for c in calls)
    again = chat_completion_body(rule, request(user("q")), "cmpl-2", "m/x")["choices"][0]["message"]["tool_calls"]
    assert len({c["id"] for c in calls + again}) == 4
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_content_templates_fill_question_and_unique_citations_in_first_seen_order() -> None:
    rule = ChatRule(last_role="tool", content="Q: {question} | see {citations} | {other}")
    convo = request(
        {"role": "system", "content": "be brief"},
        user("where is reindex?"),
        assistant_call('{"query": "reindex"}'),
        tool("jobs/reindex.py:10-42 def main\ncluster/store.py:5-9 x\njobs/reindex.py:10-42 again"),
    )
    body = chat_completion_body(rule, convo, "cmpl-3", LOCAL_MODEL)
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "stop" and "tool_calls" not in choice["message"]
    assert (
        choice["message"]["content"]
        == "Q: where is reindex? | see jobs/reindex.py:10-42, cluster/store.py:5-9 | {other}"
    )
    assert citations("a_b/c-d.ts:1-2 and x.py:3-4, not y:1-2") == ["a_b/c-d.ts:1-2", "x.py:3-4"]


def test_request_log_keeps_the_last_500() -> None:
    log = RequestLog()
    for i in range(510):
        log.append({"i": i})
    entries = log.entries()
    assert len(entries) == 500 and entries[0] == {"i": 10} and entries[-1] == {"i": 509}
    log.clear()
    assert log.entries() == []


def test_rule_config_forbids_unknown_fields() -> None:
    with pytest.raises(ValueError, match=r"contents\s+Extra inputs are not permitted"):
        ChatRule.model_validate({"contents": "typo"})


# -- local LLM fake, in-process ----------------------------------------------------------------


def local_client(config: LocalLlmConfig | None = None) -> tuple[httpx.AsyncClient, LocalLlmState]:
    state = LocalLlmState(config=config or LocalLlmConfig())
    transport = httpx.ASGITransport(app=build_local_llm_app(state))
    return httpx.AsyncClient(transport=transport, base_url="http://local.test"), state


async def test_local_models_has_the_vllm_shape_and_omits_max_model_len_unless_reported() -> None:
    client, _ = local_client(LocalLlmConfig(model="local/m", max_model_len=4096))
    async with client:
        listing = (await client.get("/v1/models")).json()
        assert listing["object"] == "list"
        (card,) = listing["data"]
        assert card == {
            "id": "local/m",
            "object": "model",
            "created": card["created"],
            "owned_by": "vllm",
            "root": "local/m",
            "parent": None,
            "max_model_len": 4096,
            "permission": [],
        }
        assert isinstance(card["created"], int)
        await client.post("/_fake/config", content=LocalLlmConfig(report_context=False).model_dump_json())
        (card,) = (await client.get("/v1/models")).json()["data"]
        assert "max_model_len" not in card and card["id"] == LOCAL_MODEL
        assert (await client.get("/health")).status_code == 200


async def test_local_chat_follows_rules_then_echoes_and_never_calls_a_tool_by_itself() -> None:
    rules = [
        ChatRule(when_none=["tool-said"], tool_calls=[SEARCH]),
        ChatRule(last_role="tool", content="cited {citations}"),
    ]
    client, state = local_client(LocalLlmConfig(chat_rules=rules))
    async with client:
        first = (await client.post("/v1/chat/completions", json=request(user("CALL:search_code:{}")))).json()
        message = first["choices"][0]["message"]
        assert (
            first["choices"][0]["finish_reason"] == "tool_calls"
            and message["tool_calls"][0]["function"]["name"] == "search_code"
        )
        followup = request(user("q"), assistant_call("{}"), tool("tool-said a.py:1-2"))
        second = (await client.post("/v1/chat/completions", json=followup)).json()
        assert second["choices"][0]["message"]["content"] == "cited a.py:1-2"
        echo = (await client.post("/v1/chat/completions", json=request(user("tool-said CALL:search_code:{}")))).json()
        assert echo["choices"][0] == {
            "index": 0,
            "message": {"role": "assistant", "content": "echo: tool-said CALL:search_code:{}"},
            "finish_reason": "stop",
        }
        log = (await client.get("/_fake/chat_log")).json()
        assert [b["messages"][-1]["content"] for b in log] == [
            "CALL:search_code:{}",
            "tool-said a.py:1-2",
            "tool-said CALL:search_code:{}",
        ]
        assert (await client.get("/_fake/stats")).json() == {"chat_requests": 3, "models_requests": 0}
        await client.post("/_fake/reset")
        assert (await client.get("/_fake/chat_log")).json() == []
        assert state.stats.chat_requests == 0


async def test_local_status_malformed_and_latency_rules() -> None:
    rules = [
        ChatRule(when_all=["boom"], status=500),
        ChatRule(when_all=["garbage"], malformed=True),
        ChatRule(when_all=["slow"], latency_s=0.2, content="late"),
    ]
    client, _ = local_client(LocalLlmConfig(chat_rules=rules))
    async with client:
        boom = await client.post("/v1/chat/completions", json=request(user("boom")))
        assert boom.status_code == 500 and boom.json()["error"]["code"] == 500 and boom.json()["error"]["message"]
        garbage = await client.post("/v1/chat/completions", json=request(user("garbage")))
        assert garbage.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            json.loads(garbage.text)
        started = time.monotonic()
        slow = await client.post("/v1/chat/completions", json=request(user("slow")))
        assert time.monotonic() - started >= 0.2 and slow.json()["choices"][0]["message"]["content"] == "late"


async def test_local_api_key_down_wrong_model_and_context_overflow() -> None:
    client, _ = local_client(LocalLlmConfig(api_key="sk-local", max_model_len=10))
    async with client:
        bare = await client.post("/v1/chat/completions", json=request(user("hi")))
        assert bare.status_code == 401 and bare.json()["error"]["code"] == 401
        assert (await client.get("/v1/models")).status_code == 401
        auth = {"Authorization": "Bearer sk-local"}
        ok = await client.post("/v1/chat/completions", json=request(user("hi")), headers=auth)
        assert ok.status_code == 200
        wrong = await client.post("/v1/chat/completions", json=request(user("hi"), model="other/m"), headers=auth)
        assert wrong.status_code == 404
        long = await client.post("/v1/chat/completions", json=request(user("w " * 8), max_tokens=5), headers=auth)
        assert long.status_code == 400 and "maximum context length is 10" in long.json()["error"]["message"]
        await client.post("/_fake/config", content=LocalLlmConfig(down=True).model_dump_json())
        assert (await client.get("/v1/models")).status_code == 503
        assert (await client.post("/v1/chat/completions", json=request(user("hi")))).status_code == 503
        assert (await client.get("/health")).status_code == 200


# -- local LLM fake, as a subprocess -----------------------------------------------------------


def test_local_server_serves_models_and_kill_makes_the_port_refuse_until_restart() -> None:
    config = LocalLlmConfig(model="local/tiny", max_model_len=2048, chat_rules=[ChatRule(content="scripted")])
    with FakeLocalLlmServer(config) as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}" and server.pid is not None
        (card,) = httpx.get(f"{server.base_url}/v1/models").json()["data"]
        assert card["id"] == "local/tiny" and card["max_model_len"] == 2048 and card["owned_by"] == "vllm"
        body = request(user("hello"), model="local/tiny")
        assert (
            httpx.post(f"{server.base_url}/v1/chat/completions", json=body).json()["choices"][0]["message"]["content"]
            == "scripted"
        )
        assert server.chat_log() == [body] and server.stats().chat_requests == 1
        server.update(report_context=False)
        (card,) = httpx.get(f"{server.base_url}/v1/models").json()["data"]
        assert "max_model_len" not in card and card["id"] == "local/tiny"

        server.kill()
        assert server.pid is None
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{server.base_url}/health", timeout=2.0)

        server.restart()
        (card,) = httpx.get(f"{server.base_url}/v1/models").json()["data"]
        assert card["id"] == "local/tiny" and "max_model_len" not in card
        assert server.chat_log() == []


# -- chat rules in the OpenRouter fake ---------------------------------------------------------


def openrouter_client(*rules: ChatRule) -> tuple[httpx.AsyncClient, FakeState]:
    state = FakeState(config=FakeConfig(keys={KEY: KeyConfig(label="chat")}, chat_rules=list(rules)))
    transport = httpx.ASGITransport(app=build_fake_app(state))
    client = httpx.AsyncClient(
        transport=transport, base_url="http://fake.test", headers={"Authorization": f"Bearer {KEY}"}
    )
    return client, state


async def test_openrouter_fake_applies_chat_rules_counts_them_and_logs_requests() -> None:
    client, state = openrouter_client(
        ChatRule(model="m/tools", tool_calls=[SEARCH]),
        ChatRule(when_all=["boom"], status=503),
        ChatRule(when_all=["garbage"], malformed=True),
    )
    path = "/api/v1/chat/completions"
    async with client:
        called = (await client.post(path, json=request(user("q"), model="m/tools"))).json()
        assert called["choices"][0]["message"]["tool_calls"][0]["function"] == {
            "name": "search_code",
            "arguments": '{"query": "reindex"}',
        }
        assert called["provider"] == "fake"
        # tool_choice "none": the tool rule is skipped and the old default (an echo) answers
        plain = (await client.post(path, json=request(user("q"), model="m/tools", tool_choice="none"))).json()
        assert plain["choices"][0]["message"]["content"] == "echo: q"
        # no rule: the CALL:<tool>:<json> default still works
        legacy = (await client.post(path, json=request(user('CALL:search_code:{"query": "x"}'), model="m/x"))).json()
        assert legacy["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"query": "x"}'
        boom = await client.post(path, json=request(user("boom"), model="m/x"))
        assert boom.status_code == 503 and boom.json()["error"]["code"] == 503
        garbage = await client.post(path, json=request(user("garbage"), model="m/x"))
        assert garbage.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            json.loads(garbage.text)

        stats = state.stats()
        assert stats.total("ok", path="/chat/completions") == 3
        assert stats.total("errors", path="/chat/completions") == 2
        log = (await client.get("/_fake/chat_log")).json()
        assert [b["model"] for b in log] == ["m/tools", "m/tools", "m/x", "m/x", "m/x"]
        assert log[0] == request(user("q"), model="m/tools")

        await client.post("/_fake/reset")
        assert (await client.get("/_fake/chat_log")).json() == []
        await client.post(path, json=request(user("q"), model="m/x"))
        config = FakeConfig(keys={KEY: KeyConfig()}, chat_rules=[ChatRule(content="new rule")])
        await client.post("/_fake/config", content=config.model_dump_json())
        assert (await client.get("/_fake/chat_log")).json() == []
        answer = (await client.post(path, json=request(user("q"), model="m/x"))).json()
        assert answer["choices"][0]["message"]["content"] == "new rule"


def test_openrouter_server_exposes_the_chat_log() -> None:
    config = FakeConfig(keys={KEY: KeyConfig()}, chat_rules=[ChatRule(times=1, content="first")])
    with FakeOpenRouterServer(config=config, preload=False) as server:
        body = request(user("hello"), model="m/x")
        headers = {"Authorization": f"Bearer {KEY}"}
        answers = [
            httpx.post(f"{server.base_url}/chat/completions", json=body, headers=headers).json() for _ in range(2)
        ]
        assert [a["choices"][0]["message"]["content"] for a in answers] == ["first", "echo: hello"]
        assert server.chat_log() == [body, body]
        server.reset()
        assert server.chat_log() == []
