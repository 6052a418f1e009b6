"""A fake *local* OpenAI-compatible inference server, shaped like vLLM / Ray Serve LLM.

No model is loaded: chat answers come from scripted `ChatRule`s (see scripted_chat), and without
a matching rule from a plain echo of the last message ("echo: ..."), never a tool call.

    GET  /health                → 200 (always, even when `down`)
    GET  /v1/models             → vLLM's ModelList; `max_model_len` only when report_context
    POST /v1/chat/completions   → an OpenAI chat.completion

As vLLM does, it answers 404 for a model id other than the served one, 400 when the prompt plus
max_tokens exceeds max_model_len (tokens are counted as whitespace-separated words), and 401 when an
api_key is configured and the request lacks `Authorization: Bearer <key>`. `down` → every /v1
call answers 503. Streaming is not implemented (stream: true → 400).

Control plane:
    POST /_fake/config    body: LocalLlmConfig JSON — replaces it; rule counts, log and stats start over
    GET  /_fake/chat_log  → every chat request body (the last 500), oldest first
    GET  /_fake/stats     → {"chat_requests": n, "models_requests": n}
    POST /_fake/reset     clears stats, rule counts and the log (configuration kept)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .scripted_chat import (
    ChatRule,
    RequestLog,
    ScriptRunner,
    chat_log_endpoint,
    completion_envelope,
    config_endpoint,
    conversation_text,
    log_json_body,
    message_text,
    scripted_response,
)

DEFAULT_LOCAL_MODEL = "local/qwen3-8b"
DEFAULT_MAX_MODEL_LEN = 32768
MODEL_CREATED = 1_700_000_000


class LocalLlmConfig(BaseModel):
    """Everything the control plane can set. POST /_fake/config replaces it whole."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(default=DEFAULT_LOCAL_MODEL, description="The served model id (vLLM --served-model-name).")
    max_model_len: int = Field(default=DEFAULT_MAX_MODEL_LEN, ge=1, description="Context window, in tokens.")
    report_context: bool = Field(default=True, description="False → /v1/models omits max_model_len.")
    api_key: str | None = Field(default=None, description="Require `Authorization: Bearer <api_key>` on /v1.")
    down: bool = Field(default=False, description="Every /v1 call answers 503.")
    chat_rules: list[ChatRule] = Field(default_factory=list, description="Scripted answers, tried in order.")


class LocalLlmStats(BaseModel):
    chat_requests: int = 0
    models_requests: int = 0


@dataclass
class LocalLlmState:
    """Configuration plus what the fake counts. Pass one to build_local_llm_app to inspect it in-process."""

    config: LocalLlmConfig = field(default_factory=LocalLlmConfig)
    stats: LocalLlmStats = field(default_factory=LocalLlmStats)
    chat_log: RequestLog = field(default_factory=RequestLog)
    script: ScriptRunner = field(default_factory=ScriptRunner)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def configure(self, config: LocalLlmConfig) -> None:
        self.config = config
        self.reset()

    def reset(self) -> None:
        self.stats = LocalLlmStats()
        self.chat_log.clear()
        self.script.configure(self.config.chat_rules)

    def match_chat_rule(self, body: dict[str, Any]) -> ChatRule | None:
        self.script.follow(self.config.chat_rules)  # also when config was assigned without configure()
        return self.script.match(body)

    def next_id(self) -> str:
        return f"chatcmpl-{next(self._ids):06d}"


def openai_error(status: int, message: str, error_type: str) -> JSONResponse:
    """vLLM's error body: {"error": {"message", "type", "param", "code"}}."""
    return JSONResponse(
        {"error": {"message": message, "type": error_type, "param": None, "code": status}}, status_code=status
    )


def model_card(config: LocalLlmConfig) -> dict[str, Any]:
    """vLLM's ModelCard for the served model."""
    card: dict[str, Any] = {
        "id": config.model,
        "object": "model",
        "created": MODEL_CREATED,
        "owned_by": "vllm",
        "root": config.model,
        "parent": None,
    }
    if config.report_context:
        card["max_model_len"] = config.max_model_len
    card["permission"] = []
    return card


def echo_completion(body: dict[str, Any], completion_id: str, model: str) -> dict[str, Any]:
    """The default answer: "echo: <last message text>", cut at max_tokens words (finish "length")."""
    messages = body["messages"]
    words = ("echo: " + message_text(messages[-1])).split()
    finish = "stop"
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
    if isinstance(max_tokens, int) and 0 < max_tokens < len(words):
        words, finish = words[:max_tokens], "length"
    message = {"role": "assistant", "content": " ".join(words)}
    return completion_envelope(completion_id, model, message, finish, prompt_token_count(body), len(words))


def prompt_token_count(body: dict[str, Any]) -> int:
    """The fake's token count: whitespace-separated words of every message (tool-call arguments included)."""
    return len(conversation_text(body).split())


def chat_refusal(body: Any, config: LocalLlmConfig) -> Response | None:
    """The 400 or 404 vLLM answers this chat request with (a bad body, another model, stream, too long
    a prompt); None when the request may be served."""
    if not isinstance(body, dict):
        return openai_error(400, "Invalid JSON body", "BadRequestError")
    messages = body.get("messages")
    if not isinstance(body.get("model"), str) or not isinstance(messages, list) or not messages:
        return openai_error(400, "Invalid request: `model` and a non-empty `messages` are required", "BadRequestError")
    if not all(isinstance(m, dict) for m in messages):
        return openai_error(400, "Invalid request: every message must be an object", "BadRequestError")
    if body["model"] != config.model:
        return openai_error(404, f"The model `{body['model']}` does not exist.", "NotFoundError")
    if body.get("stream"):
        return openai_error(400, "stream is not supported by the fake", "BadRequestError")
    prompt_tokens = prompt_token_count(body)
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or 0
    if not isinstance(max_tokens, int):
        return openai_error(400, "Invalid request: max_tokens must be an integer", "BadRequestError")
    if prompt_tokens + max_tokens > config.max_model_len:
        message = (
            f"This model's maximum context length is {config.max_model_len} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, "
            f"{max_tokens} in the completion). "
            "Please reduce the length of the messages or completion."
        )
        return openai_error(400, message, "BadRequestError")
    return None


def build_local_llm_app(state: LocalLlmState | None = None) -> Starlette:
    """The fake as an ASGI app. Without `state` it serves a default LocalLlmConfig."""
    state = state if state is not None else LocalLlmState()

    def gate(request: Request) -> Response | None:
        """503 when down, 401 without the configured key; None → go on."""
        config = state.config
        if config.down:
            return openai_error(503, "Service Unavailable", "ServiceUnavailableError")
        if config.api_key is not None and request.headers.get("authorization") != f"Bearer {config.api_key}":
            return openai_error(401, "Unauthorized", "AuthenticationError")
        return None

    async def models(request: Request) -> Response:
        state.stats.models_requests += 1
        refused = gate(request)
        if refused is not None:
            return refused
        return JSONResponse({"object": "list", "data": [model_card(state.config)]})

    async def chat(request: Request) -> Response:
        state.stats.chat_requests += 1
        body = await log_json_body(request, state.chat_log)
        refused = gate(request)
        if refused is not None:
            return refused
        config = state.config
        refused = chat_refusal(body, config)
        if refused is not None:
            return refused
        rule = state.match_chat_rule(body)
        if rule is not None:
            return await scripted_response(rule, body, state.next_id(), config.model)
        return JSONResponse(echo_completion(body, state.next_id(), config.model))

    async def health(request: Request) -> Response:
        return Response(status_code=200)

    # -- control plane --

    async def get_stats(request: Request) -> Response:
        return JSONResponse(state.stats.model_dump())

    async def reset(request: Request) -> Response:
        state.reset()
        return JSONResponse({"ok": True})

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/_fake/config", config_endpoint(LocalLlmConfig, state.configure), methods=["POST"]),
        Route("/_fake/chat_log", chat_log_endpoint(state.chat_log), methods=["GET"]),
        Route("/_fake/stats", get_stats, methods=["GET"]),
        Route("/_fake/reset", reset, methods=["POST"]),
    ]
    app = Starlette(routes=routes)
    app.state.fake = state
    return app
