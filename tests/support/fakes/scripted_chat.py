"""A deterministic, rule-driven "scripted tool-calling model" shared by the chat fakes.

A test lists `ChatRule`s; each chat request is matched against them in order and the first rule
that matches answers it (a tool call, a templated answer, an HTTP error, a broken body, a delay).
No rule matching → the fake falls back to its own default answer.

    rules = [
        ChatRule(when_none=["search_code"], requires_tools=True,
                 tool_calls=[ScriptedToolCall(name="search_code", arguments={"query": "{question}"})]),
        ChatRule(last_role="tool", content="The answer is in {citations}."),
    ]

Matching looks at the concatenated text of every message (system, user, assistant, tool, plus the
arguments of assistant tool calls). A rule with tool_calls never fires for a request that offers no
tools or sets tool_choice "none" — a real model never calls a tool then — and matching moves on.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

CITATION_RE = re.compile(r"[A-Za-z0-9_./-]+\.[A-Za-z0-9]+:\d+-\d+")
REQUEST_LOG_SIZE = 500
MALFORMED_BODY = '{"id": "chatcmpl-broken", "choices": [{"message": '  # 200, but not JSON

ConfigT = TypeVar("ConfigT", bound=BaseModel)
_CALL_IDS = itertools.count(1)
_CALL_IDS_LOCK = threading.Lock()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScriptedToolCall(_Strict):
    """One tool call the scripted model makes. A str `arguments` is sent verbatim (may be broken JSON)."""

    name: str
    arguments: str | dict[str, Any] = Field(default_factory=dict)

    def arguments_text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


class ChatRule(_Strict):
    """When a request matches every condition given, answer it like this. Rules are tried in order."""

    # -- conditions --
    model: str | None = Field(default=None, description="Only requests for this model id.")
    when_all: list[str] = Field(default_factory=list, description="Every substring must occur in the messages' text.")
    when_none: list[str] = Field(default_factory=list, description="No substring may occur in the messages' text.")
    last_role: str | None = Field(default=None, description="Role of the last message must equal this.")
    requires_tools: bool = Field(default=False, description="Request must offer tools with tool_choice != 'none'.")
    times: int | None = Field(
        default=None, ge=0, description="Fires at most this many times (per process), then skipped."
    )
    # -- answer --
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    content: str | None = Field(default=None, description="Template: {question}, {citations}.")
    status: int | None = Field(default=None, ge=400, le=599, description="Answer with this HTTP error status.")
    malformed: bool = Field(default=False, description="Answer 200 with a body that is not JSON.")
    latency_s: float = Field(default=0.0, ge=0, description="Sleep before answering.")


# ---------------------------------------------------------------------------------------------
# Reading a request


def message_text(message: dict[str, Any]) -> str:
    """A message's text content (a str, or the text parts of a content list)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def conversation_text(body: dict[str, Any]) -> str:
    """All message text, tool-call arguments included, joined by newlines."""
    parts: list[str] = []
    for message in _messages(body):
        parts.append(message_text(message))
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                parts.append(function["arguments"])
    return "\n".join(parts)


def offers_tools(body: dict[str, Any]) -> bool:
    """The request has a non-empty tools list and does not forbid calling them."""
    return bool(body.get("tools")) and body.get("tool_choice") != "none"


def first_user_text(body: dict[str, Any]) -> str:
    return next((message_text(m) for m in _messages(body) if m.get("role") == "user"), "")


def citations(text: str) -> list[str]:
    """Unique `path:start-end` citations in first-seen order."""
    return list(dict.fromkeys(CITATION_RE.findall(text)))


def render(template: str, body: dict[str, Any]) -> str:
    """Fill {question} and {citations}; every other brace is left alone."""
    out = template
    if "{question}" in out:
        out = out.replace("{question}", first_user_text(body))
    if "{citations}" in out:
        out = out.replace("{citations}", ", ".join(citations(conversation_text(body))))
    return out


# ---------------------------------------------------------------------------------------------
# Matching


def rule_matches(rule: ChatRule, body: dict[str, Any], text: str | None = None) -> bool:
    """Every condition of `rule` holds for `body` (fire counts aside)."""
    if rule.model is not None and body.get("model") != rule.model:
        return False
    tools_ok = offers_tools(body)
    if (rule.requires_tools or rule.tool_calls) and not tools_ok:
        return False
    messages = _messages(body)
    if rule.last_role is not None and (not messages or messages[-1].get("role") != rule.last_role):
        return False
    if rule.when_all or rule.when_none:
        text = conversation_text(body) if text is None else text
        if any(s not in text for s in rule.when_all) or any(s in text for s in rule.when_none):
            return False
    return True


class ScriptRunner:
    """Rules plus how often each has fired. `match` picks the first rule that applies and counts it."""

    def __init__(self, rules: list[ChatRule] | None = None) -> None:
        self._lock = threading.Lock()
        self.rules: list[ChatRule] = []
        self.fired: list[int] = []
        self.configure(rules or [])

    def configure(self, rules: list[ChatRule]) -> None:
        """Replace the rules; fire counts start again from zero."""
        with self._lock:
            self.rules = rules
            self.fired = [0] * len(rules)

    def follow(self, rules: list[ChatRule]) -> None:
        """Take `rules` unless they are already the rules held (then counts are kept)."""
        if rules is not self.rules:
            self.configure(rules)

    def reset_counts(self) -> None:
        with self._lock:
            self.fired = [0] * len(self.rules)

    def match(self, body: dict[str, Any]) -> ChatRule | None:
        if not self.rules:
            return None
        text = conversation_text(body)
        with self._lock:
            for i, rule in enumerate(self.rules):
                if rule.times is not None and self.fired[i] >= rule.times:
                    continue
                if rule_matches(rule, body, text):
                    self.fired[i] += 1
                    return rule
        return None


# ---------------------------------------------------------------------------------------------
# Answering


def _next_call_id() -> str:
    with _CALL_IDS_LOCK:
        return f"call_{next(_CALL_IDS)}"


def _words(text: str) -> int:
    return len(text.split())


def completion_envelope(
    completion_id: str,
    model: str,
    message: dict[str, Any],
    finish_reason: str,
    prompt_tokens: int,
    completion_tokens: int,
) -> dict[str, Any]:
    """An OpenAI chat.completion with one choice."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def chat_completion_body(
    rule: ChatRule, request_body: dict[str, Any], completion_id: str, model: str
) -> dict[str, Any]:
    """The OpenAI chat.completion a successful `rule` answers with."""
    content = render(rule.content, request_body) if rule.content is not None else None
    message: dict[str, Any] = {"role": "assistant", "content": content}
    completion_tokens = _words(content or "")
    if rule.tool_calls:
        message["tool_calls"] = [
            {
                "id": _next_call_id(),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_text()},
            }
            for call in rule.tool_calls
        ]
        completion_tokens += len(rule.tool_calls)
        finish = "tool_calls"
    else:
        message["content"] = content or ""
        finish = "stop"
    return completion_envelope(
        completion_id, model, message, finish, _words(conversation_text(request_body)), completion_tokens
    )


class MalformedResponse(Response):
    """A 200 whose body is not JSON (so callers can count it as an error)."""

    def __init__(self) -> None:
        super().__init__(MALFORMED_BODY, status_code=200, media_type="application/json")


def error_body(status: int, message: str) -> dict[str, Any]:
    """OpenRouter/OpenAI error body."""
    return {"error": {"code": status, "message": message}}


async def scripted_response(
    rule: ChatRule, request_body: dict[str, Any], completion_id: str, model: str, *, extra: dict[str, Any] | None = None
) -> Response:
    """Sleep `latency_s`, then answer as `rule` says. `extra` is merged into a successful completion."""
    if rule.latency_s:
        await asyncio.sleep(rule.latency_s)
    if rule.status is not None:
        return JSONResponse(error_body(rule.status, f"scripted error ({rule.status})"), status_code=rule.status)
    if rule.malformed:
        return MalformedResponse()
    body = chat_completion_body(rule, request_body, completion_id, model)
    if extra:
        body.update(extra)
    return JSONResponse(body)


# ---------------------------------------------------------------------------------------------
# Request log


class RequestLog:
    """The last `maxlen` request bodies, oldest first."""

    def __init__(self, maxlen: int = REQUEST_LOG_SIZE) -> None:
        self._entries: deque[Any] = deque(maxlen=maxlen)
        self._lock = threading.Lock()

    def append(self, body: Any) -> None:
        with self._lock:
            self._entries.append(body)

    def entries(self) -> list[Any]:
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


async def log_json_body(request: Request, log: RequestLog) -> Any:
    """The request's JSON body (None when it is not JSON), appended to `log` when it parses."""
    try:
        body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    log.append(body)
    return body


def config_endpoint(model: type[ConfigT], apply: Callable[[ConfigT], None]) -> Callable[[Request], Awaitable[Response]]:
    """POST /_fake/config: validate the body as `model` (422 otherwise) and hand it to `apply`."""

    async def set_config(request: Request) -> Response:
        try:
            config = model.model_validate_json(await request.body())
        except ValidationError as exc:
            return JSONResponse({"detail": exc.errors(include_url=False, include_input=False)}, status_code=422)
        apply(config)
        return JSONResponse({"ok": True})

    return set_config


def chat_log_endpoint(log: RequestLog) -> Callable[[Request], Awaitable[Response]]:
    """GET /_fake/chat_log: the logged request bodies, oldest first."""

    async def get_chat_log(request: Request) -> Response:
        return JSONResponse(log.entries())

    return get_chat_log
