"""Async OpenRouter client: pinned embeddings, rerank, chat with tools, key info, credits, models.

Transport only: no budget, no retry, no policy (those live above it). Every failure leaves as one
`UpstreamError` subclass (or `WidthMismatch`), chosen in `upstream_faults()`; the key is unwrapped
only to build the Authorization header and never appears in a repr, a message or a URL (DESIGN §8).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import math
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, Literal

import httpx
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

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
from cluster.settings import DEFAULT_CLOUD_TIMEOUT_S, OPENROUTER_BASE_URL

__all__ = [
    "ATTRIBUTION_HEADERS",
    "DEFAULT_BASE_URL",
    "DEFAULT_TIMEOUT_S",
    "ChatResult",
    "ChatUsage",
    "Credits",
    "KeyInfo",
    "OpenRouterClient",
    "ToolCall",
    "chat_request_body",
    "parse_chat_result",
    "parse_retry_after",
    "read_json",
    "provider_pin",
    "upstream_faults",
]

DEFAULT_BASE_URL = OPENROUTER_BASE_URL
DEFAULT_TIMEOUT_S = DEFAULT_CLOUD_TIMEOUT_S
MAX_DETAIL_CHARS = 300  # upstream error text kept in our messages
# OpenRouter app attribution: HTTP-Referer identifies the app, X-OpenRouter-Title names it
# (X-Title is the older spelling, still read). NOTE: no public URL yet, so the referer is the name.
ATTRIBUTION_HEADERS = {"HTTP-Referer": "samespace", "X-OpenRouter-Title": "samespace", "X-Title": "samespace"}
# 402 metadata that marks the transient in-flight spending budget (retry after Retry-After).
IN_FLIGHT_REASON = "in_flight_budget_exhausted"
IN_FLIGHT_LIMIT_SOURCE = "openrouter_in_flight_budget"
OVERLOADED_STATUSES = frozenset({529})  # "Provider Overloaded" (outside 5xx semantics, same meaning)
_REDACTED = "********"


# ---------------------------------------------------------------------------------------------
# Public result models


class _Lenient(BaseModel):
    """Upstream bodies grow fields; read what we need and ignore the rest."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class ToolCall(_Lenient):
    id: str
    name: str
    arguments: str = Field(description="The call's arguments as the model wrote them: a JSON string.")


class ChatUsage(_Lenient):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class ChatResult(_Lenient):
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: ChatUsage | None = None


class RateLimitInfo(_Lenient):
    """Deprecated by OpenRouter ("safe to ignore", -1 in new SDKs): never size concurrency from it."""

    requests: float | None = None
    interval: str | None = None


class KeyInfo(_Lenient):
    """`GET /key` → data. `limit` None means unlimited."""

    label: str | None = None
    limit: float | None = None
    limit_remaining: float | None = None
    limit_reset: str | None = None
    usage: float | None = None
    is_free_tier: bool | None = None
    rate_limit: RateLimitInfo | None = None


class Credits(_Lenient):
    """`GET /credits` → data (a management key is required upstream)."""

    total_credits: float
    total_usage: float

    @property
    def remaining(self) -> float:
        return self.total_credits - self.total_usage


# ---------------------------------------------------------------------------------------------
# Wire models (private)


class _ErrorBody(_Lenient):
    code: int | str | None = None
    message: str = ""
    metadata: dict[str, Any] | None = None


class _ErrorEnvelope(_Lenient):
    error: _ErrorBody


class _EmbeddingRow(_Lenient):
    index: int
    embedding: list[float]


class _EmbeddingsResponse(_Lenient):
    data: list[_EmbeddingRow]


class _RerankRow(_Lenient):
    index: int
    relevance_score: float


class _RerankResponse(_Lenient):
    results: list[_RerankRow]


class _WireFunction(_Lenient):
    name: str
    arguments: str = ""

    @field_validator("arguments", mode="before")
    @classmethod
    def _arguments_as_text(cls, value: Any) -> Any:
        # Some upstreams send the arguments as an object instead of a JSON string.
        if value is None:
            return ""
        if isinstance(value, dict | list):
            return json.dumps(value)
        return value


class _WireToolCall(_Lenient):
    id: str
    function: _WireFunction


class _WireMessage(_Lenient):
    content: str | None = None
    tool_calls: list[_WireToolCall] | None = None


class _WireChoice(_Lenient):
    message: _WireMessage
    finish_reason: str | None = None


class _ChatResponse(_Lenient):
    choices: list[_WireChoice] = Field(min_length=1)
    usage: ChatUsage | None = None


class _KeyResponse(_Lenient):
    data: KeyInfo


class _CreditsResponse(_Lenient):
    data: Credits


class _TopProvider(_Lenient):
    context_length: int | None = None


class _ModelEntry(_Lenient):
    id: str
    canonical_slug: str | None = None
    context_length: int | None = None
    top_provider: _TopProvider | None = None


class _ModelsResponse(_Lenient):
    data: list[_ModelEntry]


# ---------------------------------------------------------------------------------------------
# Error classification: the one place an HTTP outcome becomes an UpstreamError


class _StatusFault(Exception):
    """Internal carrier: a response whose status (or in-band error) is a failure."""

    def __init__(self, response: httpx.Response, status: int, body: _ErrorBody | None) -> None:
        super().__init__(status)
        self.response = response
        self.status = status
        self.body = body


class _ShapeFault(Exception):
    """Internal carrier: a 2xx body that is not the expected JSON shape."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """`Retry-After` as seconds: delta-seconds or an HTTP-date (RFC 9110 §10.2.3); None if absent or unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def _redact(text: str, secret: SecretStr | None) -> str:
    if secret is not None:
        raw = secret.get_secret_value()
        if raw:
            text = text.replace(raw, _REDACTED)
    return text


def _detail(where: str, body: _ErrorBody | None, fallback_text: str, secret: SecretStr | None) -> str:
    message = body.message if body is not None and body.message else fallback_text.strip()
    extras = []
    metadata = (body.metadata if body is not None else None) or {}
    for field in ("reason", "limit_source", "provider_name", "error_type"):
        value = metadata.get(field)
        if isinstance(value, str) and value:
            extras.append(f"{field}={value}")
    text = message[:MAX_DETAIL_CHARS] or "(empty body)"
    if extras:
        text = f"{text} [{', '.join(extras)}]"
    return _redact(f"{where}: {text}", secret)


def _status_error(provider: str, where: str, fault: _StatusFault, secret: SecretStr | None) -> UpstreamError:
    status, body, headers = fault.status, fault.body, fault.response.headers
    detail = _detail(where, body, "" if body is not None else _safe_text(fault.response), secret)
    metadata = (body.metadata if body is not None else None) or {}
    retry_after = parse_retry_after(headers.get("Retry-After"))
    if retry_after is None and isinstance(metadata.get("retry_after_seconds"), int | float):
        retry_after = max(0.0, float(metadata["retry_after_seconds"]))
    if status == 429:
        return RateLimited(provider, detail, 429, retry_after)
    if status == 402:
        # DESIGN §7 / OpenRouter limits: the in-flight budget is transient and carries Retry-After;
        # credits, key limits and weight_exceeds_budget are not.
        in_flight = metadata.get("reason") == IN_FLIGHT_REASON or metadata.get("limit_source") == IN_FLIGHT_LIMIT_SOURCE
        too_big = metadata.get("reason") == "weight_exceeds_budget" or metadata.get("limit_source") == "openrouter_credits"
        if in_flight or (retry_after is not None and not too_big):
            return RateLimited(provider, detail, 402, retry_after)
        return PaymentRequired(provider, detail, 402)
    if status in (401, 403):
        return AuthFailed(provider, detail, status)
    if status == 408:
        return UpstreamTimeout(provider, detail, status)
    if status >= 500 or status in OVERLOADED_STATUSES:
        return UpstreamUnavailable(provider, detail, status)
    return UpstreamError(provider, detail, status)


def _safe_text(response: httpx.Response) -> str:
    try:
        return response.text
    except (UnicodeDecodeError, httpx.ResponseNotRead):
        return ""


@contextlib.contextmanager
def upstream_faults(provider: str, where: str, *, secret: SecretStr | None = None) -> Iterator[None]:
    """Map every lower-level failure of one OpenRouter call to the most specific UpstreamError.

    `where` names the call ("POST /embeddings"); `secret` is scrubbed from any upstream text.
    """
    try:
        yield
    except _StatusFault as fault:
        raise _status_error(provider, where, fault, secret) from None
    except _ShapeFault as fault:
        raise MalformedResponse(provider, _redact(f"{where}: {fault.what}", secret)) from None
    except ValidationError as exc:
        first = exc.errors()[0] if exc.error_count() else {"loc": (), "msg": "?"}
        loc = ".".join(str(part) for part in first["loc"]) or "(root)"
        raise MalformedResponse(provider, f"{where}: unexpected shape at {loc}: {first['msg']}") from None
    except (httpx.TimeoutException, TimeoutError) as exc:
        raise UpstreamTimeout(provider, f"{where}: no answer in time ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise UpstreamUnavailable(provider, f"{where}: transport failed ({type(exc).__name__})") from exc


def _read_json(response: httpx.Response) -> Any:
    """The body of a finished response as JSON; a failure status or an in-band error raises _StatusFault."""
    try:
        payload = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        if response.is_success:
            raise _ShapeFault(f"HTTP {response.status_code} body is not JSON") from None
        raise _StatusFault(response, response.status_code, None) from None
    error_body = _error_body(payload)
    if not response.is_success:
        raise _StatusFault(response, response.status_code, error_body)
    if error_body is not None:
        # OpenRouter may answer 200 with an in-band error; its code is the real status.
        code = error_body.code
        status = int(code) if isinstance(code, int) or (isinstance(code, str) and code.isdigit()) else 502
        raise _StatusFault(response, status, error_body)
    return payload


def _error_body(payload: Any) -> _ErrorBody | None:
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        try:
            return _ErrorEnvelope.model_validate(payload).error
        except ValidationError:
            return None
    return None


def chat_request_body(
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    tool_choice: str | dict[str, Any] | None,
    max_tokens: int | None,
    temperature: float | None,
) -> dict[str, Any]:
    """An OpenAI-compatible /chat/completions body (OpenRouter and local servers read the same)."""
    body: dict[str, Any] = {"model": model, "messages": messages}
    if tools is not None:
        body["tools"] = tools
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if temperature is not None:
        body["temperature"] = temperature
    return body


def parse_chat_result(payload: Any) -> ChatResult:
    """The first choice of an OpenAI-compatible chat completion (raises ValidationError on a bad shape;
    call it inside `upstream_faults`)."""
    parsed = _ChatResponse.model_validate(payload)
    choice = parsed.choices[0]
    calls = [ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments) for c in choice.message.tool_calls or []]
    return ChatResult(content=choice.message.content, tool_calls=calls, finish_reason=choice.finish_reason, usage=parsed.usage)


def read_json(response: httpx.Response) -> Any:
    """The JSON body of a response; failures raise the carriers `upstream_faults` maps."""
    return _read_json(response)


def provider_pin(upstream: str) -> dict[str, Any]:
    """DESIGN §6: the routing object of an embedding request. `order` + `only` name the one upstream and
    `allow_fallbacks: False` forbids any other, so a missing pin fails closed upstream too."""
    return {"order": [upstream], "only": [upstream], "allow_fallbacks": False}


# ---------------------------------------------------------------------------------------------
# The client


class OpenRouterClient:
    """One key, one base URL, one httpx connection pool. Safe to share between tasks of one loop.

    provider_name: who we are (e.g. 'host-OR-CodeEmbedding'); named in every error.
    key:           the OpenRouter key; None → every call raises AuthFailed without a request.
    timeout_s:     a deadline for each whole call (connect, send, wait, read).
    transport:     replace the network (tests: httpx.ASGITransport over the fake).
    """

    def __init__(
        self,
        *,
        provider_name: str,
        key: SecretStr | None,
        base_url: str = DEFAULT_BASE_URL,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.provider_name = provider_name
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._key = key
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout_s),
            transport=transport,
            headers=ATTRIBUTION_HEADERS,
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        key = _REDACTED if self._key is not None else None
        return f"OpenRouterClient(provider_name={self.provider_name!r}, base_url={self.base_url!r}, key={key!r})"

    @property
    def has_key(self) -> bool:
        return self._key is not None

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> OpenRouterClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- calls ---------------------------------------------------------------------------------

    async def embed(self, model: str, upstream: str | None, texts: list[str], width: int) -> np.ndarray:
        """Vectors of `texts` from `model` served by exactly `upstream`: float32 (len(texts), width)."""
        where = "POST /embeddings"
        if not upstream:
            raise MissingPin(self.provider_name, f"{where}: model {model!r} has no pinned upstream; refused, never sent")
        self._require_key()
        if not texts:
            return np.empty((0, width), dtype=np.float32)
        body = {"model": model, "input": texts, "encoding_format": "float", "provider": provider_pin(upstream)}
        with upstream_faults(self.provider_name, where, secret=self._key):
            parsed = _EmbeddingsResponse.model_validate(await self._send("POST", "/embeddings", json_body=body))
            rows = sorted(parsed.data, key=lambda row: row.index)
            if [row.index for row in rows] != list(range(len(texts))):
                raise _ShapeFault(f"expected rows 0..{len(texts) - 1}, got indices {[row.index for row in rows][:10]}")
        source = f"{self.provider_name} {model}@{upstream}"
        for row in rows:
            if len(row.embedding) != width:
                raise WidthMismatch(source, width, len(row.embedding))
        vectors = np.asarray([row.embedding for row in rows], dtype=np.float32)
        if not np.isfinite(vectors).all():
            raise MalformedResponse(self.provider_name, f"{where}: non-finite values in the vectors")
        return vectors

    async def rerank(self, model: str, query: str, documents: list[str], top_n: int | None = None) -> list[tuple[int, float]]:
        """(document index, relevance score), best first."""
        where = "POST /rerank"
        self._require_key()
        if not documents:
            return []
        body: dict[str, Any] = {"model": model, "query": query, "documents": documents}
        if top_n is not None:
            body["top_n"] = top_n
        with upstream_faults(self.provider_name, where, secret=self._key):
            parsed = _RerankResponse.model_validate(await self._send("POST", "/rerank", json_body=body))
            bad = [row.index for row in parsed.results if not 0 <= row.index < len(documents)]
            if bad:
                raise _ShapeFault(f"result indices {bad[:10]} outside 0..{len(documents) - 1}")
        ranked = sorted(((row.index, row.relevance_score) for row in parsed.results), key=lambda pair: -pair[1])
        return ranked[:top_n] if top_n is not None else ranked

    async def chat(
        self,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult:
        """One chat completion. Send `tools` on every turn of a tool loop (OpenRouter requires it)."""
        where = "POST /chat/completions"
        self._require_key()
        body = chat_request_body(model, messages, tools, tool_choice, max_tokens, temperature)
        with upstream_faults(self.provider_name, where, secret=self._key):
            return parse_chat_result(await self._send("POST", "/chat/completions", json_body=body))

    async def key_info(self) -> KeyInfo:
        where = "GET /key"
        self._require_key()
        with upstream_faults(self.provider_name, where, secret=self._key):
            return _KeyResponse.model_validate(await self._send("GET", "/key")).data

    async def credits(self) -> Credits:
        where = "GET /credits"
        self._require_key()
        with upstream_faults(self.provider_name, where, secret=self._key):
            return _CreditsResponse.model_validate(await self._send("GET", "/credits")).data

    async def model_context_length(self, model: str) -> int:
        """Context length of `model` from the catalogue (all output modalities, so embedding models too)."""
        where = "GET /models"
        self._require_key()
        with upstream_faults(self.provider_name, where, secret=self._key):
            parsed = _ModelsResponse.model_validate(await self._send("GET", "/models", params={"output_modalities": "all"}))
        for entry in parsed.data:
            if model in (entry.id, entry.canonical_slug):
                length = entry.context_length or (entry.top_provider.context_length if entry.top_provider else None)
                if length:
                    return length
                raise MalformedResponse(self.provider_name, f"{where}: model {model!r} lists no context_length")
        raise UpstreamError(self.provider_name, f"{where}: model {model!r} is not in the catalogue", 404)

    # -- plumbing ------------------------------------------------------------------------------

    def _require_key(self) -> None:
        if self._key is None:
            raise AuthFailed(self.provider_name, "no key")

    def _auth_headers(self) -> dict[str, str]:
        assert self._key is not None  # _require_key ran first
        return {"Authorization": f"Bearer {self._key.get_secret_value()}"}

    async def _send(
        self,
        method: Literal["GET", "POST"],
        path: str,
        *,
        json_body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> Any:
        """One request under one deadline (httpx timeouts are per operation; this bounds the whole call)."""
        async with asyncio.timeout(self.timeout_s):
            response = await self._http.request(method, path, json=json_body, params=params, headers=self._auth_headers())
        return _read_json(response)
