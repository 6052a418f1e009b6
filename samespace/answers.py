"""`samespace ask`: the MCP `ask_code` tool through the SDK's client, printed for a terminal."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["ask", "format_answer"]


def format_answer(result: dict[str, Any]) -> list[str]:
    """The answer, then its citations (path:start-end), then the fallbacks taken, if any."""
    lines = [str(result.get("answer", "")).rstrip()]
    citations = result.get("citations") or []
    if citations:
        lines.append("\ncitations:")
        for cite in citations:
            where = f"{cite['repo']}:" if cite.get("repo") else ""
            symbol = f"  {cite['symbol']}" if cite.get("symbol") else ""
            lines.append(f"  {where}{cite['path']}:{cite['start_line']}-{cite['end_line']}{symbol}")
    fallbacks = (result.get("produced") or {}).get("fallbacks") or []
    if fallbacks:
        lines.append("\nfallbacks: " + "; ".join(str(f) for f in fallbacks))
    return lines


def ask(url: str, question: str, *, repo: str | None, deep: bool, as_json: bool, token_file: Path | None = None) -> int:
    """Call `ask_code` on the MCP endpoint at `url` with the token on `token_file`'s first line, else
    the serve token when one is configured."""
    from cluster.settings import load_settings
    from samespace.clients import call_tool, read_token_file, result_text

    arguments: dict[str, Any] = {"question": question, "deep": deep} | ({"repo": repo} if repo else {})
    token = read_token_file(token_file) if token_file is not None else load_settings().serve.expected_token()
    result = asyncio.run(call_tool(url, "ask_code", arguments, token=token))
    if result.is_error:
        print(f"ask_code failed: {result_text(result)}", file=sys.stderr)
        return 1
    structured = result.structured_content or {}
    print(json.dumps(structured, indent=2) if as_json else "\n".join(format_answer(structured)))
    return 0
