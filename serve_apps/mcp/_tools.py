"""The MCP server of a replica: every tool, its arguments as the client sees them, and how a tool's
failure reaches the client (a named error, never a traceback).

The tools call the plain services (`CodeSearchService`, `AskService`, `IndexService`); each call is
counted and timed per tool (`_tool_call`). Built inside each replica: MCP server objects do not pickle.
"""

from __future__ import annotations

import functools
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from cluster.ask.ask_progress import AskProgress, ProgressCallback
from cluster.ask.pipeline import AskRequest, AskResult
from cluster.graph import GraphAnswer, GraphQuery, GraphTool, ImpactAnswer
from cluster.history import CommitSearchResult, Comparison, SymbolHistory, WhatChanged
from cluster.index import SearchMode
from cluster.ingest.languages import KNOWN_LANGUAGES
from cluster.ingest.source import SourceLines
from cluster.search import (
    DEFAULT_SEARCH_TESTS,
    CodeSearchService,
    FileSearchResult,
    IndexStatus,
    SearchResult,
    SymbolSearchResult,
)
from cluster.search.models import Neighbors, RepoOverview
from cluster.sync import BuildReport
from cluster.types import Strict
from serve_apps.index_service import IndexService
from serve_apps.mcp._annotations import AnnotatedMCPServer
from serve_apps.mcp._ask import AskService
from serve_apps.mcp._calls import (
    CursorArg,
    ExcludeArg,
    KindArg,
    RepoArg,
    ScopeArg,
    TestsArg,
    ToolCalls,
    _tool_call,
    controls_of,
)
from serve_apps.mcp._grep_tool import add_grep_tool
from serve_apps.mcp._prompts import add_prompts
from serve_apps.mcp._resources import ResourceFeed, add_resources

SERVER_NAME = "samespace"
MAX_K = 50
MAX_QUERY_CHARS = 2000

INSTRUCTIONS = (
    "samespace answers questions about indexed code bases. ask_code answers a question with citations "
    "(path:start-end), looking again with a retrieval model when one serves. Use search_code to find code "
    "by meaning (natural language or code), grep_code for exact text or a regex (every line that matches, as "
    "ripgrep finds them), search_symbols to find a definition by name, search_files to "
    "find files by path, neighbors for the chunks around a hit, read_code to read exact lines, "
    "repo_overview for a repository's shape, find_definition and find_references for where a symbol is defined "
    "and used, callers and callees to follow calls, impact for what a change to a symbol reaches (callers, "
    "files, tests), what_changed, symbol_history, search_commits and compare for what changed, when and why, "
    "and index_status to see which repositories are indexed and how "
    "stale each is. index_repository indexes a folder (or a git ref of it) and keeps it fresh, refresh_index "
    "reindexes one now, remove_index drops one. search_code, search_symbols and grep_code take exclude globs, "
    "kind and tests (search_code leaves tests out unless asked) and page with a cursor. The indexes, their "
    "status and their files are also resources (samespace://indexes), and the prompts review_changes, "
    "explain_symbol, changes_since and find_behaviour start common tasks with citations."
)


class RemovedIndex(Strict):
    index: str
    builds: list[str] = Field(description="The build collections dropped (none: it was registered, never built).")


def _wants_progress(ctx: Context) -> bool:
    """Whether the caller asked for progress notifications (its request carries a progress token)."""
    meta = ctx.request_context.meta or {}
    return bool(meta.get("progress_token") or meta.get("progressToken"))


def _ask_progress(ctx: Context) -> ProgressCallback:
    """An ask's steps as the caller's progress notifications: progress = the step (only increases),
    total once the ask is done, the step's message."""

    async def report(event: AskProgress) -> None:
        await ctx.report_progress(event.step, event.total, event.message)

    return report


def build_mcp_server(
    service: CodeSearchService,
    asker: AskService,
    indexes: IndexService | None = None,
    feed: ResourceFeed | None = None,
    calls: ToolCalls | None = None,
) -> MCPServer:
    """The MCP server of one replica: the code tools over `service`, `ask_code` over `asker`, the index
    tools when `indexes` is given, the resources and prompts; subscriptions are published by `feed`
    (one per replica, shared by its servers; a feed of its own when None). Every tool call goes through
    `calls` (scope, quota, audit: `_calls.py`); when None, the replica's own for the asker's settings
    (an asker that is no `AskService`, in tests: the scope check only)."""
    feed = feed if feed is not None else ResourceFeed(service)
    if calls is None:
        calls = ToolCalls.for_replica(asker.settings) if isinstance(asker, AskService) else ToolCalls()
    # WARNING: at INFO the SDK logs every stateless request ("Terminating session") through rich,
    # which cost more CPU than the request itself.
    mcp = AnnotatedMCPServer(  # every tool's title and hints: _annotations.py
        SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING", subscriptions=feed.bus
    )
    _add_search_tools(mcp, service, calls)
    add_grep_tool(mcp, service, calls)
    add_resources(mcp, service, feed)
    add_prompts(mcp, service)
    _add_ask_tool(mcp, asker, calls)
    _add_map_tools(mcp, service, calls)
    _add_graph_tools(mcp, service, calls)
    _add_history_tools(mcp, service, calls)
    if indexes is not None:
        _add_index_tools(mcp, indexes, calls)
    return mcp


def _add_search_tools(mcp: MCPServer, service: CodeSearchService, calls: ToolCalls) -> None:
    """search_code, read_code, index_status."""
    run = functools.partial(_tool_call, calls=calls)

    @mcp.tool()
    async def search_code(
        query: Annotated[
            str,
            Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to find: a description or code."),
        ],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="How many hits to return.")] = 10,
        repo: ScopeArg = None,
        path_prefix: Annotated[
            str | None, Field(description="Only files under this folder or this exact file, e.g. 'src/api'.")
        ] = None,
        language: Annotated[
            str | None, Field(description=f"Only this language, one of: {', '.join(sorted(KNOWN_LANGUAGES))}.")
        ] = None,
        mode: Annotated[
            SearchMode,
            Field(
                description="hybrid (meaning + exact words, fused; best), dense (meaning only), keyword (BM25 only)."
            ),
        ] = "hybrid",
        rerank: Annotated[
            bool, Field(description="Re-score the top candidates with the reranker when one serves.")
        ] = True,
        changed_since: Annotated[
            str | None,
            Field(
                max_length=200,
                description="Review mode: only files changed since this date, duration (7d) or ref (main~5).",
            ),
        ] = None,
        exclude: ExcludeArg = None,
        kind: KindArg = None,
        tests: TestsArg = DEFAULT_SEARCH_TESTS,
        cursor: CursorArg = None,
    ) -> SearchResult:
        """Code search over the indexed repositories: by meaning and by exact identifiers, fused.

        Returns the best-matching functions, classes, methods and doc sections with their repo, path,
        line range, symbol, language, score and a snippet. Follow up with read_code for full context.
        `exclude`, `kind` and `tests` narrow every leg of the search (test code is left out unless
        tests='include' or 'only'); `cursor` returns the next k hits of the same ranking.
        """
        controls = controls_of(exclude, kind, tests)
        call = service.search_code(
            query, k, repo, path_prefix, language, rerank, mode, changed_since, controls=controls, cursor=cursor
        )
        return await run("search_code", call, scope=repo, query=query)

    @mcp.tool()
    async def read_code(
        repo: Annotated[str, Field(min_length=1, description="Indexed repo name (see index_status).")],
        path: Annotated[str, Field(min_length=1, description="Repo-relative file path, as in search hits.")],
        start_line: Annotated[int, Field(ge=1, description="First line, 1-based.")],
        end_line: Annotated[int, Field(ge=1, description="Last line, inclusive.")],
    ) -> SourceLines:
        """Read exact source lines of a file in an indexed repository (bounded per call)."""
        if end_line < start_line:
            raise ToolError(f"end_line ({end_line}) must be >= start_line ({start_line})")
        return await run("read_code", service.read_code(repo, path, start_line, end_line), scope=repo)

    @mcp.tool()
    async def index_status(
        repo: Annotated[
            str | None, Field(description="Only indexes whose name matches: a name or a glob ('api*'); None = all.")
        ] = None,
    ) -> IndexStatus:
        """List indexed repositories: the folder each follows, the commit and branch (or ref) of its build,
        how stale it is (files changed, commits behind), encoder space, counts, and builds running."""
        return await run("index_status", service.index_status(repo), scope=repo)


def _add_ask_tool(mcp: MCPServer, asker: AskService, calls: ToolCalls) -> None:
    @mcp.tool()
    async def ask_code(
        question: Annotated[
            str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="A question about the code.")
        ],
        ctx: Context,
        repo: ScopeArg = None,
        deep: Annotated[
            bool, Field(description="Let the retrieval model look again before answering (slower, finds more).")
        ] = True,
    ) -> AskResult:
        """Answer a question about the indexed code, citing path:start-end for every claim.

        Returns the answer, its citations, and how it was produced (rounds, tools called, fallbacks
        taken, timings). Never fails for a model being down: it falls back to plain retrieval, then to
        a citations-only answer, and says so. With a progress token, reports each step as it happens:
        plan made, round n of N, each tool called, synthesis started, done.
        """
        progress = _ask_progress(ctx) if _wants_progress(ctx) else None
        call = asker.ask(AskRequest(question=question, repo=repo, deep=deep), progress)
        return await _tool_call("ask_code", call, calls, scope=repo, query=question)


SymbolArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=500,
        description="A bare or qualified name: parse_config, TaxTable.lookup, billing.tax.rate (:: reads as a dot).",
    ),
]
PathArg = Annotated[
    str | None,
    Field(max_length=1000, description="A file, folder or path tail that picks among definitions of the same name."),
]
DepthArg = Annotated[int, Field(ge=1, le=10, description="Calls to follow: 1 is direct callers (or callees) only.")]
LimitArg = Annotated[int, Field(ge=1, le=1000)]
ConfidenceArg = Annotated[
    float | None,
    Field(
        ge=0.0,
        le=1.0,
        description="Leave out, and do not follow, edges less sure than this: 1 only what the code names, "
        "0.5 (the default; impact 0.25) a guess between two, 0 every guess.",
    ),
]


def _add_graph_tools(mcp: MCPServer, service: CodeSearchService, calls: ToolCalls) -> None:
    """find_definition, find_references, callers, callees, impact: the code graph of each serving build."""

    async def navigate(
        tool: GraphTool,
        symbol: str,
        repo: str | None,
        path: str | None,
        depth: int | None = None,
        limit: int = 100,
        least: float | None = None,
    ) -> GraphAnswer:
        query = GraphQuery(
            tool=tool, symbol=symbol, repo=repo, path=path, depth=depth, limit=limit, min_confidence=least
        )
        return await _tool_call(tool.value, service.navigate(query), calls, scope=repo, query=symbol)

    @mcp.tool()
    async def find_definition(symbol: SymbolArg, repo: ScopeArg = None, path: PathArg = None) -> GraphAnswer:
        """Where a symbol is defined: file, lines, kind and qualified name of every definition it names."""
        return await navigate(GraphTool.DEFINITION, symbol, repo, path)

    @mcp.tool()
    async def find_references(
        symbol: SymbolArg,
        repo: ScopeArg = None,
        path: PathArg = None,
        limit: LimitArg = 100,
        min_confidence: ConfidenceArg = None,
    ) -> GraphAnswer:
        """Every place that uses a symbol (calls, mentions, imports), resolved through imports, aliases and
        classes; a site that may reach another definition too says so (ambiguous, confidence below 1)."""
        return await navigate(GraphTool.REFERENCES, symbol, repo, path, limit=limit, least=min_confidence)

    @mcp.tool()
    async def callers(
        symbol: SymbolArg,
        repo: ScopeArg = None,
        path: PathArg = None,
        depth: DepthArg = 1,
        limit: LimitArg = 100,
        min_confidence: ConfidenceArg = None,
    ) -> GraphAnswer:
        """Who calls a symbol: each call site with the function it is in, then their callers up to `depth`.
        An ambiguous symbol is answered with its candidates: ask again with a path or a qualified name."""
        return await navigate(GraphTool.CALLERS, symbol, repo, path, depth, limit, min_confidence)

    @mcp.tool()
    async def callees(
        symbol: SymbolArg,
        repo: ScopeArg = None,
        path: PathArg = None,
        depth: DepthArg = 1,
        limit: LimitArg = 100,
        min_confidence: ConfidenceArg = None,
    ) -> GraphAnswer:
        """What a symbol calls: each call site in it and the definition it reaches (none: outside the
        repository), then what those call, up to `depth`."""
        return await navigate(GraphTool.CALLEES, symbol, repo, path, depth, limit, min_confidence)

    @mcp.tool()
    async def impact(
        symbol: SymbolArg,
        repo: ScopeArg = None,
        path: PathArg = None,
        depth: DepthArg = 3,
        limit: LimitArg = 200,
        min_confidence: ConfidenceArg = None,
    ) -> ImpactAnswer:
        """What a change to a symbol reaches: its transitive callers up to `depth`, then the files, then the
        tests that reach it, nearest first."""
        answer = await navigate(GraphTool.IMPACT, symbol, repo, path, depth, limit, min_confidence)
        return answer if isinstance(answer, ImpactAnswer) else ImpactAnswer(**answer.model_dump())


WindowArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="A date (2026-11-01, or with a time), a duration back from now (7d, 12h, 2w) or a ref "
        "(a branch, a tag, a sha, main~3).",
    ),
]


def _add_history_tools(mcp: MCPServer, service: CodeSearchService, calls: ToolCalls) -> None:
    """what_changed, symbol_history, search_commits: each index's mined history (first parents)."""
    run = functools.partial(_tool_call, calls=calls)

    @mcp.tool()
    async def what_changed(
        since: WindowArg,
        repo: ScopeArg = None,
        until: Annotated[str | None, Field(max_length=200, description="The window's end (None: now).")] = None,
        path: Annotated[str | None, Field(max_length=1000, description="Only under this folder or file.")] = None,
        limit: LimitArg = 100,
    ) -> WhatChanged:
        """What changed since a date, a duration or a ref: each symbol added, modified, removed, renamed or
        moved, with its path, the commit (full sha), date, author and subject, newest first."""
        return await run("what_changed", service.what_changed(repo, since, until, path, limit), scope=repo)

    @mcp.tool()
    async def symbol_history(
        symbol: SymbolArg,
        repo: ScopeArg = None,
        path: PathArg = None,
        limit: LimitArg = 50,
    ) -> SymbolHistory:
        """The commits that changed a symbol, newest first: full sha, date, author, message and the lines it
        changed, followed through renames and moves. An ambiguous symbol is answered with its candidates."""
        return await run("symbol_history", service.symbol_history(repo, symbol, path, limit), scope=repo, query=symbol)

    @mcp.tool()
    async def search_commits(
        query: Annotated[
            str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What the change was about.")
        ],
        repo: ScopeArg = None,
        since: Annotated[
            str | None, Field(max_length=200, description="Only commits after this (see what_changed).")
        ] = None,
        k: Annotated[int, Field(ge=1, le=MAX_K, description="How many commits to return.")] = 10,
    ) -> CommitSearchResult:
        """Find commits by meaning and by words, over their messages and the names of the symbols they changed:
        each with its full sha, date, message and the symbols and files it changed."""
        return await run("search_commits", service.search_commits(query, repo, since, k), scope=repo, query=query)

    @mcp.tool()
    async def compare(
        base: Annotated[
            str,
            Field(min_length=1, max_length=200, description="The older ref (branch, tag, sha) or a build id."),
        ],
        head: Annotated[str, Field(min_length=1, max_length=200, description="The newer ref.")] = "HEAD",
        repo: RepoArg = None,
        limit: LimitArg = 100,
    ) -> Comparison:
        """The symbols that differ between two refs of an indexed repository: added, modified, removed, renamed
        or moved, each with its path and a short diff (capped)."""
        return await run("compare", service.compare(repo, base, head, limit), scope=repo)


def _add_map_tools(mcp: MCPServer, service: CodeSearchService, calls: ToolCalls) -> None:
    """search_symbols, search_files, neighbors, repo_overview: the code map of each serving build."""
    run = functools.partial(_tool_call, calls=calls)

    @mcp.tool()
    async def search_symbols(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=200,
                description="An identifier (parse_config, TaxTable.lookup) or a few words.",
            ),
        ],
        repo: ScopeArg = None,
        limit: Annotated[int, Field(ge=1, le=MAX_K)] = 10,
        exclude: ExcludeArg = None,
        kind: KindArg = None,
        tests: TestsArg = "include",
        cursor: CursorArg = None,
    ) -> SymbolSearchResult:
        """Find functions, classes, methods by name: exact names first, then prefixes, substrings, word overlap.
        `cursor` returns the next `limit` hits."""
        call = service.search_symbols(query, repo, limit, controls=controls_of(exclude, kind, tests), cursor=cursor)
        return await run("search_symbols", call, scope=repo, query=query)

    @mcp.tool()
    async def search_files(
        query: Annotated[str, Field(min_length=1, max_length=200, description="Part of a path or file name.")],
        repo: ScopeArg = None,
        limit: Annotated[int, Field(ge=1, le=MAX_K)] = 8,
    ) -> FileSearchResult:
        """Find indexed files by path, each with the definitions it holds."""
        return await run("search_files", service.search_files(query, repo, limit), scope=repo, query=query)

    @mcp.tool()
    async def neighbors(
        path: Annotated[str, Field(min_length=1, description="Repo-relative file path, as in search hits.")],
        line: Annotated[int, Field(ge=1, description="A line of the file (e.g. a hit's start_line).")],
        repo: RepoArg = None,
        count: Annotated[int, Field(ge=1, le=20, description="Chunks on each side.")] = 2,
    ) -> Neighbors:
        """The chunk at path:line and the chunks just above and below it in the same file."""
        return await run("neighbors", service.neighbors(repo, path, line, count), scope=repo)

    @mcp.tool()
    async def repo_overview(repo: RepoArg = None) -> RepoOverview:
        """A repository's shape: files, languages, folders, main types, most referenced functions, README."""
        return await run("repo_overview", service.repo_overview(repo), scope=repo)


def _add_index_tools(mcp: MCPServer, indexes: IndexService, calls: ToolCalls) -> None:
    run = functools.partial(_tool_call, calls=calls)

    @mcp.tool()
    async def index_repository(
        path: Annotated[str, Field(min_length=1, max_length=4096, description="Absolute path of the folder.")],
        ctx: Context,
        name: Annotated[
            str | None, Field(description="Index name; default: the folder's name (and '.<ref>' for a ref).")
        ] = None,
        ref: Annotated[
            str | None,
            Field(description="A branch, tag or commit to index from git's objects (the checkout is untouched)."),
        ] = None,
        full: Annotated[bool, Field(description="Embed everything again (default: only what changed).")] = False,
    ) -> BuildReport:
        """Index a repository folder (inside the server's allowed roots) and keep it fresh: it is
        re-indexed on its own when it changes. A name another folder (or ref) has taken is refused. Returns
        the Ray job id and build id at once; with a progress token, reports files, chunks, rate, ETA and
        phase until the build is done. A second request while the index builds joins that build."""
        call = indexes.index_repository(path, name, ref, full, confined=True)
        report: BuildReport = await run("index_repository", call, scope=name)
        return await indexes.follow(report, ctx.report_progress) if _wants_progress(ctx) else report

    @mcp.tool()
    async def refresh_index(
        name: Annotated[str, Field(min_length=1, max_length=63, description="An indexed repo (see index_status).")],
        ctx: Context,
        full: Annotated[bool, Field(description="Embed everything again.")] = False,
    ) -> BuildReport:
        """Re-index an index from the folder (and ref) it follows now (a folder inside the server's allowed
        roots); unchanged chunks keep their vectors."""
        report: BuildReport = await run("refresh_index", indexes.refresh(name, full, confined=True), scope=name)
        return await indexes.follow(report, ctx.report_progress) if _wants_progress(ctx) else report

    @mcp.tool()
    async def remove_index(
        name: Annotated[str, Field(min_length=1, max_length=63, description="An indexed repo (see index_status).")],
    ) -> RemovedIndex:
        """Remove an index whose folder lies inside the server's allowed roots: its searchable rows, its
        registration (no more syncing), a build in progress."""
        builds = await run("remove_index", indexes.remove(name, confined=True), scope=name)
        return RemovedIndex(index=name, builds=builds)
