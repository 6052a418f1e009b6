"""The RLM gathering loop (DESIGN §9): plan → tool calls → evidence → another round if asked → draft.

Pure asyncio over two injected parts: a chat client for the `rlm` role (which never raises: a
failed call is a `ChatOutcome` without a result) and the code tools. Every endpoint failure ends
the loop with what was gathered so far; a plan that never came back means the RLM is unavailable
and the caller answers from plain retrieval. Peer constants are named where used.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from cluster.ask.ask_progress import ProgressReporter
from cluster.ask.evidence import (
    MIN_OUTPUT_TOKENS,
    SAFETY_MARGIN_TOKENS,
    EvidenceBlock,
    EvidenceSet,
    estimate_tokens,
    evidence_budget_chars,
)
from cluster.ask.plan import PLAN_MAX_TOKENS, PLAN_TEMPERATURE, SubQuestion, parse_plan, plan_messages
from cluster.ask.tools import CodeTools, ToolCallError, ToolRequest, requests_from_reply, tool_schemas, validate_call
from cluster.cloud.openai_wire import ChatResult
from cluster.errors import SamespaceError, original_error
from cluster.settings import RlmSettings
from cluster.types import Clock

log = logging.getLogger("samespace.rlm")

ROUND_MAX_TOKENS = 2048  # peer
ROUND_TEMPERATURE = 0.3  # peer
NO_RESULTS = "no results"

LOOP_SYSTEM = """You gather evidence to answer a question about a code base; another model writes the answer.
Call the tools to find the code that answers the question: search_code (by meaning), search_symbols (by
name: use it for every identifier you see that matters), search_files, read_range, neighbors,
repo_overview. Evidence headers look like `### path:start-end symbol (kind)`.
When the evidence is enough, stop calling tools and reply with a short draft answer that cites
path:start-end for every claim. Never guess a path or a line number."""

GatherStatus = Literal["answered", "max-rounds", "deadline", "endpoint-error", "unavailable"]


@dataclass(frozen=True)
class ChatOutcome:
    """One chat call's result, or why there is none (the call never raises)."""

    result: ChatResult | None
    provider: str | None = None
    error: str | None = None


class ChatRole(Protocol):
    """A chat role (rlm, code-assistant) as the ask path sees it: null on error, never raising."""

    async def complete(self, request: dict[str, Any], timeout_s: float) -> ChatOutcome: ...

    async def context_window(self) -> int | None: ...


@dataclass
class GatherResult:
    status: GatherStatus
    evidence: EvidenceSet
    draft: str | None = None
    rounds: int = 0
    plan: list[SubQuestion] | None = None
    tools_called: list[str] = field(default_factory=list)
    rejected_calls: list[str] = field(default_factory=list)
    provider: str | None = None
    error: str | None = None
    context_tokens: int = 0


def fit_request(
    messages: list[dict[str, Any]], context_tokens: int, requested_max_tokens: int, keep_head: int = 2
) -> tuple[list[dict[str, Any]], int]:
    """Messages and max_tokens that fit the window (peer): max_tokens = min(requested, ctx − input −
    margin), floor MIN_OUTPUT_TOKENS; when even that does not fit, the oldest assistant turns and
    their tool answers are dropped (the first `keep_head` messages stay)."""
    messages = list(messages)

    def room() -> int:
        return context_tokens - _input_tokens(messages) - SAFETY_MARGIN_TOKENS

    while room() < MIN_OUTPUT_TOKENS:
        start = next((i for i in range(keep_head, len(messages)) if messages[i].get("role") == "assistant"), None)
        if start is None or start == len(messages) - 1:
            break
        end = start + 1
        while end < len(messages) and messages[end].get("role") == "tool":
            end += 1
        del messages[start:end]
    return messages, max(MIN_OUTPUT_TOKENS, min(requested_max_tokens, room()))


def _input_tokens(messages: Sequence[dict[str, Any]]) -> int:
    return estimate_tokens(len(json.dumps(messages, ensure_ascii=False)))


def reply_budget(context_tokens: int, requested: int) -> int:
    """The reply size budgeted for a window: a quarter of it, at least the floor, at most `requested`."""
    return min(requested, max(MIN_OUTPUT_TOKENS, context_tokens // 4))


class GatherLoop:
    """One ask's gathering. `deadline` is absolute (clock time); `repo` scopes path lookups."""

    def __init__(
        self,
        chat: ChatRole,
        tools: CodeTools,
        settings: RlmSettings,
        clock: Clock,
        *,
        progress: ProgressReporter | None = None,
    ) -> None:
        self._chat = chat
        self._tools = tools
        self._settings = settings
        self._clock = clock
        self._progress = progress or ProgressReporter(None)
        self._schemas = tool_schemas()

    async def run(
        self, question: str, seed: Sequence[EvidenceBlock], deadline: float, repo: str | None = None
    ) -> GatherResult:
        settings = self._settings
        context = await self._chat.context_window() or settings.default_context_tokens
        overhead = len(LOOP_SYSTEM) + len(question) + len(json.dumps(self._schemas)) + 200
        budget = evidence_budget_chars(
            context, overhead, reply_budget(context, ROUND_MAX_TOKENS), settings.max_evidence_chars
        )
        evidence = EvidenceSet(budget)
        seeded = evidence.add(seed)
        state = GatherResult(status="unavailable", evidence=evidence, context_tokens=context)

        # PLAN: one call; an endpoint failure here means the RLM is not there at all.
        plan_reply = await self._call(plan_messages(question), None, None, PLAN_MAX_TOKENS, PLAN_TEMPERATURE, deadline)
        if plan_reply.result is None:
            state.error = plan_reply.error
            return state
        state.provider = plan_reply.provider
        state.plan = parse_plan(plan_reply.result.content, question)
        subs = state.plan or [SubQuestion(question=question, tool="search_code", query=question[:80])]
        searches = "; ".join(f"{s.tool}({s.query!r})" for s in subs)
        log.info("rlm plan: %s", searches)
        made = "plan made" if state.plan else "no usable plan: the question itself is searched"
        await self._progress.emit("plan", f"{made}: {searches}", rounds=settings.max_rounds)

        first = f"Question: {question}\n\nEvidence so far:\n{evidence.render(seeded) or NO_RESULTS}"
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": LOOP_SYSTEM},
            {"role": "user", "content": first},
        ]
        planned = [validate_call(f"plan-{i}", sub.tool, {"query": sub.query}) for i, sub in enumerate(subs)]
        messages += await self._execute(planned, None, state, deadline, repo, 0)

        # ROUNDS: the model reads the evidence and asks for more, or drafts; the last round cannot call tools.
        state.status = "max-rounds"
        for number in range(1, settings.max_rounds + 1):
            if deadline - self._clock() < settings.min_round_s:
                state.status = "deadline"
                break
            last = number == settings.max_rounds
            what = "drafts from the evidence (last round)" if last else "reads the evidence"
            await self._progress.emit(
                "round",
                f"round {number} of {settings.max_rounds}: the retrieval model {what}",
                round=number,
                rounds=settings.max_rounds,
            )
            fitted, max_tokens = fit_request(messages, context, reply_budget(context, ROUND_MAX_TOKENS))
            reply = await self._call(
                fitted, self._schemas, "none" if last else "auto", max_tokens, ROUND_TEMPERATURE, deadline
            )
            state.rounds = number
            if reply.result is None:
                state.status, state.error = ("deadline" if self._clock() >= deadline else "endpoint-error"), reply.error
                break
            valid, rejected = requests_from_reply(reply.result.tool_calls, reply.result.content, number)
            log.info("rlm round %d: %d tool calls, %d rejected", number, len(valid), len(rejected))
            if last or not (valid or rejected):
                if last and (valid or rejected):
                    state.rejected_calls += [f"{c.label()}: last round" for c in valid]
                    state.rejected_calls += [f"{c.name}: last round" for c in rejected]
                state.draft = (reply.result.content or "").strip() or None
                state.status = "answered"
                break
            messages += await self._execute([*valid, *rejected], reply.result.content, state, deadline, repo, number)
        return state

    async def _call(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        tool_choice: str | None,
        max_tokens: int,
        temperature: float,
        deadline: float,
    ) -> ChatOutcome:
        request: dict[str, Any] = {"messages": messages, "max_tokens": max_tokens, "temperature": temperature}
        if tools is not None:
            request["tools"] = tools
            request["tool_choice"] = tool_choice
        remaining = deadline - self._clock()
        if remaining <= 0:
            return ChatOutcome(None, error="deadline")
        try:
            return await self._chat.complete(request, remaining)
        except Exception as exc:  # noqa: BLE001 - ChatRole never raises; if one does, it is still "nothing"
            return ChatOutcome(None, error=f"{type(exc).__name__}")

    async def _execute(
        self,
        calls: Sequence[ToolRequest | ToolCallError],
        content: str | None,
        state: GatherResult,
        deadline: float,
        repo: str | None,
        round_number: int,
    ) -> list[dict[str, Any]]:
        """Run the valid calls (≤ tool_concurrency at once, each raced against the deadline) and
        return the assistant turn plus one tool message per call, errors included. Each call that ran
        is reported as it ends (round 0: the planned searches)."""
        limiter = asyncio.Semaphore(self._settings.tool_concurrency)
        where = "planned search" if round_number == 0 else f"round {round_number}"

        async def one(call: ToolRequest | ToolCallError) -> str:
            if isinstance(call, ToolCallError):
                state.rejected_calls.append(f"{call.name}: {call.error}")
                return f"error: {call.error}"
            async with limiter:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    return "error: no time left"
                answer, outcome = await self._call_tool(call, state, repo, remaining)
            await self._progress.emit(
                "tool",
                f"{where}: {call.label()} → {outcome}",
                round=round_number,
                rounds=self._settings.max_rounds,
                tool=call.label(),
            )
            return answer

        answers = await asyncio.gather(*(one(call) for call in calls))
        assistant = {
            "role": "assistant",
            "content": content,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.args.model_dump_json(exclude_none=True)
                        if isinstance(call, ToolRequest)
                        else "{}",
                    },
                }
                for call in calls
            ],
        }
        tool_messages = [
            {"role": "tool", "tool_call_id": call.id, "content": answer}
            for call, answer in zip(calls, answers, strict=True)
        ]
        return [assistant, *tool_messages]

    async def _call_tool(
        self, call: ToolRequest, state: GatherResult, repo: str | None, remaining: float
    ) -> tuple[str, str]:
        """One call: the tool message the model reads, and its outcome in a few words for the client."""
        try:
            blocks = await asyncio.wait_for(self._run_tool(call, state.evidence, repo), remaining)
        except TimeoutError:
            return "error: timed out", "timed out"
        except Exception as exc:  # noqa: BLE001 - a failed tool is the model's to read, not ours to raise
            said = str(original_error(exc)) if isinstance(exc, SamespaceError) else str(exc)  # never Ray's traceback
            return f"error: {said[:300] or type(exc).__name__}", f"failed ({type(exc).__name__})"
        state.tools_called.append(call.label())
        admitted = state.evidence.add(blocks)
        if not blocks:
            return NO_RESULTS, NO_RESULTS
        rendered = state.evidence.render(admitted) or "(already in the evidence above)"
        return rendered, f"{len(blocks)} found, {len(admitted)} new"

    async def _run_tool(self, call: ToolRequest, evidence: EvidenceSet, repo: str | None) -> list[EvidenceBlock]:
        args: Any = call.args
        limit = self._settings.tool_k
        if call.name == "search_code":
            return await self._tools.search_code(args.query, limit, False)  # no reranker inside the loop (peer)
        if call.name == "search_symbols":
            return await self._tools.search_symbols(args.query, limit)
        if call.name == "search_files":
            return await self._tools.search_files(args.query, limit)
        if call.name == "repo_overview":
            return await self._tools.repo_overview(repo or args.repo)
        if call.name == "search_commits":
            return await self._tools.search_commits(args.query, limit)
        if call.name == "symbol_history":
            return await self._tools.symbol_history(args.symbol, args.path, limit)
        if call.name == "what_changed":
            return await self._tools.what_changed(args.since, args.path, limit * 4)
        where = repo or args.repo or evidence.repo_of(args.path)
        if call.name == "read_range":
            return await self._tools.read_range(where, args.path, args.start_line, args.end_line)
        return await self._tools.neighbors(where, args.path, args.line, args.count)
