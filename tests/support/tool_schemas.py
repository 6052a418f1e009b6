"""What an MCP tool promises its client, checked with `jsonschema` (not with the models that made the
answer): its outputSchema is a JSON Schema (2020-12), its answer's structured content is valid under it,
and the same answer comes as a text block for clients that read no structured content."""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator, SchemaError
from mcp import types


def schema_problems(tool: types.Tool) -> list[str]:
    """Why the tool's outputSchema is not a JSON Schema of an object (none: it is one)."""
    schema = tool.output_schema
    if schema is None:
        return [f"{tool.name}: no outputSchema"]
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return [f"{tool.name}: outputSchema is not a JSON Schema: {exc.message}"]
    return [] if schema.get("type") == "object" else [f"{tool.name}: outputSchema is not an object's"]


def answer_problems(tool: types.Tool, result: types.CallToolResult) -> list[str]:
    """Why the answer is not what the tool's outputSchema declares, or carries no text for older clients
    (none: it is, and does)."""
    if result.is_error:
        return [f"{tool.name}: failed: {' '.join(getattr(b, 'text', '') for b in result.content)}"]
    structured = result.structured_content
    if structured is None or tool.output_schema is None:
        return [f"{tool.name}: no structured content or no outputSchema"]
    validator = Draft202012Validator(tool.output_schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    problems = [
        f"{tool.name}: {'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}"
        for error in validator.iter_errors(structured)
    ]
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    if len(texts) != 1 or _json(texts[0]) != structured:
        problems.append(f"{tool.name}: the text block is not the structured answer: {texts!r:.300}")
    return problems


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None
