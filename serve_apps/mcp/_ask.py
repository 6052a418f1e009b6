"""The ask path wired to Ray: the code tools as evidence, the chat roles through their dispatchers.

`cluster/ask/pipeline.py` holds the logic; this module only adapts. `RepoTools` turns the code-search
service's results into evidence blocks (the same implementations the MCP tools call), and
`DispatchedChatRole` is a chat role that never raises: a failed call comes back as nothing.
`ask_events` is an ask as server-sent events: its progress as it happens, then the result.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

from actors.metrics import record_ask
from cluster.ask.ask_progress import AskProgress, ProgressCallback
from cluster.ask.evidence import EvidenceBlock
from cluster.ask.pipeline import AskPipeline, AskRequest, AskResult
from cluster.ask.rlm import ChatOutcome
from cluster.cloud.request_tag import DEFAULT_PROJECT
from cluster.errors import NoProviderLeft, SamespaceError, original_error
from cluster.roles import Role
from cluster.search import CodeHit, CodeSearchService
from cluster.search.models import CodeEntry, FileHit, RepoOverview, SymbolHit, snippet
from cluster.settings import SamespaceSettings

log = logging.getLogger("samespace.ask")

CONTEXT_WINDOW_TIMEOUT_S = 10.0
SSE_KEEPALIVE_S = 15.0  # a comment line on a quiet stream, so no proxy in between closes it


class DispatchedChatRole:
    """`rlm` or `code-assistant` through its dispatcher actor. `reserve=False` keeps the cloud
    reserve out (the RLM's default `local-only` fallback mode)."""

    def __init__(self, dispatcher: Any, role: Role, *, reserve: bool, project: str = DEFAULT_PROJECT) -> None:
        self._dispatcher = dispatcher
        self._role = role
        self._reserve = reserve
        self._project = project

    def for_project(self, project: str) -> DispatchedChatRole:
        return DispatchedChatRole(self._dispatcher, self._role, reserve=self._reserve, project=project)

    async def complete(self, request: dict[str, Any], timeout_s: float) -> ChatOutcome:
        call = self._dispatcher.chat.remote(project=self._project, reserve=self._reserve, **request)
        try:
            result, provider = await asyncio.wait_for(call, timeout_s)
        except TimeoutError:
            return self._nothing(f"no answer in {timeout_s:.0f} s")
        except NoProviderLeft as exc:
            return self._nothing(f"no {self._role.value} provider answered: {'; '.join(exc.reasons)[:300]}")
        except Exception as exc:  # noqa: BLE001 - null on error: the caller falls back (DESIGN §9)
            return self._nothing(type(exc).__name__)
        return ChatOutcome(result, provider)

    async def context_window(self) -> int | None:
        try:
            window: int | None = await asyncio.wait_for(
                self._dispatcher.context_window.remote(self._reserve), CONTEXT_WINDOW_TIMEOUT_S
            )
        except Exception as exc:  # noqa: BLE001 - unknown window → the safe default
            log.info("%s: context window unknown (%s)", self._role.value, type(exc).__name__)
            return None
        return window

    def _nothing(self, why: str) -> ChatOutcome:
        log.warning("%s: %s", self._role.value, why)
        return ChatOutcome(None, error=why)


def place_block(found: CodeEntry | CodeHit | SymbolHit, tool: str, text: str) -> EvidenceBlock:
    """A chunk a tool found, as evidence: its place and the head of `text`."""
    return EvidenceBlock(
        tool=tool,
        repo=found.repo,
        path=found.path,
        start_line=found.start_line,
        end_line=found.end_line,
        symbol=found.symbol,
        kind=found.kind,
        text=snippet(text),
    )


def files_block(files: list[FileHit], query: str) -> EvidenceBlock:
    lines = []
    for hit in files:
        lines.append(f"{hit.path} ({hit.language}, repo {hit.repo}), {hit.symbols_total} definitions:")
        lines += [f"  {hit.path}:{s.start_line}-{s.end_line} {s.symbol} ({s.kind})" for s in hit.symbols]
    return EvidenceBlock(tool="search_files", kind="file list", text=f"files matching {query!r}:\n" + "\n".join(lines))


def overview_block(overview: RepoOverview) -> EvidenceBlock:
    parts = [
        f"repository {overview.repo}: {overview.files} files, {overview.chunks} chunks",
        "languages: " + ", ".join(f"{k} {v}" for k, v in overview.languages.items()),
        "folders: " + ", ".join(f"{k} {v}" for k, v in overview.top_dirs.items()),
        "main types: " + ", ".join(f"{t.symbol} ({t.path}:{t.line})" for t in overview.top_types),
        "most referenced: " + ", ".join(f"{r.symbol} ({r.path}:{r.line})" for r in overview.most_referenced),
    ]
    if overview.readme:
        parts.append("README:\n" + overview.readme)
    return EvidenceBlock(tool="repo_overview", repo=overview.repo, kind="overview", text="\n".join(parts))


class RepoTools:
    """The RLM's tools over the code-search service, scoped to the asked repo (None = every index).
    A repo the model names is ignored when the ask is scoped (the peer's model invented project ids)."""

    def __init__(self, service: CodeSearchService, repo: str | None) -> None:
        self._service = service
        self._repo = repo

    async def search_code(self, query: str, limit: int, rerank: bool) -> list[EvidenceBlock]:
        result = await self._service.search_code(query, limit, self._repo, None, None, rerank=rerank)
        return [place_block(h, "search_code", h.snippet) for h in result.hits]

    async def search_symbols(self, query: str, limit: int) -> list[EvidenceBlock]:
        result = await self._service.search_symbols(query, self._repo, limit)
        return [place_block(h, "search_symbols", h.snippet) for h in result.hits]

    async def search_files(self, query: str, limit: int) -> list[EvidenceBlock]:
        result = await self._service.search_files(query, self._repo, limit)
        return [files_block(result.files, query)] if result.files else []

    async def read_range(self, repo: str | None, path: str, start_line: int, end_line: int) -> list[EvidenceBlock]:
        where = self._repo or repo
        if where is None:
            raise ValueError("read_range needs a repo: name one (see the evidence headers)")
        lines = await self._service.read_code(where, path, start_line, end_line)
        return [
            EvidenceBlock(
                tool="read_range",
                repo=lines.repo,
                path=lines.path,
                start_line=lines.start_line,
                end_line=lines.end_line,
                kind="lines",
                text=lines.text,
            )
        ]

    async def neighbors(self, repo: str | None, path: str, line: int, count: int) -> list[EvidenceBlock]:
        found = await self._service.neighbors(self._repo or repo, path, line, count)
        return [place_block(e, "neighbors", e.text) for e in [*found.before, found.anchor, *found.after]]

    async def repo_overview(self, repo: str | None) -> list[EvidenceBlock]:
        return [overview_block(await self._service.repo_overview(self._repo or repo))]

    async def search_commits(self, query: str, limit: int) -> list[EvidenceBlock]:
        found = await self._service.search_commits(query, self._repo, None, limit)
        lines = [
            f"{h.commit} {h.date} {h.author} ({h.repo}): {h.message[:400]}\n  changed: "
            + (", ".join(f"{c.path}:{c.symbol} ({c.change.value})" for c in h.changed[:10]) or ", ".join(h.files[:10]))
            for h in found.hits
        ]
        return [_history_block("search_commits", f"commits matching {query!r}", lines)] if lines else []

    async def symbol_history(self, symbol: str, path: str | None, limit: int) -> list[EvidenceBlock]:
        found = await self._service.symbol_history(self._repo, symbol, path, limit)
        if found.candidates:
            return [_history_block("symbol_history", f"{symbol!r} names several symbols", found.candidates)]
        lines = [
            f"{c.commit} {c.date} {c.author}: {c.change.value} {c.path}:{c.symbol} "
            + ",".join(f"{r.start}-{r.end}" for r in c.lines)
            + f"\n  {c.message[:400]}"
            for c in found.commits
        ]
        return [_history_block("symbol_history", f"the history of {symbol!r}", lines)] if lines else []

    async def what_changed(self, since: str, path: str | None, limit: int) -> list[EvidenceBlock]:
        found = await self._service.what_changed(self._repo, since, None, path, limit)
        lines = [
            f"{i.commit[:12]} {i.date} {i.author}: {i.change.value} {i.path}:{i.symbol} ({i.subject[:120]})"
            for i in found.items
        ]
        return [_history_block("what_changed", f"what changed since {since}", lines)] if lines else []


def _history_block(tool: str, title: str, lines: list[str]) -> EvidenceBlock:
    """Commits as evidence: unlocated (no file lines), cited by their shas."""
    return EvidenceBlock(tool=tool, kind="history", text=f"{title}:\n" + "\n".join(lines))


class AskService:
    """`ask_code` for the MCP tool and `POST /rlm/ask`: one pipeline per ask, scoped to its repo."""

    def __init__(self, service: CodeSearchService, settings: SamespaceSettings, rlm: Any, assistant: Any) -> None:
        self._service = service
        self.settings = settings  # the replica's: its tool calls' audit log and quotas (_calls.py)
        self._settings = settings.rlm
        self._rlm = DispatchedChatRole(rlm, Role.RLM, reserve=settings.rlm.fallback_mode == "local-first")
        self._assistant = DispatchedChatRole(assistant, Role.CODE_ASSISTANT, reserve=True)

    async def ask(self, request: AskRequest, progress: ProgressCallback | None = None) -> AskResult:
        """The answer; `progress` hears each step as it happens (`cluster/ask/ask_progress.py`). A `repo` scope
        over the `limits` caps is refused (LimitExceeded) before anything is asked."""
        self._service.check_scope(request.repo)
        project = request.repo or DEFAULT_PROJECT
        pipeline = AskPipeline(
            RepoTools(self._service, request.repo),
            self._rlm.for_project(project),
            self._assistant.for_project(project),
            self._settings,
            time.monotonic,
        )
        result = await pipeline.ask(request, progress)
        record_ask(result)  # its mode, rounds and fallbacks as metrics (actors/metrics.py); never raises
        return result


def sse_event(event: str, data: str) -> str:
    """One server-sent event: its name and one line of JSON data."""
    return f"event: {event}\ndata: {data}\n\n"


async def ask_events(
    asker: AskService,
    request: AskRequest,
    run: Callable[[Awaitable[AskResult]], Coroutine[Any, Any, AskResult]] | None = None,
) -> AsyncIterator[str]:
    """The ask as server-sent events: `progress` events (AskProgress JSON) as the steps happen, then one
    `result` (AskResult JSON) or one `error`, then the end. A client that goes away cancels the ask.
    `run` wraps the ask (the caller's checks and audit line: `_calls.audited_call`)."""
    queue: asyncio.Queue[AskProgress | None] = asyncio.Queue()

    async def on_progress(event: AskProgress) -> None:
        queue.put_nowait(event)

    ask = asker.ask(request, on_progress)
    task = asyncio.create_task(run(ask) if run is not None else ask)
    task.add_done_callback(lambda _: queue.put_nowait(None))  # after every event the ask emitted
    try:
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), SSE_KEEPALIVE_S)
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if event is None:
                break
            yield sse_event("progress", event.model_dump_json())
        try:
            result = task.result()
        except Exception as exc:  # the stream's own error event: logged, no traceback reaches the client
            log.exception("ask failed")
            failed = f"the ask failed ({type(exc).__name__})"
            message = str(original_error(exc)) if isinstance(exc, SamespaceError) else failed
            yield sse_event("error", json.dumps({"error": message}))
        else:
            yield sse_event("result", result.model_dump_json())
    finally:
        task.cancel()
