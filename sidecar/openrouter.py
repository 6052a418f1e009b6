"""The sidecar's OpenRouter client: pinned embeddings, rerank and key info, for its virtual containers.

One client per master (one httpx pool); the key is handed to each call, because a master may push a
different key for each of its containers. The bodies are OpenRouter's (the master's own client sends
the same): an embedding request names exactly one upstream with `allow_fallbacks: false`, or it is
never sent. Every failure leaves as `OpenRouterError` with OpenRouter's status and Retry-After, the
whitelisted keys of its error metadata and a short message, the key scrubbed from all of them; the
key itself is unwrapped only into the Authorization header of the request.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from sidecar.errors import OpenRouterError
from sidecar.wire import ERROR_METADATA_KEYS, VirtualUsage, error_metadata

__all__ = ["ATTRIBUTION_HEADERS", "EmbedAnswer", "OpenRouterClient", "RerankAnswer", "parse_retry_after"]

# OpenRouter app attribution, as the master sends it.
ATTRIBUTION_HEADERS = {"HTTP-Referer": "samespace", "X-OpenRouter-Title": "samespace", "X-Title": "samespace"}
MAX_DETAIL_CHARS = 200
REDACTED = "********"


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """`Retry-After` in seconds: delta-seconds or an HTTP-date (RFC 9110 §10.2.3); None if absent or unreadable."""
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
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def provider_pin(upstream: str) -> dict[str, Any]:
    """DESIGN §6: `order` and `only` name the one upstream, `allow_fallbacks: false` forbids any other."""
    return {"order": [upstream], "only": [upstream], "allow_fallbacks": False}


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, hide_input_in_errors=True)


class _Usage(_Lenient):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None

    def to_wire(self) -> VirtualUsage:
        prompt = self.prompt_tokens or max(0, self.total_tokens - self.completion_tokens)
        cost = self.cost if self.cost is not None and math.isfinite(self.cost) and self.cost >= 0 else None
        return VirtualUsage(
            promptTokens=max(0, prompt),
            completionTokens=max(0, self.completion_tokens),
            totalTokens=max(0, self.total_tokens, prompt + self.completion_tokens),
            cost=cost,
        )


class _EmbeddingRow(_Lenient):
    index: int
    embedding: list[float] | str


class _EmbeddingsResponse(_Lenient):
    data: list[_EmbeddingRow]
    model: str | None = None
    provider: str | None = None
    usage: _Usage | None = None


class _RerankRow(_Lenient):
    index: int
    relevance_score: float


class _RerankResponse(_Lenient):
    results: list[_RerankRow]
    model: str | None = None
    usage: _Usage | None = None


class EmbedAnswer(_Lenient):
    rows: list[list[float] | str]  # in input order
    model: str
    usage: VirtualUsage


class RerankAnswer(_Lenient):
    results: list[tuple[int, float]]  # (document index, relevance score), best first
    model: str
    usage: VirtualUsage


class _ShapeFault(Exception):
    """A 2xx body that is not the expected shape."""


class OpenRouterClient:
    """One master's pool to OpenRouter (`base_url`, e.g. https://openrouter.ai/api/v1)."""

    def __init__(self, base_url: str, *, timeout_s: float, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout_s),
            transport=transport,
            headers=ATTRIBUTION_HEADERS,
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"OpenRouterClient(base_url={self.base_url!r})"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def embed(self, key: SecretStr, model: str, upstream: str | None, texts: list[str]) -> EmbedAnswer:
        """POST /embeddings pinned to `upstream` → the rows in input order; unpinned: refused, never sent."""
        if not upstream:
            raise OpenRouterError(f"model {model!r} has no pinned upstream; refused, never sent")
        body = {"model": model, "input": texts, "encoding_format": "float", "provider": provider_pin(upstream)}
        with _faults(key):
            parsed = _EmbeddingsResponse.model_validate(await self._send(key, "POST", "/embeddings", body))
            rows = sorted(parsed.data, key=lambda row: row.index)
            if [row.index for row in rows] != list(range(len(texts))):
                raise _ShapeFault(f"expected rows 0..{len(texts) - 1}, got {len(rows)} rows")
        usage = (parsed.usage or _Usage()).to_wire()
        return EmbedAnswer(rows=[row.embedding for row in rows], model=parsed.model or model, usage=usage)

    async def rerank(
        self, key: SecretStr, model: str, upstream: str | None, query: str, documents: list[str], top_n: int | None
    ) -> RerankAnswer:
        """POST /rerank (pinned when the container names an upstream) → (index, score) best first."""
        body: dict[str, Any] = {"model": model, "query": query, "documents": documents}
        if top_n is not None:
            body["top_n"] = top_n
        if upstream:
            body["provider"] = provider_pin(upstream)
        with _faults(key):
            parsed = _RerankResponse.model_validate(await self._send(key, "POST", "/rerank", body))
            bad = [row.index for row in parsed.results if not 0 <= row.index < len(documents)]
            if bad:
                raise _ShapeFault(f"result indices {bad[:10]} outside 0..{len(documents) - 1}")
        ranked = sorted(((row.index, row.relevance_score) for row in parsed.results), key=lambda pair: -pair[1])
        usage = (parsed.usage or _Usage()).to_wire()
        return RerankAnswer(results=ranked[:top_n] if top_n else ranked, model=parsed.model or model, usage=usage)

    async def key_info(self, key: SecretStr) -> Any:
        """GET /key → its JSON body (the key's label, limits and usage; never the key)."""
        with _faults(key):
            return await self._send(key, "GET", "/key", None)

    async def _send(self, key: SecretStr, method: str, path: str, body: dict[str, Any] | None) -> Any:
        headers = {"Authorization": f"Bearer {key.get_secret_value()}"}
        response = await self._http.request(method, path, json=body, headers=headers)
        return _read_json(response, key)


class _StatusFault(Exception):
    def __init__(
        self, status: int, detail: str, retry_after_s: float | None, metadata: dict[str, str | int | float]
    ) -> None:
        super().__init__(status)
        self.status, self.detail, self.retry_after_s, self.metadata = status, detail, retry_after_s, metadata


def _read_json(response: httpx.Response, key: SecretStr) -> Any:
    """The JSON body of a successful answer; a failure status (or OpenRouter's in-band error) raises."""
    try:
        payload = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        if response.is_success:
            raise _ShapeFault(f"HTTP {response.status_code} body is not JSON") from None
        payload = None
    error = payload.get("error") if isinstance(payload, dict) else None
    if response.is_success and not isinstance(error, dict):
        return payload
    status = response.status_code
    if response.is_success:  # a 200 with an in-band error: its code is the real status
        code = error.get("code") if isinstance(error, dict) else None
        status = int(code) if isinstance(code, int) or (isinstance(code, str) and code.isdigit()) else 502
    message = error.get("message") if isinstance(error, dict) else None
    metadata = error.get("metadata") if isinstance(error, dict) else None
    retry_after = parse_retry_after(response.headers.get("Retry-After"))
    if retry_after is None and isinstance(metadata, dict):
        hinted = metadata.get("retry_after_seconds")
        if isinstance(hinted, int | float) and not isinstance(hinted, bool) and math.isfinite(hinted):
            retry_after = max(0.0, float(hinted))
    # scrubbed before any cut, so that no cut-off piece of the key is left behind
    detail = _redact(str(message), key)[:MAX_DETAIL_CHARS] if message else response.reason_phrase or "error"
    raise _StatusFault(status, _redact(detail, key), retry_after, _kept_metadata(metadata, key))


def _kept_metadata(metadata: Any, key: SecretStr) -> dict[str, str | int | float]:
    """The wire's whitelist of an error's metadata, each string scrubbed of the key before it is cut."""
    if not isinstance(metadata, dict):
        return {}
    picked = {name: metadata[name] for name in ERROR_METADATA_KEYS if name in metadata}
    return error_metadata({name: _redact(v, key) if isinstance(v, str) else v for name, v in picked.items()})


def _redact(text: str, key: SecretStr) -> str:
    raw = key.get_secret_value()
    return text.replace(raw, REDACTED) if raw else text


@contextlib.contextmanager
def _faults(key: SecretStr) -> Iterator[None]:
    """Every failure of one call → OpenRouterError (short, key-free, with the status and Retry-After)."""
    try:
        yield
    except _StatusFault as fault:
        raise OpenRouterError(
            f"openrouter {fault.status}: {fault.detail}",
            status=fault.status,
            retry_after_s=fault.retry_after_s,
            metadata=fault.metadata,
        ) from None
    except _ShapeFault as fault:
        raise OpenRouterError(_redact(f"openrouter bad response: {fault}", key)) from None
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "(root)"
        raise OpenRouterError(f"openrouter bad response: {where}: {first['msg']}") from None
    except httpx.TimeoutException:
        raise OpenRouterError("openrouter timeout") from None
    except httpx.ConnectError:
        raise OpenRouterError("openrouter unreachable") from None
    except httpx.TransportError as exc:
        raise OpenRouterError(f"openrouter connection error ({type(exc).__name__})") from None
