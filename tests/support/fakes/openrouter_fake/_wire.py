"""OpenRouter's wire shapes as the fake speaks them: request bodies, error bodies, prices, model cards."""

from __future__ import annotations

import json
import math
import time
from email.utils import formatdate
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import JSONResponse, Response

from ._config import FakeConfig, ModelEntry, RetryAfterFormat

PIN_RULE = "embeddings must pin exactly one upstream (provider.order/only) with allow_fallbacks false (DESIGN §6)"


def error_response(
    status: int, message: str, *, metadata: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """OpenRouter's error body: {"error": {"code", "message", "metadata"?}}."""
    error: dict[str, Any] = {"code": status, "message": message}
    if metadata:
        error["metadata"] = metadata
    return JSONResponse({"error": error}, status_code=status, headers=headers)


def retry_after_header(seconds: float | None, fmt: RetryAfterFormat) -> dict[str, str]:
    if seconds is None or fmt == "none":
        return {}
    if fmt == "http-date":
        return {"Retry-After": formatdate(time.time() + math.ceil(seconds), usegmt=True)}
    return {"Retry-After": f"{seconds:g}"}


# The request models' class names show in the fake's 400 messages ("... instance of _ProviderPrefs"),
# so they keep the names they had when every route lived in one module.
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


def pinned_upstream(prefs: _ProviderPrefs | None) -> str | None:
    """The one upstream named by order/only, or None when the routing object does not pin exactly one."""
    if prefs is None:
        return None
    named = {tuple(prefs.order or ()), tuple(prefs.only or ())} - {()}
    if len(named) != 1:
        return None
    (slugs,) = named
    return slugs[0] if len(slugs) == 1 else None


def loose_upstream(prefs: _ProviderPrefs | None) -> str | None:
    """For rerank/chat (no pin required): the first upstream named, if any."""
    if prefs is None:
        return None
    named = prefs.only or prefs.order
    return named[0] if named else None


def _decimal(price: float) -> str:
    """A price as OpenRouter lists it: a plain decimal string ('0.00000001'), never exponent notation."""
    return f"{price:.12f}".rstrip("0").rstrip(".") or "0"


def priced(response: Response, model: str | None, config: FakeConfig) -> tuple[Response, float]:
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


def model_card(entry: ModelEntry) -> dict[str, Any]:
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
