"""The MCP prompts (slash commands in a client), each built from the code tools' answers with citations:

    review_changes   the symbols that differ between two refs, with diffs     (compare, find_definition)
    explain_symbol   a definition's code and its callers                      (find_definition, read_code, callers)
    changes_since    what changed under a path since a date, duration or ref  (what_changed)
    find_behaviour   where a behaviour is implemented                         (search_code)

`CodePrompts` calls the same service the tools call (`PromptSources`: `CodeSearchService` is one) and
writes its answers with `cluster.search.prompt_text`. Arguments arrive as strings from the client and
are validated here, bounded as the tools' are; an argument refused, or a lookup that finds nothing to
build on (an unknown repository, symbol or ref), is a SamespaceError that says which.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol, TypeVar

from pydantic import Field, ValidationError

from cluster.errors import ReadRefused, SamespaceError
from cluster.graph import GraphAnswer, GraphQuery, GraphTool, SymbolDefinition
from cluster.history import Change, ComparedSymbol, Comparison, WhatChanged
from cluster.index import SearchMode
from cluster.ingest import SourceLines
from cluster.search.prompt_text import PromptText, Span, explain_text, locate_text, review_text, since_text
from cluster.search.service import SearchResult
from cluster.types import Strict

__all__ = [
    "ChangesArgs",
    "CodePrompts",
    "ExplainArgs",
    "LocateArgs",
    "PromptSources",
    "ReviewArgs",
    "prompt_arguments",
]

MAX_REVIEW_SYMBOLS = 40
MAX_SPAN_LOOKUPS = 15  # symbols of a review looked up in the index for their lines
MAX_SOURCE_LINES = 80  # lines of a definition an explanation shows
MAX_CALLERS = 25
MAX_CHANGES = 40
MAX_HITS = 8


class PromptSources(Protocol):
    """What the prompts read: the code tools' service (`CodeSearchService`)."""

    async def compare(self, repo: str | None, base: str, head: str, limit: int) -> Comparison: ...

    async def what_changed(
        self, repo: str | None, since: str, until: str | None, path: str | None, limit: int
    ) -> WhatChanged: ...

    async def navigate(self, query: GraphQuery) -> GraphAnswer: ...

    async def read_code(self, repo: str, path: str, start_line: int, end_line: int) -> SourceLines: ...

    async def search_code(
        self,
        query: str,
        k: int,
        repo: str | None,
        path_prefix: str | None,
        language: str | None,
        rerank: bool = True,
        mode: SearchMode = "hybrid",
        changed_since: str | None = None,
    ) -> SearchResult: ...


class _Args(Strict):
    """A prompt's arguments (strings from the client): see `prompt_arguments`."""


class ReviewArgs(_Args):
    repo: str = Field(min_length=1, max_length=63, description="The indexed repository (see index_status).")
    base: str = Field(min_length=1, max_length=200, description="The older ref: the branch's base (main, a sha).")
    head: str = Field(default="HEAD", min_length=1, max_length=200, description="The newer ref (default HEAD).")


class ExplainArgs(_Args):
    symbol: str = Field(min_length=1, max_length=500, description="A bare or qualified name: parse_config, Cls.run.")
    repo: str | None = Field(default=None, max_length=300, description="The repo (or glob, group); None: every index.")


class ChangesArgs(_Args):
    path: str = Field(min_length=1, max_length=1000, description="A folder or file, as in search hits.")
    since: str = Field(min_length=1, max_length=200, description="A date, a duration back (7d) or a ref.")
    repo: str | None = Field(default=None, max_length=300, description="The repo (or glob, group); None: every index.")


class LocateArgs(_Args):
    behaviour: str = Field(min_length=1, max_length=2000, description="What the code does, in a few words.")
    repo: str | None = Field(default=None, max_length=300, description="The repo (or glob, group); None: every index.")


ArgsT = TypeVar("ArgsT", bound=_Args)


def prompt_arguments(model: type[ArgsT], values: Mapping[str, Any]) -> ArgsT:
    """`values` as `model`, each string trimmed and an optional one left empty (or None) taking its
    default; SamespaceError naming each argument refused and why."""
    trimmed = {name: value.strip() if isinstance(value, str) else value for name, value in values.items()}
    given = {
        name: value
        for name, value in trimmed.items()
        if value not in ("", None) or (name in model.model_fields and model.model_fields[name].is_required())
    }
    try:
        return model.model_validate(given)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
        raise SamespaceError(f"invalid prompt arguments: {problems}") from None


class CodePrompts:
    """The prompts over the code tools' service; each returns its brief with the citations in it."""

    def __init__(self, sources: PromptSources) -> None:
        self._sources = sources

    async def review_changes(self, args: ReviewArgs) -> PromptText:
        comparison = await self._sources.compare(args.repo, args.base, args.head, MAX_REVIEW_SYMBOLS)
        looked_up = [item for item in comparison.items if item.change is not Change.REMOVED][:MAX_SPAN_LOOKUPS]
        found = await asyncio.gather(*(self._span(comparison.repo, item) for item in looked_up))
        spans = {(item.path, item.symbol): span for item, span in zip(looked_up, found, strict=True) if span}
        return review_text(comparison, args.base, args.head, spans)

    async def explain_symbol(self, args: ExplainArgs) -> PromptText:
        found = await self._sources.navigate(GraphQuery(tool=GraphTool.DEFINITION, symbol=args.symbol, repo=args.repo))
        definitions = found.definitions or found.candidates
        if not definitions:
            scope = f"repo {args.repo!r}" if args.repo else "the indexes"
            note = f" ({found.note})" if found.note else ""
            raise SamespaceError(f"no definition of {args.symbol!r} in {scope}{note}")
        target, others = definitions[0], definitions[1:6]
        callers = await self._sources.navigate(
            GraphQuery(
                tool=GraphTool.CALLERS, symbol=args.symbol, repo=target.repo, path=target.path, limit=MAX_CALLERS
            )
        )
        return explain_text(args.symbol, target, await self._source(target), callers, others)

    async def changes_since(self, args: ChangesArgs) -> PromptText:
        answer = await self._sources.what_changed(args.repo, args.since, None, args.path, MAX_CHANGES)
        return since_text(answer, args.path)

    async def find_behaviour(self, args: LocateArgs) -> PromptText:
        result = await self._sources.search_code(args.behaviour, MAX_HITS, args.repo, None, None)
        if not result.hits:
            scope = f"repo {args.repo!r}" if args.repo else "the indexes"
            raise SamespaceError(f"nothing in {scope} matches {args.behaviour[:200]!r}: try other words or grep_code")
        return locate_text(args.behaviour, result)

    async def _span(self, repo: str, item: ComparedSymbol) -> Span | None:
        """The lines of a changed symbol in the serving index (None: the index does not hold it)."""
        query = GraphQuery(tool=GraphTool.DEFINITION, symbol=item.symbol, repo=repo, path=item.path)
        try:
            answer = await self._sources.navigate(query)
        except SamespaceError:
            return None
        spans = [(d.line, d.end_line) for d in answer.definitions if d.path == item.path]
        return spans[0] if len(spans) == 1 else None

    async def _source(self, definition: SymbolDefinition) -> SourceLines | None:
        """The definition's first lines (None: the file cannot be read now, e.g. it moved since)."""
        end = min(definition.end_line, definition.line + MAX_SOURCE_LINES - 1)
        try:
            return await self._sources.read_code(definition.repo, definition.path, definition.line, end)
        except ReadRefused:
            return None
