"""The tools the RLM may call: their JSON schemas, argument validation, and tolerant call parsing.

A model's tool call is untrusted input: unknown names, bad JSON and wrong argument types become a
`ToolCallError` the model is shown (and the ask reports), never an exception. Calls written into
the text instead of `tool_calls` (Qwen XML, hermes `<tool_call>{json}`, bare JSON lines, pythonic
`name("...")`) are recovered as the peer's `extractFallbackToolCalls` does.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cluster.ask.evidence import EvidenceBlock


class _Args(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)  # models add stray keys (projectId...)


class QueryArgs(_Args):
    query: str = Field(min_length=1, max_length=500)


class ReadRangeArgs(_Args):
    path: str = Field(min_length=1, max_length=1000)
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)
    repo: str | None = None


class NeighborsArgs(_Args):
    path: str = Field(min_length=1, max_length=1000)
    line: int = Field(ge=1)
    count: int = Field(default=2, ge=1, le=10)
    repo: str | None = None


class OverviewArgs(_Args):
    repo: str | None = None


class SymbolArgs(_Args):
    symbol: str = Field(min_length=1, max_length=500)
    path: str | None = Field(default=None, max_length=1000)


class SinceArgs(_Args):
    since: str = Field(min_length=1, max_length=200)
    path: str | None = Field(default=None, max_length=1000)


ARGUMENTS: dict[str, type[_Args]] = {
    "search_code": QueryArgs,
    "search_symbols": QueryArgs,
    "search_files": QueryArgs,
    "read_range": ReadRangeArgs,
    "neighbors": NeighborsArgs,
    "repo_overview": OverviewArgs,
    "search_commits": QueryArgs,
    "symbol_history": SymbolArgs,
    "what_changed": SinceArgs,
}

_DESCRIPTIONS = {
    "search_code": "Semantic search: code that does what the query describes (2-5 words or a code fragment).",
    "search_symbols": "Find functions, classes or methods by name: a bare identifier like parse_config or TaxTable.",
    "search_files": "Find files whose path contains the query, with the symbols they define.",
    "read_range": "Read exact lines of an indexed file (path as shown in the evidence).",
    "neighbors": "The chunks just above and below a line of a file: the context around a hit.",
    "repo_overview": "The repository's languages, folders, main types, most used functions and README.",
    "search_commits": "Find commits by what they were about: their messages and the symbols they changed.",
    "symbol_history": "The commits that changed a function or class (why and when it changed), newest first.",
    "what_changed": "The symbols changed since a date (2026-10-01), a duration (30d) or a ref, with their commits.",
}


@functools.cache
def tool_schemas() -> list[dict[str, Any]]:
    """OpenAI/OpenRouter `tools` for the RLM (sent on every turn of the loop); built once, never mutated."""
    schemas = []
    for name, model in ARGUMENTS.items():
        params = model.model_json_schema()
        params.pop("title", None)
        for prop in params.get("properties", {}).values():
            prop.pop("title", None)
        schemas.append(
            {"type": "function", "function": {"name": name, "description": _DESCRIPTIONS[name], "parameters": params}}
        )
    return schemas


class ToolRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    args: _Args

    def label(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.args.model_dump(exclude_none=True).items())
        return f"{self.name}({shown})"


class ToolCallError(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    error: str


def validate_call(call_id: str, name: str, arguments: str | dict[str, Any] | None) -> ToolRequest | ToolCallError:
    """One call as the model wrote it → a validated request, or an error the model will be shown."""
    model = ARGUMENTS.get(name)
    if model is None:
        return ToolCallError(
            id=call_id, name=name[:80], error=f"unknown tool {name[:80]!r}; tools: {', '.join(ARGUMENTS)}"
        )
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return ToolCallError(id=call_id, name=name, error=f"arguments are not JSON ({exc.msg})")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return ToolCallError(id=call_id, name=name, error="arguments must be a JSON object")
    try:
        return ToolRequest(id=call_id, name=name, args=model.model_validate(arguments))
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "(arguments)"
        return ToolCallError(id=call_id, name=name, error=f"{where}: {first['msg']}")


# --- calls written as text ------------------------------------------------------------------

_QWEN_XML = re.compile(r"<function=([\w.-]+)>(.*?)</function>", re.DOTALL)
_QWEN_PARAM = re.compile(r"<parameter=([\w.-]+)>\s*(.*?)\s*</parameter>", re.DOTALL)
_HERMES = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)
_PYTHONIC = re.compile(r"\b(" + "|".join(ARGUMENTS) + r")\((.*?)\)")


def calls_in_text(text: str | None) -> list[tuple[str, dict[str, Any] | str]]:
    """(name, arguments) of tool calls written into a reply's text, in order."""
    if not text:
        return []
    found: list[tuple[str, dict[str, Any] | str]] = []
    for name, body in _QWEN_XML.findall(text):
        found.append((name, {k: _scalar(v) for k, v in _QWEN_PARAM.findall(body)}))
    for raw in _HERMES.findall(text):
        found.extend(_json_call(raw))
    if found:
        return found
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and '"name"' in line:
            found.extend(_json_call(line))
    if found:
        return found
    for name, inner in _PYTHONIC.findall(text):
        parsed = _pythonic_args(name, inner)
        if parsed is not None:
            found.append((name, parsed))
    return found


def _json_call(raw: str) -> list[tuple[str, dict[str, Any] | str]]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return []
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return []
    arguments = value.get("arguments", value.get("parameters", {}))
    return [(value["name"], arguments if isinstance(arguments, dict | str) else {})]


def _scalar(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _pythonic_args(name: str, inner: str) -> dict[str, Any] | None:
    """`name("q")` → the tool's first field; `name(k="v", n=3)` → keywords. Literals only."""
    try:
        call = ast.parse(f"f({inner})", mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call):
        return None
    try:
        args = [ast.literal_eval(a) for a in call.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
    except ValueError:
        return None
    fields = list(ARGUMENTS[name].model_fields)
    kwargs.update({fields[i]: value for i, value in enumerate(args[: len(fields)])})
    return kwargs


def requests_from_reply(
    tool_calls: Sequence[Any], content: str | None, round_number: int
) -> tuple[list[ToolRequest], list[ToolCallError]]:
    """The calls of one reply: structured `tool_calls` first, else calls written in the text."""
    raw: list[tuple[str, str, Any]] = [(c.id, c.name, c.arguments) for c in tool_calls]
    if not raw:
        raw = [(f"text-{round_number}-{i}", name, args) for i, (name, args) in enumerate(calls_in_text(content))]
    valid: list[ToolRequest] = []
    errors: list[ToolCallError] = []
    for call_id, name, arguments in raw:
        checked = validate_call(call_id or f"call-{round_number}-{len(valid) + len(errors)}", str(name), arguments)
        if isinstance(checked, ToolRequest):
            valid.append(checked)
        else:
            errors.append(checked)
    return valid, errors


class CodeTools(Protocol):
    """What the loop (and the MCP tools) run: the same implementations. Scoped to the asked repo."""

    async def search_code(self, query: str, limit: int, rerank: bool) -> list[EvidenceBlock]: ...

    async def search_symbols(self, query: str, limit: int) -> list[EvidenceBlock]: ...

    async def search_files(self, query: str, limit: int) -> list[EvidenceBlock]: ...

    async def read_range(self, repo: str | None, path: str, start_line: int, end_line: int) -> list[EvidenceBlock]: ...

    async def neighbors(self, repo: str | None, path: str, line: int, count: int) -> list[EvidenceBlock]: ...

    async def repo_overview(self, repo: str | None) -> list[EvidenceBlock]: ...

    async def search_commits(self, query: str, limit: int) -> list[EvidenceBlock]: ...

    async def symbol_history(self, symbol: str, path: str | None, limit: int) -> list[EvidenceBlock]: ...

    async def what_changed(self, since: str, path: str | None, limit: int) -> list[EvidenceBlock]: ...
