"""The prompts: each brief is built from the tools' answers, cites path:start-end for every piece of
evidence, ends with the instruction naming the tools, and stays within its size; arguments are
checked as the tools check theirs, and a lookup with nothing to build on says which."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cluster.errors import IndexNotFound, ReadRefused, SamespaceError
from cluster.graph import GraphAnswer, GraphItem, GraphQuery, GraphTool, SymbolDefinition
from cluster.history import Change, ComparedSymbol, Comparison, HistoryItem, LineRange, WhatChanged
from cluster.ingest import SourceLines
from cluster.search import (
    ChangesArgs,
    CodeHit,
    CodePrompts,
    ExplainArgs,
    LocateArgs,
    ReviewArgs,
    SearchResult,
    prompt_arguments,
)
from cluster.search.prompt_text import MAX_PROMPT_CHARS, cite, locate_text

TAX = SymbolDefinition(
    repo="shop",
    commit="c1",
    path="billing/tax.py",
    line=3,
    end_line=6,
    symbol="tax",
    qualified="billing.tax.tax",
    kind="function",
    language="python",
)


class Sources:
    """The code tools' service as the prompts call it (`PromptSources`), answering from fixed answers."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.definitions: dict[tuple[str, str | None], list[SymbolDefinition]] = {("tax", None): [TAX]}

    async def compare(self, repo: str | None, base: str, head: str, limit: int) -> Comparison:
        self.calls.append(("compare", (repo, base, head, limit)))
        if repo != "shop":
            raise IndexNotFound(str(repo), ["shop"])
        items = [
            ComparedSymbol(path="billing/tax.py", symbol="tax", kind="function", change=Change.MODIFIED, diff="-a\n+b"),
            ComparedSymbol(path="billing/old.py", symbol="gone", kind="function", change=Change.REMOVED, diff="-x"),
        ]
        return Comparison(repo="shop", base="b" * 40, head="h" * 40, items=items, files=["billing/tax.py"])

    async def what_changed(
        self, repo: str | None, since: str, until: str | None, path: str | None, limit: int
    ) -> WhatChanged:
        self.calls.append(("what_changed", (repo, since, path, limit)))
        item = HistoryItem(
            repo="shop",
            path="billing/tax.py",
            symbol="tax",
            kind="function",
            change=Change.MODIFIED,
            commit="f" * 40,
            date="2026-03-01T10:00:00Z",
            author="t",
            subject="tax rounds up",
            lines=[LineRange(start=4, end=5)],
        )
        return WhatChanged(since=since, items=[item] if path == "billing" else [])

    async def navigate(self, query: GraphQuery) -> GraphAnswer:
        self.calls.append(("navigate", (query.tool, query.symbol, query.path)))
        if query.tool is GraphTool.DEFINITION:
            found = self.definitions.get((query.symbol, query.path), [])
            return GraphAnswer(symbol=query.symbol, definitions=found, note=None if found else "no such symbol")
        site = GraphItem(repo="shop", path="reports/daily.py", line=11, symbol="run", confidence=1.0, ambiguous=False)
        return GraphAnswer(symbol=query.symbol, definitions=[TAX], items=[site])

    async def read_code(self, repo: str, path: str, start_line: int, end_line: int) -> SourceLines:
        self.calls.append(("read_code", (repo, path, start_line, end_line)))
        text = "def tax(amount):\n    return amount * 2"
        return SourceLines(
            repo=repo, path=path, start_line=start_line, end_line=end_line, total_lines=9, truncated=False, text=text
        )

    async def search_code(
        self, query: str, k: int, repo: str | None, path_prefix: str | None, language: str | None, *_: Any
    ) -> SearchResult:
        self.calls.append(("search_code", (query, k, repo)))
        hit = CodeHit(
            repo="shop",
            path="billing/tax.py",
            start_line=3,
            end_line=6,
            symbol="tax",
            kind="function",
            language="python",
            score=0.9,
            snippet="def tax(amount):\n    return amount * 2",
            build="shop__b1",
        )
        return SearchResult(query=query, hits=[hit] if "tax" in query else [], mode="hybrid", encoded_by="m")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_review_cites_each_changed_symbol_the_index_holds_at_its_lines() -> None:
    sources = Sources()
    sources.definitions[("tax", "billing/tax.py")] = [TAX]
    brief = run(CodePrompts(sources).review_changes(ReviewArgs(repo="shop", base="main")))
    assert brief.citations == ["billing/tax.py:3-6"]
    assert "- billing/tax.py:3-6 tax (function): modified" in brief.text
    assert "- billing/old.py gone (function): removed" in brief.text and "+b" in brief.text
    assert ("compare", ("shop", "main", "HEAD", 40)) in sources.calls
    assert ("navigate", (GraphTool.DEFINITION, "gone", "billing/old.py")) not in sources.calls  # removed: not looked up
    assert "Cite each finding as path:start-end" in brief.text and "compare" in brief.text.splitlines()[-1]


def test_an_explanation_shows_the_code_and_cites_every_caller() -> None:
    sources = Sources()
    brief = run(CodePrompts(sources).explain_symbol(ExplainArgs(symbol="tax")))
    assert brief.citations == ["billing/tax.py:3-6", "reports/daily.py:11-11"]
    assert "def tax(amount):" in brief.text and "- reports/daily.py:11-11 in run" in brief.text
    assert ("read_code", ("shop", "billing/tax.py", 3, 6)) in sources.calls
    assert ("navigate", (GraphTool.CALLERS, "tax", "billing/tax.py")) in sources.calls


def test_an_unknown_symbol_is_a_refusal_that_names_it_and_a_refused_read_drops_only_the_code() -> None:
    sources = Sources()
    with pytest.raises(SamespaceError, match="no definition of 'nope' in repo 'shop' \\(no such symbol\\)"):
        run(CodePrompts(sources).explain_symbol(ExplainArgs(symbol="nope", repo="shop")))

    async def refused(*_: Any) -> SourceLines:
        raise ReadRefused("shop", "billing/tax.py", "a symlink now stands on its path: not followed")

    sources.read_code = refused  # type: ignore[method-assign]
    brief = run(CodePrompts(sources).explain_symbol(ExplainArgs(symbol="tax")))
    assert "def tax(amount)" not in brief.text and "reports/daily.py:11-11" in brief.text


def test_what_changed_cites_the_changed_lines_and_the_commit() -> None:
    brief = run(CodePrompts(Sources()).changes_since(ChangesArgs(path="billing", since="7d")))
    assert brief.citations == ["billing/tax.py:4-5"]
    assert f"modified in {'f' * 12} 2026-03-01 by t: tax rounds up" in brief.text
    empty = run(CodePrompts(Sources()).changes_since(ChangesArgs(path="docs", since="7d")))
    assert empty.citations == [] and "Nothing under that path changed" in empty.text


def test_finding_a_behaviour_cites_the_hits_and_nothing_found_is_a_refusal() -> None:
    brief = run(CodePrompts(Sources()).find_behaviour(LocateArgs(behaviour="tax on an amount")))
    assert brief.citations == ["billing/tax.py:3-6"] and "return amount * 2" in brief.text
    with pytest.raises(SamespaceError, match="nothing in the indexes matches 'shipping'"):
        run(CodePrompts(Sources()).find_behaviour(LocateArgs(behaviour="shipping")))


def test_an_unknown_repo_reaches_the_caller_as_the_services_refusal() -> None:
    with pytest.raises(IndexNotFound, match="unknown repo 'nope'"):
        run(CodePrompts(Sources()).review_changes(ReviewArgs(repo="nope", base="main")))


def test_arguments_are_trimmed_an_empty_optional_one_takes_its_default_and_a_bad_one_is_named() -> None:
    args = prompt_arguments(ReviewArgs, {"repo": " shop ", "base": "main", "head": ""})
    assert (args.repo, args.base, args.head) == ("shop", "main", "HEAD")
    assert prompt_arguments(ExplainArgs, {"symbol": "tax", "repo": None}).repo is None
    with pytest.raises(SamespaceError, match="symbol: String should have at most 500 characters"):
        prompt_arguments(ExplainArgs, {"symbol": "x" * 501})
    with pytest.raises(SamespaceError, match="base: String should have at least 1 character"):
        prompt_arguments(ReviewArgs, {"repo": "shop", "base": "  "})
    with pytest.raises(SamespaceError, match="stray: Extra inputs are not permitted"):
        prompt_arguments(LocateArgs, {"behaviour": "tax", "stray": "x"})


def test_a_brief_is_cut_to_its_size_with_its_fence_closed_and_the_instruction_kept() -> None:
    hits = [
        CodeHit(
            repo="shop",
            path=f"f{i}.py",
            start_line=1,
            end_line=40,
            symbol=None,
            kind="window",
            language="python",
            score=0.5,
            snippet="\n".join(["x = 1" * 40] * 40),
            build="shop__b1",
        )
        for i in range(30)
    ]
    brief = locate_text("x", SearchResult(query="x", hits=hits, mode="hybrid", encoded_by="m"))
    assert len(brief.text) <= MAX_PROMPT_CHARS
    assert "(cut: the rest did not fit" in brief.text and brief.text.rstrip().endswith("read_code and callers.")
    assert sum(line.startswith("```") for line in brief.text.splitlines()) % 2 == 0
    assert brief.citations and all(c in brief.text for c in brief.citations) and len(brief.citations) < 30
    assert cite("a.py", 3) == "a.py:3-3"
