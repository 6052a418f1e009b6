"""Async OpenRouter client: pinned embeddings, rerank, chat with tools, key info, credits, models.

Transport only: no budget, no retry, no policy (those live above it). The bodies are in `openai_wire.py`;
every failure leaves as one `UpstreamError` subclass (or `WidthMismatch`), chosen in
`faults.upstream_faults()`. The key is unwrapped only to build the Authorization header and never
appears in a repr, a message or a URL (DESIGN §8).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Literal

import httpx
import numpy as np
from pydantic import SecretStr

from cluster.cloud.faults import REDACTED, ShapeFault, read_json, upstream_faults
from cluster.cloud.openai_wire import (
    ChatResult,
    ChatUsage,
    Credits,
    CreditsResponse,
    EmbeddingsResponse,
    KeyInfo,
    KeyResponse,
    ModelsResponse,
    RerankResponse,
    chat_request_body,
    parse_chat_result,
    provider_pin,
)
from cluster.cloud.spend import CallUsage, ModelPrice
from cluster.errors import AuthFailed, MalformedResponse, MissingPin, UpstreamError, WidthMismatch
from cluster.settings import DEFAULT_CLOUD_TIMEOUT_S, OPENROUTER_BASE_URL

__all__ = ["ATTRIBUTION_HEADERS", "DEFAULT_BASE_URL", "DEFAULT_TIMEOUT_S", "OpenRouterClient"]

DEFAULT_BASE_URL = OPENROUTER_BASE_URL
DEFAULT_TIMEOUT_S = DEFAULT_CLOUD_TIMEOUT_S
# OpenRouter app attribution: HTTP-Referer identifies the app, X-OpenRouter-Title names it
# (X-Title is the older spelling, still read). NOTE: no public URL yet, so the referer is the name.
ATTRIBUTION_HEADERS = {"HTTP-Referer": "samespace", "X-OpenRouter-Title": "samespace", "X-Title": "samespace"}

log = logging.getLogger("samespace.openrouter")


class OpenRouterClient:
    """One key, one base URL, one httpx connection pool. Safe to share between tasks of one loop.

    provider_name: who we are (e.g. 'host-OR-CodeEmbedding'); named in every error.
    key:           the OpenRouter key; None → every call raises AuthFailed without a request.
    timeout_s:     a deadline for each whole call (connect, send, wait, read).
    transport:     replace the network (tests: httpx.ASGITransport over the fake).
    on_usage:      told the `usage` of every embeddings, rerank and chat response (its cost in
                   credits, or None where the response had none, and its tokens): spend caps.
    """

    def __init__(
        self,
        *,
        provider_name: str,
        key: SecretStr | None,
        base_url: str = DEFAULT_BASE_URL,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
        on_usage: Callable[[CallUsage], None] | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.provider_name = provider_name
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._key = key
        self._on_usage = on_usage
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout_s),
            transport=transport,
            headers=ATTRIBUTION_HEADERS,
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        key = REDACTED if self._key is not None else None
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
            refused = f"{where}: model {model!r} has no pinned upstream; refused, never sent"
            raise MissingPin(self.provider_name, refused)
        self._require_key()
        if not texts:
            return np.empty((0, width), dtype=np.float32)
        body = {"model": model, "input": texts, "encoding_format": "float", "provider": provider_pin(upstream)}
        with upstream_faults(self.provider_name, where, secret=self._key):
            parsed = EmbeddingsResponse.model_validate(await self._send("POST", "/embeddings", json_body=body))
            rows = sorted(parsed.data, key=lambda row: row.index)
            if [row.index for row in rows] != list(range(len(texts))):
                raise ShapeFault(f"expected rows 0..{len(texts) - 1}, got indices {[row.index for row in rows][:10]}")
        source = f"{self.provider_name} {model}@{upstream}"
        for row in rows:
            if len(row.embedding) != width:
                raise WidthMismatch(source, width, len(row.embedding))
        vectors = np.asarray([row.embedding for row in rows], dtype=np.float32)
        if not np.isfinite(vectors).all():
            raise MalformedResponse(self.provider_name, f"{where}: non-finite values in the vectors")
        self._report_usage(model, parsed.usage)
        return vectors

    async def rerank(
        self, model: str, query: str, documents: list[str], top_n: int | None = None
    ) -> list[tuple[int, float]]:
        """(document index, relevance score), best first."""
        where = "POST /rerank"
        self._require_key()
        if not documents:
            return []
        body: dict[str, Any] = {"model": model, "query": query, "documents": documents}
        if top_n is not None:
            body["top_n"] = top_n
        with upstream_faults(self.provider_name, where, secret=self._key):
            parsed = RerankResponse.model_validate(await self._send("POST", "/rerank", json_body=body))
            bad = [row.index for row in parsed.results if not 0 <= row.index < len(documents)]
            if bad:
                raise ShapeFault(f"result indices {bad[:10]} outside 0..{len(documents) - 1}")
        ranked = sorted(((row.index, row.relevance_score) for row in parsed.results), key=lambda pair: -pair[1])
        self._report_usage(model, parsed.usage)
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
            result = parse_chat_result(await self._send("POST", "/chat/completions", json_body=body))
        self._report_usage(model, result.usage)
        return result

    async def key_info(self) -> KeyInfo:
        where = "GET /key"
        self._require_key()
        with upstream_faults(self.provider_name, where, secret=self._key):
            return KeyResponse.model_validate(await self._send("GET", "/key")).data

    async def credits(self) -> Credits:
        where = "GET /credits"
        self._require_key()
        with upstream_faults(self.provider_name, where, secret=self._key):
            return CreditsResponse.model_validate(await self._send("GET", "/credits")).data

    async def model_context_length(self, model: str) -> int:
        """Context length of `model` from the catalogue (all output modalities, so embedding models too)."""
        where = "GET /models"
        for entry in await self._catalogue():
            if model in (entry.id, entry.canonical_slug):
                length = entry.context_length or (entry.top_provider.context_length if entry.top_provider else None)
                if length:
                    return int(length)
                raise MalformedResponse(self.provider_name, f"{where}: model {model!r} lists no context_length")
        raise UpstreamError(self.provider_name, f"{where}: model {model!r} is not in the catalogue", 404)

    async def model_price(self, model: str) -> ModelPrice | None:
        """`model`'s listed price per token in credits; None when the catalogue lists none for it, or a
        negative one (OpenRouter lists -1 for a router whose price varies per call): unknown, never 0."""
        for entry in await self._catalogue():
            if model in (entry.id, entry.canonical_slug) and entry.pricing is not None:
                prompt, completion = entry.pricing.prompt, entry.pricing.completion
                listed = [p for p in (prompt, completion) if p is not None]
                if not listed or min(listed) < 0:
                    return None
                return ModelPrice(prompt=prompt or 0.0, completion=completion or 0.0)
        return None

    # -- plumbing ------------------------------------------------------------------------------

    async def _catalogue(self) -> list[Any]:
        """GET /models, every output modality (so embedding models too)."""
        self._require_key()
        with upstream_faults(self.provider_name, "GET /models", secret=self._key):
            payload = await self._send("GET", "/models", params={"output_modalities": "all"})
            return list(ModelsResponse.model_validate(payload).data)

    def _report_usage(self, model: str, usage: ChatUsage | None) -> None:
        """Tell `on_usage` what a response cost; a listener's failure never fails the call."""
        if self._on_usage is None:
            return
        tokens = usage or ChatUsage()
        prompt = tokens.prompt_tokens or max(0, tokens.total_tokens - tokens.completion_tokens)
        try:
            self._on_usage(
                CallUsage(
                    model=model, cost=tokens.cost, prompt_tokens=prompt, completion_tokens=tokens.completion_tokens
                )
            )
        except Exception:
            log.exception("%s: the usage listener failed", self.provider_name)

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
            response = await self._http.request(
                method, path, json=json_body, params=params, headers=self._auth_headers()
            )
        return read_json(response)
