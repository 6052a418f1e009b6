"""The OpenAI-compatible wire: the bodies OpenRouter (and a local chat server) send and receive.

Response models are lenient (upstream bodies grow fields: read what we need, ignore the rest). The
chat helpers are shared by the OpenRouter client, the local chat client and sidecar providers.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "ChatResult",
    "ChatUsage",
    "Credits",
    "CreditsResponse",
    "EmbeddingsResponse",
    "KeyInfo",
    "KeyResponse",
    "ModelsResponse",
    "RateLimitInfo",
    "RerankResponse",
    "ToolCall",
    "chat_request_body",
    "parse_chat_result",
    "provider_pin",
]


class _Lenient(BaseModel):
    """Upstream bodies grow fields; read what we need and ignore the rest."""

    model_config = ConfigDict(extra="ignore", frozen=True)


# ---------------------------------------------------------------------------------------------
# Results callers see


class ToolCall(_Lenient):
    id: str
    name: str
    arguments: str = Field(description="The call's arguments as the model wrote them: a JSON string.")


class ChatUsage(_Lenient):
    """A response's `usage` (chat, embeddings and rerank alike): tokens, and `cost` in credits, which
    OpenRouter includes in every response (None from servers that do not report one)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None


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
# Response envelopes


class _EmbeddingRow(_Lenient):
    index: int
    embedding: list[float]


class EmbeddingsResponse(_Lenient):
    """`POST /embeddings`."""

    data: list[_EmbeddingRow]
    usage: ChatUsage | None = None


class _RerankRow(_Lenient):
    index: int
    relevance_score: float


class RerankResponse(_Lenient):
    """`POST /rerank`."""

    results: list[_RerankRow]
    usage: ChatUsage | None = None


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


class KeyResponse(_Lenient):
    """`GET /key`."""

    data: KeyInfo


class CreditsResponse(_Lenient):
    """`GET /credits`."""

    data: Credits


class _TopProvider(_Lenient):
    context_length: int | None = None


class _Pricing(_Lenient):
    """Price per token in credits, as decimal strings ('0.00000002')."""

    prompt: float | None = None
    completion: float | None = None


class _ModelEntry(_Lenient):
    id: str
    canonical_slug: str | None = None
    context_length: int | None = None
    top_provider: _TopProvider | None = None
    pricing: _Pricing | None = None


class ModelsResponse(_Lenient):
    """`GET /models`."""

    data: list[_ModelEntry]


# ---------------------------------------------------------------------------------------------
# Request bodies and parsing


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
    calls = [
        ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments) for c in choice.message.tool_calls or []
    ]
    return ChatResult(
        content=choice.message.content, tool_calls=calls, finish_reason=choice.finish_reason, usage=parsed.usage
    )


def provider_pin(upstream: str) -> dict[str, Any]:
    """DESIGN §6: the routing object of an embedding request. `order` + `only` name the one upstream and
    `allow_fallbacks: False` forbids any other, so a missing pin fails closed upstream too."""
    return {"order": [upstream], "only": [upstream], "allow_fallbacks": False}
