"""grep_code: exact and regex search over the indexed files (`cluster.search.greps`)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from cluster.grep import MAX_GREP_LIMIT, MAX_PATTERN_CHARS, GrepRequest, GrepResult
from cluster.ingest import MAX_GLOB_CHARS
from cluster.search import CodeSearchService
from serve_apps.mcp._calls import (
    CursorArg,
    ExcludeArg,
    KindArg,
    ScopeArg,
    TestsArg,
    ToolCalls,
    _tool_call,
    controls_of,
)


def add_grep_tool(mcp: MCPServer, service: CodeSearchService, calls: ToolCalls | None = None) -> None:
    @mcp.tool()
    async def grep_code(
        pattern: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_PATTERN_CHARS,
                description="A regex (RE2 syntax: no look-around or back-references) or, with regex=false, "
                "a literal string. Matched within each line, as ripgrep does.",
            ),
        ],
        repo: ScopeArg = None,
        regex: Annotated[bool, Field(description="false: the pattern is a literal string.")] = True,
        case_sensitive: Annotated[bool, Field(description="false: ignore case.")] = True,
        path_glob: Annotated[
            str | None,
            Field(
                max_length=MAX_GLOB_CHARS,
                description="Only files matching: 'src/**/*.py', '*.ts' (no '/': a file or folder name, "
                "anywhere; a glob matching a folder takes all of it).",
            ),
        ] = None,
        exclude: ExcludeArg = None,
        kind: KindArg = None,
        tests: TestsArg = "include",
        limit: Annotated[int, Field(ge=1, le=MAX_GREP_LIMIT, description="Most matching lines to return.")] = 100,
        context_lines: Annotated[int, Field(ge=0, le=10, description="Lines of context above and below.")] = 0,
        cursor: CursorArg = None,
    ) -> GrepResult:
        """Exact and regex search over the indexed files: every matching line with its path, line, column,
        text, commit and enclosing symbol. Searches the files the index holds (never secrets, ignored or
        generated files); a branch index searches that branch's files. `kind` keeps the lines of that kind of
        chunk (the smallest chunk holding the line). A long answer is paged: pass back `cursor`."""
        request = GrepRequest(
            pattern=pattern,
            repo=repo,
            regex=regex,
            case_sensitive=case_sensitive,
            path_glob=path_glob,
            controls=controls_of(exclude, kind, tests),
            limit=limit,
            context_lines=context_lines,
            cursor=cursor,
        )
        return await _tool_call("grep_code", service.grep_code(request), calls, scope=repo, query=pattern)
