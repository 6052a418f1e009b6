"""The RLM's first step: split a question into 2–4 searches (strict JSON asked, tolerant parser).

Peer `planQuestion` / `parsePlanJson`: fences, wrappers and trailing commas are forgiven; an
unparseable plan is `None` and the loop searches the question itself (single-question mode).
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import Field

from cluster.types import Strict

PLAN_MAX_SUBQUESTIONS = 4  # peer
PLAN_QUERY_MAX_CHARS = 80  # peer
PLAN_MAX_TOKENS = 512  # peer
PLAN_TEMPERATURE = 0.1  # peer

PlanTool = Literal["search_code", "search_symbols", "search_files"]
PLAN_TOOLS: tuple[PlanTool, ...] = ("search_code", "search_symbols", "search_files")

PLAN_SYSTEM = """You plan code searches. Reply with JSON only, no prose, exactly this shape:
{"restated": "<the question in one line>", "subQuestions": [{"question": "<what to find out>", "tool": "search_code" | "search_symbols" | "search_files", "query": "<2-5 words or one bare identifier>"}]}
Rules: 2 to 4 subQuestions. search_code finds code by meaning; search_symbols finds a function, class or
method by name; search_files finds files by path. Every identifier, CamelCase or snake_case name in the
question gets its own search_symbols entry."""  # noqa: E501 - the JSON shape is one line of the prompt, as sent


class SubQuestion(Strict):
    question: str
    tool: PlanTool
    query: str = Field(min_length=1, max_length=PLAN_QUERY_MAX_CHARS)


def plan_messages(question: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": PLAN_SYSTEM}, {"role": "user", "content": question}]


def parse_plan(text: str | None, question: str) -> list[SubQuestion] | None:
    """Sub-questions from a model's reply, or None when nothing usable is in it."""
    payload = _json_payload(text or "")
    if payload is None:
        return None
    if isinstance(payload, dict):
        items = next(
            (
                payload[k]
                for k in ("subQuestions", "sub_questions", "subquestions", "questions", "plan")
                if k in payload
            ),
            None,
        )
    else:
        items = payload
    if not isinstance(items, list):
        return None
    plan: list[SubQuestion] = []
    seen: set[str] = set()
    for item in items:
        sub = _sub_question(item, question)
        if sub is None or f"{sub.tool}:{sub.query.lower()}" in seen:
            continue
        seen.add(f"{sub.tool}:{sub.query.lower()}")
        plan.append(sub)
        if len(plan) == PLAN_MAX_SUBQUESTIONS:
            break
    return plan or None


def _sub_question(item: Any, question: str) -> SubQuestion | None:
    if isinstance(item, str):
        item = {"question": item, "query": item}
    if not isinstance(item, dict):
        return None
    asked = str(item.get("question") or item.get("q") or "").strip()
    query = str(item.get("query") or asked or "").strip()
    if not query:
        return None
    named = str(item.get("tool") or "search_code").strip()
    tool: PlanTool = next((t for t in PLAN_TOOLS if t == named), "search_code")
    return SubQuestion(
        question=asked or question,
        tool=tool,
        query=" ".join(query.split())[:PLAN_QUERY_MAX_CHARS],
    )


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _json_payload(text: str) -> Any:
    """The first JSON object or array in `text`, after removing fences and trailing commas."""
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1)
    for opener in ("{", "["):
        start = text.find(opener)
        while start != -1:
            candidate = _balanced(text, start)
            if candidate is not None:
                try:
                    return json.loads(_TRAILING_COMMA.sub(r"\1", candidate))
                except json.JSONDecodeError:
                    pass
            start = text.find(opener, start + 1)
    return None


def _balanced(text: str, start: int) -> str | None:
    """The bracketed span opening at `start` (strings respected), or None if it never closes."""
    closer = {"{": "}", "[": "]"}
    stack: list[str] = []
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in closer:
            stack.append(closer[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return text[start : i + 1]
    return None
