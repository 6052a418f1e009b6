"""A local OpenAI-compatible chat server (vLLM, Ray Serve LLM, llama.cpp, Ollama): chat and its window.

Transport only, like cluster/cloud/openrouter.py, whose error mapping and response parsing it shares:
every failure leaves as one `UpstreamError` subclass. The optional key is a SecretStr used only in
the Authorization header.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from pydantic import SecretStr

from cluster.cloud.faults import read_json, upstream_faults
from cluster.cloud.openai_wire import ChatResult, chat_request_body, parse_chat_result
from cluster.settings import ChatEndpoint


class LocalChatClient:
    """One endpoint, one model. `transport` replaces the network in tests."""

    def __init__(
        self,
        provider_name: str,
        endpoint: ChatEndpoint,
        key: SecretStr | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.provider_name = provider_name
        self.endpoint = endpoint
        self._key = key
        self._http = httpx.AsyncClient(
            base_url=endpoint.url.rstrip("/"),
            timeout=httpx.Timeout(endpoint.timeout_s),
            transport=transport,
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"LocalChatClient({self.provider_name!r}, url={self.endpoint.url!r}, model={self.endpoint.model!r})"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def chat(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResult:
        body = chat_request_body(self.endpoint.model, messages, tools, tool_choice, max_tokens, temperature)
        with upstream_faults(self.provider_name, "POST /v1/chat/completions", secret=self._key):
            return parse_chat_result(await self._send("POST", "/v1/chat/completions", body))

    async def context_window(self) -> int | None:
        """`max_model_len` of the served model from `GET /v1/models` (vLLM); None when not reported."""
        with upstream_faults(self.provider_name, "GET /v1/models", secret=self._key):
            payload = await self._send("GET", "/v1/models", None)
        return context_window_of(payload, self.endpoint.model)

    async def _send(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        headers = {"Authorization": f"Bearer {self._key.get_secret_value()}"} if self._key is not None else {}
        async with asyncio.timeout(self.endpoint.timeout_s):
            response = await self._http.request(method, path, json=body, headers=headers)
        return read_json(response)


def context_window_of(payload: Any, model: str | None) -> int | None:
    """The context window a `GET /v1/models` answer reports for `model` (`max_model_len`, vLLM; or
    `context_length`), else the first entry's; None when none is reported."""
    entries = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(entries, list):
        return None
    matching = [e for e in entries if isinstance(e, dict) and e.get("id") == model]
    for entry in matching or [e for e in entries if isinstance(e, dict)][:1]:
        length = entry.get("max_model_len") or entry.get("context_length")
        if isinstance(length, int) and length > 0:
            return length
    return None
