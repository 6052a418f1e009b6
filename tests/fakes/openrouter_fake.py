"""An OpenRouter-compatible fake: the same API under /api/v1, scripted upstream faults, a control plane.

Embeddings come from the real packaged MiniLM, so "same" vectors are exactly the local model's.
Every upstream slug gets an `UpstreamBehaviour` (vectors, latency, 429s, 5xx, malformed bodies);
every key gets a `KeyConfig` (a key-wide sliding 60 s RPM window, credits, an in-flight budget).
The fake enforces DESIGN §6 itself: an embeddings request without exactly one pinned upstream and
`allow_fallbacks: false` is answered 400.

Control plane (for driving it from another process):
    POST /_fake/config  body: FakeConfig JSON — replaces the configuration (counters kept; chat-rule counts
                        and the chat log start over)
    GET  /_fake/stats   → FakeStats JSON
    POST /_fake/reset   clears counters, RPM windows, fault and chat-rule counters, the chat log (configuration kept)
    GET  /_fake/chat_log → every chat request body (the last 500), oldest first
    GET  /_fake/health  → {"ok": true}

Chat answers follow `FakeConfig.chat_rules` (see scripted_chat) when one matches; otherwise a tool
call for `CALL:<tool>:<json>` in the last user message, else an echo.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import math
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import TYPE_CHECKING, Any, Literal

import anyio.to_thread
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .scripted_chat import (
    ChatRule,
    MalformedResponse,
    RequestLog,
    ScriptRunner,
    chat_log_endpoint,
    completion_envelope,
    config_endpoint,
    log_json_body,
    message_text,
    scripted_response,
)

if TYPE_CHECKING:
    from cluster.local.encoder import LocalEncoder

Clock = Callable[[], float]

API_PREFIX = "/api/v1"
LOCAL_WIDTH = 384  # all-MiniLM-L6-v2
RPM_WINDOW_S = 60.0
RECEIVED_BODIES = 20_000  # request bodies kept for `seen` (leak checks: did a canary reach the cloud?)
INFERENCE_PATHS = ("/embeddings", "/rerank", "/chat/completions")  # what the RPM window counts
PIN_RULE = "embeddings must pin exactly one upstream (provider.order/only) with allow_fallbacks false (DESIGN §6)"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------------------------------------
# Configuration


class KeyConfig(_Strict):
    """One API key the fake accepts."""

    label: str | None = Field(default=None, description="Name in /key and in stats; default key-<sha256[:8]>.")
    rpm_limit: int | None = Field(default=None, ge=1, description="Key-wide requests/min; None → FakeConfig.rpm.")
    credits: float = Field(default=100.0, description="total_credits; usage >= credits → 402.")
    usage: float = Field(
        default=0.0,
        ge=0,
        description="Spent so far (grows by each response's usage.cost + FakeConfig.cost_per_request).",
    )
    limit: float | None = Field(default=None, description="The key's own spending cap (/key `limit`).")
    is_free_tier: bool = False
    management: bool = Field(default=True, description="May read /credits (OpenRouter: management keys only).")
    in_flight_budget: int | None = Field(
        default=None, ge=0, description="Max concurrent inference requests; beyond → 402 in_flight_budget_exhausted."
    )
    in_flight_retry_after_s: float = Field(default=1.0, ge=0)


VectorMode = Literal["same", "perturbed", "other-model", "wrong-width", "probe-exact"]
RetryAfterFormat = Literal["seconds", "http-date", "none"]
MalformedMode = Literal["invalid-json", "wrong-shape", "missing-row"]


class UpstreamBehaviour(_Strict):
    """How one upstream provider slug behaves. Faults are checked after latency, in field order."""

    vectors: VectorMode = Field(
        default="same",
        description="same | perturbed | other-model | wrong-width | probe-exact (the gate's probe texts "
        "same, every other text other-model: an upstream gaming a gate that checks only those).",
    )
    sigma: float = Field(
        default=0.005, ge=0, description="perturbed: per-component noise; cosine ≈ 1/sqrt(1 + sigma²·width)."
    )
    wrong_width: int | None = Field(default=None, ge=1, description="wrong-width: returned width (default width+1).")
    latency_s: float = Field(default=0.0, ge=0, description="Sleep before answering (faults included).")
    fail_429_every: int | None = Field(default=None, ge=1, description="Every Nth request to this upstream → 429.")
    fail_rate_429: float = Field(default=0.0, ge=0, le=1, description="Probability of a 429.")
    retry_after_s: float | None = Field(default=1.0, ge=0, description="Retry-After on scripted 429s.")
    retry_after_format: RetryAfterFormat = "seconds"
    fail_5xx_count: int = Field(default=0, ge=0, description="The first N requests to this upstream → fail_5xx_status.")
    fail_5xx_rate: float = Field(default=0.0, ge=0, le=1, description="Probability of a fail_5xx_status.")
    fail_5xx_status: int = Field(default=503, ge=500, le=599)
    malformed: MalformedMode | None = Field(default=None, description="Answer 200 with a broken body.")
    seed: int | None = Field(default=None, description="Seeds noise and fault draws; None → FakeConfig.seed.")


class ModelEntry(_Strict):
    id: str
    name: str | None = None
    context_length: int
    max_completion_tokens: int | None = None
    output_modalities: list[str] = Field(default_factory=lambda: ["text"])
    # Credits per token, listed in GET /models as decimal strings and charged as usage.cost.
    prompt_price: float = Field(default=1e-8, ge=0)
    completion_price: float = Field(default=0.0, ge=0)


DEFAULT_MODELS = (
    ModelEntry(id="sentence-transformers/all-minilm-l6-v2", context_length=512, output_modalities=["embeddings"]),
    ModelEntry(id="qwen/qwen3-embedding-4b", context_length=32768, output_modalities=["embeddings"]),
    ModelEntry(id="qwen/qwen3-reranker-8b", context_length=32768),
    ModelEntry(id="deepseek/deepseek-v4-flash", context_length=131072, max_completion_tokens=8192),
    ModelEntry(id="poolside/laguna-s-2.1", context_length=262144, max_completion_tokens=16384),
)


class FakeConfig(_Strict):
    """Everything the control plane can set. POST /_fake/config replaces it whole."""

    keys: dict[str, KeyConfig] = Field(default_factory=dict, description="Accepted keys → their config.")
    upstreams: dict[str, UpstreamBehaviour] = Field(default_factory=dict, description="Upstream slug → behaviour.")
    default_behaviour: UpstreamBehaviour = Field(
        default_factory=UpstreamBehaviour, description="For unlisted upstreams and unpinned rerank/chat."
    )
    strict_upstreams: bool = Field(default=False, description="An unlisted pinned upstream → 404 (no endpoint).")
    rpm: int | None = Field(default=None, ge=1, description="Key-wide RPM for keys without their own rpm_limit.")
    rpm_window_s: float = Field(
        default=RPM_WINDOW_S, gt=0, description="Length of the rate window (60 s; benchmarks compress time)."
    )
    cost_per_request: float = Field(default=0.0, ge=0, description="Added to a key's usage per successful call.")
    report_cost: bool = Field(
        default=True,
        description="usage.cost (credits: tokens × the model's price) in every inference response, as "
        "OpenRouter sends it; False → usage without cost, as an OpenAI-compatible server.",
    )
    width: int = Field(default=LOCAL_WIDTH, ge=1, description="Width of the local model's vectors.")
    seed: int | None = Field(default=0, description="Default seed; None → nondeterministic fault draws.")
    models: list[ModelEntry] = Field(default_factory=lambda: list(DEFAULT_MODELS))
    chat_rules: list[ChatRule] = Field(
        default_factory=list, description="Scripted chat answers, tried in order before the CALL:/echo default."
    )


# ---------------------------------------------------------------------------------------------
# Stats


class CounterRow(BaseModel):
    key: str
    model: str | None
    upstream: str | None
    path: str
    requests: int = 0
    ok: int = 0
    rate_limited: int = 0
    errors: int = 0


class FakeStats(BaseModel):
    counters: list[CounterRow] = Field(default_factory=list)
    max_in_flight: dict[str, int] = Field(default_factory=dict, description="Per key label.")
    in_flight: dict[str, int] = Field(default_factory=dict)
    unauthorized: int = 0
    total_requests: int = Field(default=0, description="Every /api/v1 hit, authorised or not.")

    def total(
        self,
        counter: Literal["requests", "ok", "rate_limited", "errors"] = "requests",
        *,
        key: str | None = None,
        model: str | None = None,
        upstream: str | None = None,
        path: str | None = None,
    ) -> int:
        """Sum one counter over the rows matching every filter given (key = label)."""
        rows = self.counters
        return sum(
            getattr(r, counter)
            for r in rows
            if (key is None or r.key == key)
            and (model is None or r.model == model)
            and (upstream is None or r.upstream == upstream)
            and (path is None or r.path == path)
        )


# ---------------------------------------------------------------------------------------------
# State


@functools.cache
def _shared_encoder() -> LocalEncoder:
    """The packaged MiniLM, loaded once per process on first use."""
    from cluster.local.encoder import LocalEncoder
    from cluster.settings import EmbeddingSettings

    return LocalEncoder(EmbeddingSettings(), device="cpu")


_ENCODE_LOCK = threading.Lock()


def _encode(texts: list[str]) -> np.ndarray:
    with _ENCODE_LOCK:
        return _shared_encoder().encode(texts)


def _seed_for(*parts: object) -> int:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little")


@functools.cache
def _rotation(width: int, seed: int) -> np.ndarray:
    """A fixed random orthogonal matrix: the 'other-model' space (same geometry, other coordinates)."""
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.standard_normal((width, width)))
    return (q * np.sign(np.diag(r))).astype(np.float32)


@dataclass
class _UpstreamRuntime:
    requests: int = 0
    rng: random.Random = field(default_factory=random.Random)


@dataclass
class FakeState:
    """Configuration plus everything the fake counts. Pass one to build_fake_app to inspect it in-process."""

    config: FakeConfig = field(default_factory=FakeConfig)
    clock: Clock = time.monotonic
    counters: dict[tuple[str, str | None, str | None, str], CounterRow] = field(default_factory=dict)
    windows: dict[str, deque[float]] = field(default_factory=dict)
    in_flight: dict[str, int] = field(default_factory=dict)
    max_in_flight: dict[str, int] = field(default_factory=dict)
    upstream_runtime: dict[str, _UpstreamRuntime] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)
    unauthorized: int = 0
    total_requests: int = 0
    arrivals: deque[tuple[float, str, int]] = field(default_factory=lambda: deque(maxlen=100_000))
    chat_log: RequestLog = field(default_factory=RequestLog)
    script: ScriptRunner = field(default_factory=ScriptRunner)
    received: deque[bytes] = field(default_factory=lambda: deque(maxlen=RECEIVED_BODIES))
    _ids: int = 0

    def configure(self, config: FakeConfig) -> None:
        self.config = config
        self.upstream_runtime.clear()
        self.script.configure(config.chat_rules)
        self.chat_log.clear()

    def match_chat_rule(self, body: dict[str, Any]) -> ChatRule | None:
        """The first chat rule that applies to `body` (counted), following `config.chat_rules`."""
        self.script.follow(self.config.chat_rules)  # also when config was assigned without configure()
        return self.script.match(body)

    def seen(self, needles: list[str]) -> list[str]:
        """The needles that occur in any request body received (the last RECEIVED_BODIES bodies)."""
        encoded = [(needle, needle.encode("utf-8")) for needle in needles]
        return [needle for needle, raw in encoded if any(raw in body for body in self.received)]

    def reset(self) -> None:
        self.received.clear()
        self.chat_log.clear()
        self.script.reset_counts()
        self.arrivals.clear()
        self.counters.clear()
        self.windows.clear()
        self.in_flight.clear()
        self.max_in_flight.clear()
        self.upstream_runtime.clear()
        self.usage.clear()
        self.unauthorized = 0
        self.total_requests = 0

    def stats(self) -> FakeStats:
        return FakeStats(
            counters=[row.model_copy() for row in self.counters.values()],
            max_in_flight=dict(self.max_in_flight),
            in_flight=dict(self.in_flight),
            unauthorized=self.unauthorized,
            total_requests=self.total_requests,
        )

    # -- helpers used by the routes --

    def label(self, key: str) -> str:
        cfg = self.config.keys[key]
        return cfg.label or f"key-{hashlib.sha256(key.encode()).hexdigest()[:8]}"

    def row(self, label: str, model: str | None, upstream: str | None, path: str) -> CounterRow:
        ident = (label, model, upstream, path)
        if ident not in self.counters:
            self.counters[ident] = CounterRow(key=label, model=model, upstream=upstream, path=path)
        return self.counters[ident]

    def behaviour(self, upstream: str | None) -> UpstreamBehaviour:
        if upstream is not None and upstream in self.config.upstreams:
            return self.config.upstreams[upstream]
        return self.config.default_behaviour

    def runtime(self, upstream: str | None, behaviour: UpstreamBehaviour) -> _UpstreamRuntime:
        name = upstream or ""
        if name not in self.upstream_runtime:
            seed = behaviour.seed if behaviour.seed is not None else self.config.seed
            rng = random.Random(_seed_for("faults", seed, name)) if seed is not None else random.Random()
            self.upstream_runtime[name] = _UpstreamRuntime(rng=rng)
        return self.upstream_runtime[name]

    def next_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}-{self._ids:06d}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------------------------------------
# Wire helpers


def error_response(
    status: int, message: str, *, metadata: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """OpenRouter's error body: {"error": {"code", "message", "metadata"?}}."""
    error: dict[str, Any] = {"code": status, "message": message}
    if metadata:
        error["metadata"] = metadata
    return JSONResponse({"error": error}, status_code=status, headers=headers)


def _retry_after_header(seconds: float | None, fmt: RetryAfterFormat) -> dict[str, str]:
    if seconds is None or fmt == "none":
        return {}
    if fmt == "http-date":
        return {"Retry-After": formatdate(time.time() + math.ceil(seconds), usegmt=True)}
    return {"Retry-After": f"{seconds:g}"}


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")


class _ProviderPrefs(_Lenient):
    order: list[str] | None = None
    only: list[str] | None = None
    allow_fallbacks: bool | None = None


class _EmbeddingsRequest(_Lenient):
    model: str
    input: str | list[str]
    encoding_format: Literal["float"] = "float"
    provider: _ProviderPrefs | None = None


class _RerankDoc(_Lenient):
    text: str


class _RerankRequest(_Lenient):
    model: str
    query: str
    documents: list[str | _RerankDoc]
    top_n: int | None = Field(default=None, ge=1)
    provider: _ProviderPrefs | None = None


class _ChatRequest(_Lenient):
    model: str
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    max_tokens: int | None = Field(default=None, ge=1)
    provider: _ProviderPrefs | None = None


def _pinned_upstream(prefs: _ProviderPrefs | None) -> str | None:
    """The one upstream named by order/only, or None when the routing object does not pin exactly one."""
    if prefs is None:
        return None
    named = {tuple(prefs.order or ()), tuple(prefs.only or ())} - {()}
    if len(named) != 1:
        return None
    (slugs,) = named
    return slugs[0] if len(slugs) == 1 else None


def _loose_upstream(prefs: _ProviderPrefs | None) -> str | None:
    """For rerank/chat (no pin required): the first upstream named, if any."""
    if prefs is None:
        return None
    return (prefs.only or prefs.order or [None])[0]


def _find_tool_call(text: str, tool_names: set[str]) -> tuple[str, str] | None:
    """`CALL:<toolname>:<json>` anywhere in `text` → (name, the JSON text)."""
    start = text.find("CALL:")
    while start != -1:
        rest = text[start + len("CALL:") :]
        name, sep, tail = rest.partition(":")
        if sep and name in tool_names:
            try:
                value, end = json.JSONDecoder().raw_decode(tail.lstrip())
            except json.JSONDecodeError:
                value, end = None, 0
            if end:
                return name, json.dumps(value)
        start = text.find("CALL:", start + 1)
    return None


# ---------------------------------------------------------------------------------------------
# The app


def _decimal(price: float) -> str:
    """A price as OpenRouter lists it: a plain decimal string ('0.00000001'), never exponent notation."""
    return f"{price:.12f}".rstrip("0").rstrip(".") or "0"


def _priced(response: Response, model: str | None, config: FakeConfig) -> tuple[Response, float]:
    """The response with `usage.cost` added as OpenRouter reports it (credits: prompt tokens × prompt
    price + completion tokens × completion price of the requested model), and that cost."""
    if not isinstance(response, JSONResponse) or response.status_code >= 400:
        return response, 0.0
    payload = json.loads(bytes(response.body))
    usage = payload.get("usage") if isinstance(payload, dict) else None
    if not isinstance(usage, dict):
        return response, 0.0
    entry = next((m for m in config.models if m.id == model), None)
    prompt_price = entry.prompt_price if entry is not None else ModelEntry.model_fields["prompt_price"].default
    completion_price = entry.completion_price if entry is not None else 0.0
    completion = int(usage.get("completion_tokens", 0))
    prompt = int(usage.get("prompt_tokens", usage.get("total_tokens", 0) - completion))
    cost = prompt * prompt_price + completion * completion_price
    if not config.report_cost:
        return response, cost
    usage["cost"] = cost
    usage["cost_details"] = {"upstream_inference_cost": None}
    headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length", "content-type")}
    return JSONResponse(payload, status_code=response.status_code, headers=headers), cost


def _model_card(entry: ModelEntry) -> dict[str, Any]:
    """One `GET /models` entry, shaped as upstream's."""
    return {
        "id": entry.id,
        "canonical_slug": entry.id,
        "name": entry.name or entry.id,
        "created": 1_700_000_000,
        "description": "fake model",
        "context_length": entry.context_length,
        "architecture": {
            "modality": "text->" + entry.output_modalities[0],
            "input_modalities": ["text"],
            "output_modalities": entry.output_modalities,
            "tokenizer": "Other",
            "instruct_type": None,
        },
        "pricing": {"prompt": _decimal(entry.prompt_price), "completion": _decimal(entry.completion_price)},
        "top_provider": {
            "context_length": entry.context_length,
            "max_completion_tokens": entry.max_completion_tokens,
            "is_moderated": False,
        },
        "per_request_limits": None,
        "supported_parameters": ["tools", "tool_choice", "max_tokens"] if "text" in entry.output_modalities else [],
    }


def build_fake_app(state: FakeState | None = None) -> Starlette:
    """The fake as an ASGI app. Without `state` it starts with an empty FakeConfig (no keys)."""
    state = state if state is not None else FakeState()

    def authorise(request: Request) -> str | Response:
        state.total_requests += 1
        header = request.headers.get("authorization", "")
        scheme, _, key = header.partition(" ")
        if not header:
            state.unauthorized += 1
            return error_response(401, "No auth credentials found")
        if scheme.lower() != "bearer" or key not in state.config.keys:
            state.unauthorized += 1
            return error_response(401, "User not found.")
        return key

    async def read_body(request: Request, model: type[BaseModel]) -> BaseModel | Response:
        raw = await request.body()
        state.received.append(raw)
        try:
            return model.model_validate(json.loads(raw))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return error_response(400, "Invalid JSON body")
        except ValidationError as exc:
            first = exc.errors()[0]
            return error_response(400, f"Invalid request: {'.'.join(map(str, first['loc']))}: {first['msg']}")

    async def admit_and_run(
        key: str,
        path: str,
        model: str | None,
        upstream: str | None,
        work: Callable[[UpstreamBehaviour], Awaitable[Response]],
    ) -> Response:
        """Key checks (credits, RPM, in-flight), then latency and scripted faults, then `work`."""
        cfg = state.config.keys[key]
        label = state.label(key)
        row = state.row(label, model, upstream, path)
        row.requests += 1

        arrived = state.clock()

        def fail(response: Response) -> Response:
            state.arrivals.append((arrived, label, response.status_code))
            if response.status_code == 429:
                row.rate_limited += 1
            else:
                row.errors += 1
            return response

        usage = cfg.usage + state.usage.get(key, 0.0)
        if usage >= cfg.credits or (cfg.limit is not None and usage >= cfg.limit):
            source = "openrouter_credits" if usage >= cfg.credits else "openrouter_key_limit"
            return fail(error_response(402, "Insufficient credits", metadata={"limit_source": source}))

        rpm = cfg.rpm_limit or state.config.rpm
        if rpm is not None:
            now = arrived  # one clock reading: the window and the arrivals log must agree to the tick
            window = state.windows.setdefault(key, deque())
            span = state.config.rpm_window_s
            while window and window[0] <= now - span:
                window.popleft()
            if len(window) >= rpm:
                wait_s = max(1, math.ceil(window[0] + span - now))
                reset_ms = int((time.time() + wait_s) * 1000)
                headers = {
                    "Retry-After": str(wait_s),
                    "X-RateLimit-Limit": str(rpm),
                    "X-RateLimit-Remaining": "0",
                    "X-RateLimit-Reset": str(reset_ms),
                }
                metadata = {"error_type": "rate_limit_exceeded"}
                return fail(error_response(429, "Rate limit exceeded", metadata=metadata, headers=headers))
            window.append(now)
        state.arrivals.append((arrived, label, 200))

        if cfg.in_flight_budget is not None and state.in_flight.get(label, 0) >= cfg.in_flight_budget:
            metadata = {"reason": "in_flight_budget_exhausted", "limit_source": "openrouter_in_flight_budget"}
            headers = _retry_after_header(cfg.in_flight_retry_after_s, "seconds")
            return fail(error_response(402, "In-flight spending budget exhausted", metadata=metadata, headers=headers))

        if upstream is not None and state.config.strict_upstreams and upstream not in state.config.upstreams:
            return fail(error_response(404, f"No allowed providers are available for the selected model ({upstream})"))

        behaviour = state.behaviour(upstream)
        runtime = state.runtime(upstream, behaviour)
        runtime.requests += 1
        state.in_flight[label] = state.in_flight.get(label, 0) + 1
        state.max_in_flight[label] = max(state.max_in_flight.get(label, 0), state.in_flight[label])
        try:
            if behaviour.latency_s:
                await asyncio.sleep(behaviour.latency_s)
            every = behaviour.fail_429_every
            if (every is not None and runtime.requests % every == 0) or runtime.rng.random() < behaviour.fail_rate_429:
                headers = _retry_after_header(behaviour.retry_after_s, behaviour.retry_after_format)
                metadata = {"error_type": "rate_limit_exceeded", "provider_name": upstream or "fake"}
                return fail(
                    error_response(429, "Provider returned error: rate limited", metadata=metadata, headers=headers)
                )
            if runtime.requests <= behaviour.fail_5xx_count or runtime.rng.random() < behaviour.fail_5xx_rate:
                status = behaviour.fail_5xx_status
                return fail(
                    error_response(
                        status, f"Provider returned error ({status})", metadata={"provider_name": upstream or "fake"}
                    )
                )
            if behaviour.malformed == "invalid-json":
                row.errors += 1
                return Response('{"data": [', status_code=200, media_type="application/json")
            if behaviour.malformed == "wrong-shape":
                row.errors += 1
                return JSONResponse({"object": "list", "result": "not the shape you expected"})
            response, cost = _priced(await work(behaviour), model, state.config)
            if response.status_code < 400 and not isinstance(response, MalformedResponse):
                row.ok += 1
                state.usage[key] = state.usage.get(key, 0.0) + cost + state.config.cost_per_request
            else:
                row.errors += 1
            return response
        finally:
            state.in_flight[label] -= 1

    # -- API routes --

    async def embeddings(request: Request) -> Response:
        key = authorise(request)
        if isinstance(key, Response):
            return key
        body = await read_body(request, _EmbeddingsRequest)
        if isinstance(body, Response):
            state.row(state.label(key), None, None, "/embeddings").errors += 1
            return body
        assert isinstance(body, _EmbeddingsRequest)
        upstream = _pinned_upstream(body.provider)
        if upstream is None or body.provider is None or body.provider.allow_fallbacks is not False:
            row = state.row(state.label(key), body.model, upstream, "/embeddings")
            row.requests += 1
            row.errors += 1
            return error_response(400, f"fake OpenRouter: {PIN_RULE}")
        texts = [body.input] if isinstance(body.input, str) else body.input

        async def work(behaviour: UpstreamBehaviour) -> Response:
            vectors = await anyio.to_thread.run_sync(_encode, texts)
            vectors = _shape_vectors(vectors, behaviour, upstream, texts, state.config)
            rows = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
            if behaviour.malformed == "missing-row" and rows:
                rows = rows[:-1]
            tokens = sum(len(t.split()) for t in texts)
            return JSONResponse(
                {
                    "id": state.next_id("gen-emb"),
                    "object": "list",
                    "data": rows,
                    "model": body.model,
                    "provider": upstream,
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                }
            )

        return await admit_and_run(key, "/embeddings", body.model, upstream, work)

    async def rerank(request: Request) -> Response:
        key = authorise(request)
        if isinstance(key, Response):
            return key
        body = await read_body(request, _RerankRequest)
        if isinstance(body, Response):
            state.row(state.label(key), None, None, "/rerank").errors += 1
            return body
        assert isinstance(body, _RerankRequest)
        docs = [d if isinstance(d, str) else d.text for d in body.documents]
        upstream = _loose_upstream(body.provider)

        async def work(behaviour: UpstreamBehaviour) -> Response:
            vectors = await anyio.to_thread.run_sync(_encode, [body.query, *docs])
            scores = vectors[1:] @ vectors[0]
            order = sorted(range(len(docs)), key=lambda i: -float(scores[i]))[: body.top_n or len(docs)]
            results = [{"index": i, "relevance_score": float(scores[i]), "document": {"text": docs[i]}} for i in order]
            tokens = len(body.query.split()) + sum(len(d.split()) for d in docs)
            return JSONResponse(
                {
                    "id": state.next_id("gen-rerank"),
                    "model": body.model,
                    "provider": upstream or "fake",
                    "results": results,
                    "usage": {"search_units": 1, "total_tokens": tokens},
                }
            )

        return await admit_and_run(key, "/rerank", body.model, upstream, work)

    async def chat(request: Request) -> Response:
        raw = await log_json_body(request, state.chat_log)
        key = authorise(request)
        if isinstance(key, Response):
            return key
        body = await read_body(request, _ChatRequest)
        if isinstance(body, Response):
            state.row(state.label(key), None, None, "/chat/completions").errors += 1
            return body
        assert isinstance(body, _ChatRequest) and isinstance(raw, dict)
        upstream = _loose_upstream(body.provider)

        async def work(behaviour: UpstreamBehaviour) -> Response:
            completion_id = state.next_id("gen")
            rule = state.match_chat_rule(raw)
            if rule is not None:
                return await scripted_response(
                    rule, raw, completion_id, body.model, extra={"provider": upstream or "fake"}
                )
            return JSONResponse(_chat_answer(body, completion_id))

        return await admit_and_run(key, "/chat/completions", body.model, upstream, work)

    async def key_info(request: Request) -> Response:
        key = authorise(request)
        if isinstance(key, Response):
            return key
        cfg = state.config.keys[key]
        usage = cfg.usage + state.usage.get(key, 0.0)
        state.row(state.label(key), None, None, "/key").requests += 1
        state.row(state.label(key), None, None, "/key").ok += 1
        data = {
            "label": state.label(key),
            "limit": cfg.limit,
            "limit_remaining": None if cfg.limit is None else max(0.0, cfg.limit - usage),
            "limit_reset": None,
            "include_byok_in_limit": False,
            "usage": usage,
            "usage_daily": usage,
            "usage_weekly": usage,
            "usage_monthly": usage,
            "is_free_tier": cfg.is_free_tier,
            "is_management_key": cfg.management,
            "rate_limit": {"requests": -1, "interval": "10s", "note": "This field is deprecated and safe to ignore."},
            "expires_at": None,
        }
        return JSONResponse({"data": data})

    async def credits(request: Request) -> Response:
        key = authorise(request)
        if isinstance(key, Response):
            return key
        cfg = state.config.keys[key]
        row = state.row(state.label(key), None, None, "/credits")
        row.requests += 1
        if not cfg.management:
            row.errors += 1
            return error_response(403, "Only management keys can fetch credits")
        row.ok += 1
        return JSONResponse(
            {"data": {"total_credits": cfg.credits, "total_usage": cfg.usage + state.usage.get(key, 0.0)}}
        )

    async def models(request: Request) -> Response:
        state.total_requests += 1  # no auth, as upstream
        data = [_model_card(entry) for entry in state.config.models]
        return JSONResponse({"data": data})

    # -- control plane --

    async def get_arrivals(request: Request) -> Response:
        """Inference requests as they arrived: [clock time, key label, status at admission (200 = admitted)]."""
        return JSONResponse([list(row) for row in state.arrivals])

    async def get_stats(request: Request) -> Response:
        return JSONResponse(state.stats().model_dump(mode="json"))

    async def seen(request: Request) -> Response:
        """POST {"needles": [...]} → {"seen": [the needles found in any request body received]}."""
        body = json.loads(await request.body())
        return JSONResponse({"seen": state.seen([str(n) for n in body.get("needles", [])])})

    async def reset(request: Request) -> Response:
        state.reset()
        return JSONResponse({"ok": True})

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    routes = [
        Route(f"{API_PREFIX}/embeddings", embeddings, methods=["POST"]),
        Route(f"{API_PREFIX}/rerank", rerank, methods=["POST"]),
        Route(f"{API_PREFIX}/chat/completions", chat, methods=["POST"]),
        Route(f"{API_PREFIX}/key", key_info, methods=["GET"]),
        Route(f"{API_PREFIX}/credits", credits, methods=["GET"]),
        Route(f"{API_PREFIX}/models", models, methods=["GET"]),
        Route("/_fake/config", config_endpoint(FakeConfig, state.configure), methods=["POST"]),
        Route("/_fake/stats", get_stats, methods=["GET"]),
        Route("/_fake/arrivals", get_arrivals, methods=["GET"]),
        Route("/_fake/chat_log", chat_log_endpoint(state.chat_log), methods=["GET"]),
        Route("/_fake/seen", seen, methods=["POST"]),
        Route("/_fake/reset", reset, methods=["POST"]),
        Route("/_fake/health", health, methods=["GET"]),
    ]
    app = Starlette(routes=routes)
    app.state.fake = state
    return app


def _shape_vectors(
    vectors: np.ndarray, behaviour: UpstreamBehaviour, upstream: str, texts: list[str], config: FakeConfig
) -> np.ndarray:
    """The local model's vectors as this upstream would return them."""
    seed = behaviour.seed if behaviour.seed is not None else (config.seed or 0)
    if behaviour.vectors == "same":
        return vectors
    if behaviour.vectors == "perturbed":
        out = np.empty_like(vectors)
        for i, (vector, text) in enumerate(zip(vectors, texts, strict=True)):
            # Deterministic per (seed, upstream, text): the same text always gets the same vector back.
            rng = np.random.default_rng(_seed_for("noise", seed, upstream, text))
            noisy = vector + rng.normal(0.0, behaviour.sigma, size=vector.shape).astype(np.float32)
            out[i] = noisy / np.linalg.norm(noisy)
        return out
    if behaviour.vectors == "other-model":
        return vectors @ _rotation(vectors.shape[1], _seed_for("rotation", seed, upstream) % 2**32)
    if behaviour.vectors == "probe-exact":
        from cluster.gate.probe import PROBE_TEXTS

        rotated = vectors @ _rotation(vectors.shape[1], _seed_for("rotation", seed, upstream) % 2**32)
        return np.stack([v if t in PROBE_TEXTS else r for v, r, t in zip(vectors, rotated, texts, strict=True)])
    width = behaviour.wrong_width or vectors.shape[1] + 1
    out = np.zeros((vectors.shape[0], width), dtype=np.float32)
    keep = min(width, vectors.shape[1])
    out[:, :keep] = vectors[:, :keep]
    return out


def _chat_answer(body: _ChatRequest, completion_id: str) -> dict[str, Any]:
    """Deterministic: a tool call when asked for one by `CALL:<tool>:<json>`, otherwise an echo."""
    last = body.messages[-1]
    text = message_text(last)
    tool_names = {t.get("function", {}).get("name") for t in body.tools or [] if isinstance(t, dict)}
    call = (
        _find_tool_call(text, {n for n in tool_names if n})
        if last.get("role") == "user" and body.tool_choice != "none"
        else None
    )
    prompt_tokens = sum(len(message_text(m).split()) for m in body.messages)
    if call is not None:
        name, arguments = call
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{hashlib.sha256(text.encode()).hexdigest()[:12]}",
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ],
        }
        finish, completion_tokens = "tool_calls", 1
    else:
        prefix = "tool result: " if last.get("role") == "tool" else "echo: "
        words = (prefix + text).split()
        finish = "stop"
        if body.max_tokens is not None and len(words) > body.max_tokens:
            words, finish = words[: body.max_tokens], "length"
        message = {"role": "assistant", "content": " ".join(words)}
        completion_tokens = len(words)
    answer = completion_envelope(completion_id, body.model, message, finish, prompt_tokens, completion_tokens)
    answer["provider"] = "fake"
    answer["choices"][0]["native_finish_reason"] = finish
    return answer
