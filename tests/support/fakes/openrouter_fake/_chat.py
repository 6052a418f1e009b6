"""The fake's own chat answer when no scripted rule matches: a tool call for `CALL:<tool>:<json>`, else an echo."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..scripted_chat import completion_envelope, message_text
from ._wire import _ChatRequest


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


def chat_answer(body: _ChatRequest, completion_id: str) -> dict[str, Any]:
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
