"""The text of the MCP prompts: the answers of the code tools turned into a brief the model answers
from, every piece of evidence under its citation (`path:start-end`, as `ask_code` cites), then the
instruction to answer citing them and to use the named tools for more.

Pure functions of the tools' answers: `cluster.search.prompts.CodePrompts` gathers the answers, these
write them. Each list is capped and each code excerpt is cut to a few lines, and the whole text to
`MAX_PROMPT_CHARS`, saying so where something was left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import Field

from cluster.graph import GraphAnswer, SymbolDefinition
from cluster.history import Comparison, WhatChanged
from cluster.ingest import SourceLines
from cluster.search.service import SearchResult
from cluster.types import Strict

__all__ = [
    "MAX_PROMPT_CHARS",
    "PromptText",
    "cite",
    "explain_text",
    "locate_text",
    "review_text",
    "since_text",
]

MAX_PROMPT_CHARS = 24_000  # the whole brief; what is past it is cut, and the cut says so
MAX_EXCERPT_LINES = 40  # lines of code or diff shown per piece of evidence
FENCE = "```"
CUT = "(cut: the rest did not fit; ask the tools named below)"

Span = tuple[int, int]


class PromptText(Strict):
    """A prompt's brief and the citations it carries (each `path:start-end` in the text)."""

    text: str
    citations: list[str] = Field(default_factory=list)


def cite(path: str, start: int, end: int | None = None) -> str:
    """A citation as the tools' answers are cited: `path:start-end`."""
    return f"{path}:{start}-{end if end is not None else start}"


def review_text(comparison: Comparison, base: str, head: str, spans: Mapping[tuple[str, str], Span]) -> PromptText:
    """A review brief: each symbol that differs from `base` to `head` with its diff, cited at its
    lines in the serving index (`spans`, by path and symbol) where the index holds it."""
    refs = f"from {base} ({comparison.base[:12]}) to {head} ({comparison.head[:12]})"
    counts = f"{len(comparison.items)} symbols in {len(comparison.files)} files"
    lines = [f"Review the changes in repository {comparison.repo} {refs}: {counts}.", ""]
    citations = []
    for item in comparison.items:
        span = spans.get((item.path, item.symbol))
        where = cite(item.path, *span) if span is not None else item.path
        if span is not None:
            citations.append(where)
        was = _previous(item.previous_path, item.previous_symbol)
        lines += [f"- {where} {item.symbol} ({item.kind}): {item.change.value}{was}"]
        if item.diff:
            lines += _fenced(item.diff, "diff", item.diff_truncated)
    if not comparison.items:
        lines.append("No definition differs between the two refs.")
    if comparison.truncated:
        lines.append("(More symbols differ than are listed: call compare with a higher limit.)")
    if comparison.files:
        lines += ["", "Files that differ: " + ", ".join(comparison.files[:50])]
    return _brief(
        lines,
        citations,
        "Review these changes: correctness, edge cases, tests, naming. Cite each finding as path:start-end "
        "from the list above. For more context use the samespace tools read_code, callers, impact and compare.",
    )


def explain_text(
    symbol: str,
    definition: SymbolDefinition,
    source: SourceLines | None,
    callers: GraphAnswer,
    others: Sequence[SymbolDefinition] = (),
) -> PromptText:
    """An explanation brief: the definition's code and each call site that reaches it."""
    where = cite(definition.path, definition.line, definition.end_line)
    lines = [f"Explain {symbol}: {definition.qualified} ({definition.kind}, {definition.language}) in repository "]
    lines[0] += f"{definition.repo}, defined at {where}."
    citations = [where]
    if source is not None:
        shown = cite(source.path, source.start_line, source.end_line)
        lines += ["", f"Its code ({shown}):", *_fenced(source.text, definition.language, source.truncated)]
    if others:
        lines += ["", "Other definitions of the same name (not shown):"]
        lines += [f"- {cite(d.path, d.line, d.end_line)} {d.qualified} ({d.kind})" for d in others]
    lines += ["", f"Its callers ({len(callers.items)}{', more not listed' if callers.truncated else ''}):"]
    for item in callers.items:
        site = cite(item.path, item.line)
        citations.append(site)
        inside = f" in {item.symbol}" if item.symbol else " (top level)"
        guess = f" (confidence {item.confidence:.2f})" if item.ambiguous else ""
        lines.append(f"- {site}{inside}{guess}")
    if not callers.items:
        lines.append("- none found in the index" + (f" ({callers.note})" if callers.note else ""))
    return _brief(
        lines,
        citations,
        "Explain what it does, how its callers use it and what a change to it would affect. Cite each claim "
        "as path:start-end from above. For more use the samespace tools read_code, callees, impact and "
        "find_references.",
    )


def since_text(answer: WhatChanged, path: str) -> PromptText:
    """A what-changed brief: each symbol changed under `path` in the window, newest first."""
    window = f"since {answer.since}" + (f" until {answer.until}" if answer.until else "")
    lines = [f"What changed under {path} {window}: {len(answer.items)} symbol changes, newest first.", ""]
    citations = []
    for item in answer.items:
        where = cite(item.path, item.lines[0].start, item.lines[-1].end) if item.lines else item.path
        if item.lines:
            citations.append(where)
        was = _previous(item.previous_path, item.previous_symbol)
        lines.append(
            f"- {where} {item.symbol} ({item.kind}): {item.change.value}{was} in {item.commit[:12]} "
            f"{item.date[:10]} by {item.author}: {item.subject}"
        )
    if not answer.items:
        lines.append("Nothing under that path changed in the window." + (f" {answer.note}" if answer.note else ""))
    if answer.truncated:
        lines.append("(More changes than are listed: call what_changed with a higher limit.)")
    for reach in answer.reach:
        more = ", older commits not mined" if reach.more else ""
        lines.append(f"(History of {reach.repo}: {reach.commits} commits since {reach.oldest_date or '?'}{more}.)")
    return _brief(
        lines,
        citations,
        "Summarize what changed and why, grouping related changes. Cite each change as path:start-end and its "
        "commit. For more use the samespace tools symbol_history, search_commits, compare and read_code.",
    )


def locate_text(behaviour: str, result: SearchResult) -> PromptText:
    """A where-is-it brief: the best hits of a search for the behaviour, each with its code's head."""
    lines = [f"Find where this behaviour is implemented: {behaviour}", "", "The best matches of the index:"]
    citations = []
    for hit in result.hits:
        where = cite(hit.path, hit.start_line, hit.end_line)
        citations.append(where)
        name = f" {hit.symbol} ({hit.kind})" if hit.symbol else f" ({hit.kind})"
        lines += [f"- {where}{name} in {hit.repo}, score {hit.score:.3f}", *_fenced(hit.snippet, hit.language, False)]
    if result.degraded:
        lines.append(f"(Search degraded: {result.degraded}.)")
    return _brief(
        lines,
        citations,
        "Say where the behaviour is implemented and how, or that none of these implements it. Cite each place "
        "as path:start-end from above. For more use the samespace tools search_code, grep_code, read_code and "
        "callers.",
    )


def _previous(path: str | None, symbol: str | None) -> str:
    was = [part for part in (symbol, path) if part]
    return f" (was {' in '.join(was)})" if was else ""


def _fenced(text: str, language: str, truncated: bool) -> list[str]:
    """`text` in a code fence, its first MAX_EXCERPT_LINES lines; a fence in the text is defused."""
    rows = text.splitlines()
    cut = truncated or len(rows) > MAX_EXCERPT_LINES
    body = [row.replace(FENCE, "`\u200b``") for row in rows[:MAX_EXCERPT_LINES]]
    return [f"{FENCE}{language}", *body, FENCE] + (["(cut: read_code shows the rest)"] if cut else [])


def _brief(lines: Sequence[str], citations: Sequence[str], instruction: str) -> PromptText:
    """The brief: the evidence, cut to fit MAX_PROMPT_CHARS with the instruction after it."""
    tail = ["", instruction]
    room = MAX_PROMPT_CHARS - sum(len(line) + 1 for line in [*tail, FENCE, CUT])  # the cut's lines fit too
    kept: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > room:
            open_fence = sum(row.startswith(FENCE) for row in kept) % 2 == 1
            kept += [FENCE] * open_fence + [CUT]
            break
        kept.append(line)
        used += len(line) + 1
    text = "\n".join([*kept, *tail])
    return PromptText(text=text, citations=[c for c in dict.fromkeys(citations) if c in text])
