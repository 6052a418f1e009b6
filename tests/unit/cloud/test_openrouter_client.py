"""cluster.cloud.openrouter against the OpenRouter fake: in-process over ASGI, plus one real subprocess server."""

from __future__ import annotations

import json
import os
import pickle
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import numpy as np
import pytest
from pydantic import SecretStr

from cluster.cloud.faults import parse_retry_after
from cluster.cloud.openrouter import OpenRouterClient
from cluster.errors import (
    AuthFailed,
    MalformedResponse,
    MissingPin,
    PaymentRequired,
    RateLimited,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnavailable,
    WidthMismatch,
)
from samespace.head import free_port
from tests.support.fakes.openrouter_fake import (
    FakeConfig,
    FakeState,
    KeyConfig,
    UpstreamBehaviour,
    build_fake_app,
    encode,
)
from tests.support.fakes.openrouter_server import FakeOpenRouterServer

CANARY = "sk-or-v1-canary0000000000000000000000000000"
OTHER_KEY = "sk-or-v1-other00000000000000000000000000000"
MODEL = "sentence-transformers/all-minilm-l6-v2"
PIN = "fake-same"
WIDTH = 384
PROVIDER = "testhost-OR-CodeEmbedding"
TEXTS = ["def add(a, b):\n    return a + b", "# Heading", "ls -la /tmp"]


class RecordingTransport(httpx.AsyncBaseTransport):
    """ASGI transport over the fake that keeps every request it carried."""

    def __init__(self, state: FakeState) -> None:
        self.inner = httpx.ASGITransport(app=build_fake_app(state))
        self.requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return await self.inner.handle_async_request(request)


def fake(**upstreams: UpstreamBehaviour) -> FakeState:
    keys = {CANARY: KeyConfig(label="canary"), OTHER_KEY: KeyConfig(label="other")}
    return FakeState(config=FakeConfig(keys=keys, upstreams=dict(upstreams)))


def client_for(
    state: FakeState, *, key: str | None = CANARY, timeout_s: float = 10.0
) -> tuple[OpenRouterClient, RecordingTransport]:
    transport = RecordingTransport(state)
    client = OpenRouterClient(
        provider_name=PROVIDER,
        key=SecretStr(key) if key is not None else None,
        base_url="http://fake.test/api/v1",
        timeout_s=timeout_s,
        transport=transport,
    )
    return client, transport


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


# -- embeddings --------------------------------------------------------------------------------


@pytest.mark.slow  # loads the packaged model
async def test_embed_sends_the_pin_with_fallbacks_disabled_and_returns_the_local_models_vectors() -> None:
    state = fake(**{PIN: UpstreamBehaviour(vectors="same")})
    client, transport = client_for(state)
    async with client:
        vectors = await client.embed(MODEL, PIN, TEXTS, WIDTH)
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), WIDTH)
    assert cosines(vectors, encode(TEXTS)).min() > 0.9999
    (request,) = transport.requests
    body = json.loads(request.content)
    assert body["provider"] == {"order": [PIN], "only": [PIN], "allow_fallbacks": False}
    assert body["encoding_format"] == "float" and body["input"] == TEXTS
    assert request.headers["X-OpenRouter-Title"] == "samespace" and "HTTP-Referer" in request.headers
    assert state.stats().total("ok", key="canary", upstream=PIN, path="/embeddings") == 1


async def test_an_embedding_call_without_a_pin_raises_missing_pin_and_sends_nothing() -> None:
    state = fake()
    client, transport = client_for(state)
    async with client:
        with pytest.raises(MissingPin) as info:
            await client.embed(MODEL, None, TEXTS, WIDTH)
    assert info.value.provider == PROVIDER
    assert transport.requests == [] and state.stats().total_requests == 0


async def test_the_fake_refuses_an_embeddings_request_that_allows_fallbacks() -> None:
    state = fake()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=build_fake_app(state)), base_url="http://f") as http:
        headers = {"Authorization": f"Bearer {CANARY}"}
        body = {"model": MODEL, "input": ["x"], "provider": {"order": [PIN]}}
        response = await http.post("/api/v1/embeddings", json=body, headers=headers)
    assert response.status_code == 400
    assert "allow_fallbacks" in response.json()["error"]["message"]


async def test_a_client_without_a_key_raises_auth_failed_and_sends_nothing() -> None:
    state = fake()
    client, transport = client_for(state, key=None)
    async with client:
        calls = [
            client.embed(MODEL, PIN, TEXTS, WIDTH),
            client.rerank(MODEL, "q", ["d"]),
            client.chat(MODEL, [{"role": "user", "content": "hi"}]),
            client.key_info(),
            client.credits(),
            client.model_context_length(MODEL),
        ]
        for call in calls:
            with pytest.raises(AuthFailed, match="no key"):
                await call
    assert transport.requests == [] and state.stats().total_requests == 0


async def test_a_wrong_key_raises_auth_failed() -> None:
    client, _ = client_for(fake(), key="sk-or-v1-not-registered")
    async with client:
        with pytest.raises(AuthFailed) as info:
            await client.embed(MODEL, PIN, TEXTS, WIDTH)
    assert info.value.status == 401 and "User not found" in info.value.detail


async def test_a_429_with_retry_after_raises_rate_limited_with_the_delay() -> None:
    client, _ = client_for(fake(**{PIN: UpstreamBehaviour(fail_429_every=1, retry_after_s=7)}))
    async with client:
        with pytest.raises(RateLimited) as info:
            await client.embed(MODEL, PIN, TEXTS, WIDTH)
    assert info.value.status == 429 and info.value.retry_after_s == 7.0


async def test_an_http_date_retry_after_is_parsed_into_seconds() -> None:
    behaviour = UpstreamBehaviour(fail_429_every=1, retry_after_s=30, retry_after_format="http-date")
    client, _ = client_for(fake(**{PIN: behaviour}))
    async with client:
        with pytest.raises(RateLimited) as info:
            await client.embed(MODEL, PIN, TEXTS, WIDTH)
    assert info.value.retry_after_s is not None and 25 <= info.value.retry_after_s <= 31
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_retry_after(format_datetime(now + timedelta(seconds=90), usegmt=True), now=now) == 90.0
    assert parse_retry_after(format_datetime(now - timedelta(seconds=5), usegmt=True), now=now) == 0.0
    assert parse_retry_after("2.5") == 2.5 and parse_retry_after("soon") is None and parse_retry_after(None) is None


async def test_a_402_for_credits_raises_payment_required() -> None:
    state = FakeState(config=FakeConfig(keys={CANARY: KeyConfig(credits=1.0, usage=1.0)}))
    client, _ = client_for(state)
    async with client:
        with pytest.raises(PaymentRequired) as info:
            await client.chat(MODEL, [{"role": "user", "content": "hi"}])
    assert info.value.status == 402 and not isinstance(info.value, RateLimited)


async def test_a_402_for_the_in_flight_budget_with_retry_after_raises_rate_limited() -> None:
    state = FakeState(config=FakeConfig(keys={CANARY: KeyConfig(in_flight_budget=0, in_flight_retry_after_s=3)}))
    client, _ = client_for(state)
    async with client:
        with pytest.raises(RateLimited) as info:
            await client.embed(MODEL, PIN, TEXTS, WIDTH)
    assert info.value.status == 402 and info.value.retry_after_s == 3.0
    assert "in_flight_budget_exhausted" in info.value.detail


@pytest.mark.parametrize("status", [500, 503, 529])
async def test_a_5xx_or_529_raises_upstream_unavailable(status: int) -> None:
    client, _ = client_for(fake(**{PIN: UpstreamBehaviour(fail_5xx_count=1, fail_5xx_status=status)}))
    async with client:
        with pytest.raises(UpstreamUnavailable) as info:
            await client.embed(MODEL, PIN, TEXTS, WIDTH)
        assert info.value.status == status
        assert (await client.embed(MODEL, PIN, TEXTS, WIDTH)).shape == (len(TEXTS), WIDTH)  # only the first failed


@pytest.mark.parametrize("mode", ["invalid-json", "wrong-shape", "missing-row"])
async def test_a_body_that_is_not_the_expected_json_raises_malformed_response(mode: str) -> None:
    client, _ = client_for(fake(**{PIN: UpstreamBehaviour(malformed=mode)}))  # type: ignore[arg-type]
    async with client:
        with pytest.raises(MalformedResponse):
            await client.embed(MODEL, PIN, TEXTS, WIDTH)


async def test_a_wrong_width_raises_width_mismatch() -> None:
    client, _ = client_for(fake(**{PIN: UpstreamBehaviour(vectors="wrong-width")}))
    async with client:
        with pytest.raises(WidthMismatch) as info:
            await client.embed(MODEL, PIN, TEXTS, WIDTH)
    assert (info.value.expected, info.value.got) == (WIDTH, WIDTH + 1)


async def test_other_model_vectors_are_far_from_the_local_space_and_perturbed_ones_near() -> None:
    state = fake(
        other=UpstreamBehaviour(vectors="other-model"), noisy=UpstreamBehaviour(vectors="perturbed", sigma=0.002)
    )
    client, _ = client_for(state)
    local = encode(TEXTS)
    async with client:
        other = await client.embed(MODEL, "other", TEXTS, WIDTH)
        noisy = await client.embed(MODEL, "noisy", TEXTS, WIDTH)
        again = await client.embed(MODEL, "noisy", TEXTS, WIDTH)
    assert cosines(other, local).max() < 0.5
    assert 0.99 < cosines(noisy, local).min() < 0.9999
    np.testing.assert_array_equal(noisy, again)  # deterministic per text


async def test_an_answer_slower_than_the_timeout_raises_upstream_timeout() -> None:
    client, _ = client_for(fake(**{PIN: UpstreamBehaviour(latency_s=2.0)}), timeout_s=0.2)
    async with client:
        with pytest.raises(UpstreamTimeout):
            await client.embed(MODEL, PIN, TEXTS, WIDTH)


async def test_a_refused_connection_raises_upstream_unavailable() -> None:
    base_url = f"http://127.0.0.1:{free_port()}/api/v1"
    async with OpenRouterClient(
        provider_name=PROVIDER, key=SecretStr(CANARY), base_url=base_url, timeout_s=2.0
    ) as client:
        with pytest.raises(UpstreamUnavailable):
            await client.key_info()


async def test_the_rpm_limit_is_key_wide_across_two_clients() -> None:
    state = FakeState(config=FakeConfig(keys={CANARY: KeyConfig(label="shared", rpm_limit=3)}))
    first, _ = client_for(state)
    second, _ = client_for(state)
    hello = [{"role": "user", "content": "hi"}]
    async with first, second:
        await first.chat("m/a", hello)
        await first.chat("m/b", hello)
        await second.chat("m/a", hello)
        with pytest.raises(RateLimited) as info:
            await second.chat("m/c", hello)
    assert info.value.status == 429 and info.value.retry_after_s is not None and 55 <= info.value.retry_after_s <= 60
    stats = state.stats()
    assert stats.total("ok", key="shared") == 3 and stats.total("rate_limited", key="shared") == 1


# -- rerank, chat, key, credits, models --------------------------------------------------------


async def test_rerank_puts_the_relevant_document_first() -> None:
    client, _ = client_for(fake())
    docs = [
        "The cat sat on the mat.",
        "def parse_config(path): return yaml.safe_load(open(path))",
        "Paris is in France.",
    ]
    async with client:
        ranked = await client.rerank("qwen/qwen3-reranker-8b", "function that loads a YAML config file", docs, top_n=2)
    assert ranked[0][0] == 1 and len(ranked) == 2
    assert ranked[0][1] >= ranked[1][1]


async def test_chat_returns_a_tool_call_and_then_answers_the_tool_result() -> None:
    tools = [{"type": "function", "function": {"name": "read_code", "parameters": {"type": "object"}}}]
    messages: list[dict[str, object]] = [{"role": "user", "content": 'look: CALL:read_code:{"path": "a.py"}'}]
    client, _ = client_for(fake())
    async with client:
        first = await client.chat("m/x", messages, tools=tools)
        (call,) = first.tool_calls
        assert first.finish_reason == "tool_calls" and call.name == "read_code"
        assert json.loads(call.arguments) == {"path": "a.py"}
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
                ],
            },
            {"role": "tool", "tool_call_id": call.id, "content": "print('a')"},
        ]
        second = await client.chat("m/x", messages, tools=tools, max_tokens=50)
    assert second.tool_calls == [] and second.finish_reason == "stop" and "print('a')" in (second.content or "")
    assert second.usage is not None and second.usage.total_tokens > 0


async def test_key_info_credits_and_context_length_parse() -> None:
    state = FakeState(config=FakeConfig(keys={CANARY: KeyConfig(label="mine", credits=25.0, usage=5.0, limit=10.0)}))
    client, _ = client_for(state)
    async with client:
        info = await client.key_info()
        credits = await client.credits()
        length = await client.model_context_length("qwen/qwen3-embedding-4b")
        with pytest.raises(UpstreamError) as missing:
            await client.model_context_length("nobody/nothing")
    assert (info.label, info.limit, info.limit_remaining, info.usage, info.is_free_tier) == (
        "mine",
        10.0,
        5.0,
        5.0,
        False,
    )
    assert info.rate_limit is not None  # parsed, though deprecated upstream
    assert (credits.total_credits, credits.total_usage, credits.remaining) == (25.0, 5.0, 20.0)
    assert length == 32768 and missing.value.status == 404


# -- the key never leaks -----------------------------------------------------------------------


def _echo_the_auth_header(request: httpx.Request) -> httpx.Response:
    """A hostile upstream that repeats our Authorization header in its error text."""
    message = f"bad request from {request.headers['Authorization']}"
    return httpx.Response(400, json={"error": {"code": 400, "message": message}})


async def test_the_key_never_appears_in_reprs_errors_or_pickles() -> None:
    errors: list[BaseException] = []
    behaviours = {
        "r429": UpstreamBehaviour(fail_429_every=1),
        "r5xx": UpstreamBehaviour(fail_5xx_count=1),
        "bad": UpstreamBehaviour(malformed="invalid-json"),
        "wide": UpstreamBehaviour(vectors="wrong-width"),
        "slow": UpstreamBehaviour(latency_s=1.0),
    }
    client, _ = client_for(fake(**behaviours), timeout_s=0.2)
    hostile = OpenRouterClient(
        provider_name=PROVIDER, key=SecretStr(CANARY), transport=httpx.MockTransport(_echo_the_auth_header)
    )
    async with client, hostile:
        for upstream in [*behaviours, None]:
            try:
                await client.embed(MODEL, upstream, TEXTS, WIDTH)
            except (UpstreamError, WidthMismatch) as exc:
                errors.append(exc)
        try:
            await hostile.chat(MODEL, [{"role": "user", "content": "hi"}])
        except UpstreamError as exc:
            errors.append(exc)
        assert CANARY not in repr(client) and CANARY not in repr(hostile)
    assert len(errors) == len(behaviours) + 2
    for exc in errors:
        assert CANARY not in str(exc) and CANARY not in repr(exc)
        blob = pickle.dumps(exc)
        assert CANARY.encode() not in blob
        assert str(pickle.loads(blob)) == str(exc)
    assert "********" in str(errors[-1])


# -- the fake as a real server -----------------------------------------------------------------


@pytest.mark.slow  # the fake's own process loads the packaged model to embed
async def test_the_fake_server_runs_as_a_subprocess_and_answers_the_client_over_http() -> None:
    config = FakeConfig(keys={CANARY: KeyConfig(label="canary")}, upstreams={PIN: UpstreamBehaviour()})
    with FakeOpenRouterServer(config=config) as server:
        pid = server.pid
        assert pid is not None
        server.reset()
        async with OpenRouterClient(provider_name=PROVIDER, key=SecretStr(CANARY), base_url=server.base_url) as client:
            vectors = await client.embed(MODEL, PIN, TEXTS, WIDTH)
        assert cosines(vectors, encode(TEXTS)).min() > 0.9999
        stats = server.stats()
        assert stats.total("ok", key="canary", upstream=PIN, path="/embeddings") == 1
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
