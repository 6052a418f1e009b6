"""`ask_code`: plain retrieval → the RLM's gathering → synthesis with citations, and every fallback.

DESIGN §9: the gathering extends retrieval, it is never its precondition; every endpoint failure
returns nothing and the next step falls back — RLM down ⇒ answer from plain retrieval; synthesis
down ⇒ the RLM's draft, else a citations-only answer listing the best hits. Nothing here raises
into the caller: an ask always ends in an `AskResult` that says how it was produced. A caller that
passes a progress callback hears each step as it happens (`cluster/ask/ask_progress.py`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from cluster.ask.ask_progress import ProgressCallback, ProgressReporter
from cluster.ask.evidence import EvidenceBlock, EvidenceSet, citations_in, evidence_budget_chars
from cluster.ask.rlm import ChatRole, GatherLoop, GatherResult, fit_request, reply_budget
from cluster.ask.tools import CodeTools
from cluster.settings import RlmSettings
from cluster.types import Clock, Strict

log = logging.getLogger("samespace.ask")

ANSWER_MAX_TOKENS = 4096  # peer
ANSWER_TEMPERATURE = 0.2  # peer
NEIGHBOR_EXPANSION_HITS = 2  # the best seed hits whose surrounding chunks join the evidence
CITATIONS_ONLY_HITS = 8
MIN_SYNTHESIS_S = 5.0

SYNTHESIS_SYSTEM = """You answer questions about a code base. Use only the evidence given below.
Cite the source of every claim as path:start-end, exactly as written in the evidence headers.
If the evidence does not answer the question, say what is missing. Never invent a path or a line."""

Mode = Literal["synthesis", "draft", "citations-only", "no-evidence"]


class AskRequest(Strict):
    question: str = Field(min_length=1, max_length=2000, description="A question about the indexed code.")
    repo: str | None = Field(
        default=None, description="Which indexes: a repo, a glob ('api*'), a group ('@backend'); None = every index."
    )
    deep: bool = Field(default=True, description="Let the RLM look again before answering (slower, better).")


class Citation(Strict):
    repo: str | None
    path: str
    start_line: int
    end_line: int
    symbol: str | None = None
    via: Literal["seed", "rlm"] = Field(description="seed = plain retrieval of the question; rlm = found by the RLM.")


class AskTimings(Strict):
    retrieval_ms: float = 0.0
    gather_ms: float = 0.0
    synthesis_ms: float = 0.0
    total_ms: float = 0.0


class AskTrace(Strict):
    """How an answer was produced."""

    mode: Mode
    deep: bool
    rounds: int = 0
    rlm_status: str | None = Field(
        default=None, description="answered | max-rounds | deadline | endpoint-error | unavailable"
    )
    plan: list[str] = Field(default_factory=list)
    tools_called: list[str] = Field(default_factory=list)
    rejected_tool_calls: list[str] = Field(default_factory=list)
    fallbacks: list[str] = Field(default_factory=list)
    rlm_provider: str | None = None
    synthesis_provider: str | None = None
    context_tokens: dict[str, int] = Field(default_factory=dict, description="Window read per chat role.")
    evidence_budget_chars: dict[str, int] = Field(default_factory=dict, description="Evidence budget per step.")
    evidence_blocks: int = 0
    unverified_citations: list[str] = Field(default_factory=list, description="Cited spans not in the evidence.")
    timings: AskTimings = Field(default_factory=AskTimings)


class AskResult(Strict):
    question: str
    answer: str
    citations: list[Citation]
    produced: AskTrace


@dataclass
class _Notes:
    """What one ask records on its way, kept when it fails halfway: the fallbacks taken, the windows read;
    and where its progress goes."""

    progress: ProgressReporter
    fallbacks: list[str] = field(default_factory=list)
    context_tokens: dict[str, int] = field(default_factory=dict)
    evidence_budget_chars: dict[str, int] = field(default_factory=dict)


class AskPipeline:
    """One object per serving replica; `ask()` is safe to run concurrently."""

    def __init__(
        self, tools: CodeTools, rlm: ChatRole, assistant: ChatRole, settings: RlmSettings, clock: Clock
    ) -> None:
        self._tools = tools
        self._rlm = rlm
        self._assistant = assistant
        self._settings = settings
        self._clock = clock

    async def ask(self, request: AskRequest, progress: ProgressCallback | None = None) -> AskResult:
        """The answer; `progress` (optional) hears plan, rounds, tools, synthesis and done as they happen."""
        started = self._clock()
        trace = _Notes(ProgressReporter(progress))
        try:
            result = await self._ask(request, started, trace)
        except Exception as exc:  # the ask path never throws into the client (DESIGN §9); logged below
            log.exception("ask failed inside the pipeline")
            fallbacks = [*trace.fallbacks, f"internal error ({type(exc).__name__}) → no answer"]
            result = AskResult(
                question=request.question,
                answer="samespace could not answer this question (an internal error was logged).",
                citations=[],
                produced=AskTrace(
                    mode="no-evidence",
                    deep=request.deep,
                    fallbacks=fallbacks,
                    timings=AskTimings(total_ms=self._ms_since(started)),
                ),
            )
        await trace.progress.done(f"done: {result.produced.mode} answer, {len(result.citations)} citations")
        return result

    async def _ask(self, request: AskRequest, started: float, trace: _Notes) -> AskResult:
        settings = self._settings
        fallbacks = trace.fallbacks
        ask_deadline = started + settings.ask_budget_s

        seed = await self._seed(request.question, fallbacks)
        retrieval_ms = self._ms_since(started)

        gathered: GatherResult | None = None
        gather_started = self._clock()
        if request.deep:
            gather_deadline = min(
                gather_started + settings.gather_deadline_s, ask_deadline - settings.synthesis_reserve_s
            )
            loop = GatherLoop(self._rlm, self._tools, settings, self._clock, progress=trace.progress)
            gathered = await loop.run(request.question, seed, gather_deadline, request.repo)
            trace.context_tokens["rlm"] = gathered.context_tokens
            trace.evidence_budget_chars["rlm"] = gathered.evidence.budget_chars
            if gathered.status == "unavailable":
                fallbacks.append(f"rlm: unavailable ({gathered.error or 'no provider'}) → plain retrieval")
            elif gathered.status in ("endpoint-error", "deadline"):
                fallbacks.append(
                    f"rlm: {gathered.status} ({gathered.error or 'no answer'}) after round "
                    f"{gathered.rounds} → the evidence gathered so far"
                )
        gather_ms = self._ms_since(gather_started) if request.deep else 0.0

        evidence = gathered.evidence if gathered is not None and gathered.status != "unavailable" else None
        if evidence is None:
            evidence = EvidenceSet(settings.max_evidence_chars)
            evidence.add(seed)
        draft = gathered.draft if gathered is not None else None

        synthesis_started = self._clock()
        answer, citations, mode, provider, unverified = await self._answer(
            request.question, evidence, draft, max(MIN_SYNTHESIS_S, ask_deadline - synthesis_started), trace
        )
        synthesis_ms = self._ms_since(synthesis_started)
        produced = AskTrace(
            mode=mode,
            deep=request.deep,
            rounds=gathered.rounds if gathered else 0,
            rlm_status=gathered.status if gathered else None,
            plan=[f"{s.tool}({s.query!r})" for s in (gathered.plan or [])] if gathered else [],
            tools_called=gathered.tools_called if gathered else [],
            rejected_tool_calls=gathered.rejected_calls if gathered else [],
            fallbacks=fallbacks,
            rlm_provider=gathered.provider if gathered else None,
            synthesis_provider=provider,
            context_tokens=trace.context_tokens,
            evidence_budget_chars=trace.evidence_budget_chars,
            evidence_blocks=len(evidence.blocks),
            unverified_citations=unverified,
            timings=AskTimings(
                retrieval_ms=retrieval_ms,
                gather_ms=gather_ms,
                synthesis_ms=synthesis_ms,
                total_ms=self._ms_since(started),
            ),
        )
        return AskResult(question=request.question, answer=answer, citations=citations, produced=produced)

    async def _seed(self, question: str, fallbacks: list[str]) -> list[EvidenceBlock]:
        """Plain retrieval of the question (reranked), plus the chunks around the best hits —
        fetched in parallel, without the reranker."""
        try:
            hits = await self._tools.search_code(question, self._settings.seed_k, True)
        except Exception as exc:  # noqa: BLE001 - no retrieval is an answer too: "nothing found", with the reason
            fallbacks.append(f"retrieval: failed ({type(exc).__name__}: {str(exc)[:200]})")
            return []
        hits = [h.model_copy(update={"via": "seed"}) for h in hits]
        expansions = await asyncio.gather(
            *(
                self._tools.neighbors(h.repo, h.path, h.start_line, 1)
                for h in hits[:NEIGHBOR_EXPANSION_HITS]
                if h.path and h.start_line is not None
            ),
            return_exceptions=True,
        )
        around = [
            b.model_copy(update={"via": "seed"}) for found in expansions if isinstance(found, list) for b in found
        ]
        return hits + around

    async def _answer(
        self, question: str, evidence: EvidenceSet, draft: str | None, timeout_s: float, trace: _Notes
    ) -> tuple[str, list[Citation], Mode, str | None, list[str]]:
        fallbacks = trace.fallbacks
        if not evidence.blocks:
            fallbacks.append("no evidence: nothing indexed matched (or retrieval failed)")
            return (f"No indexed code was found for: {question}", [], "no-evidence", None, [])

        context = await _window(self._assistant) or self._settings.default_context_tokens
        output = reply_budget(context, ANSWER_MAX_TOKENS)
        overhead = len(SYNTHESIS_SYSTEM) + len(question) + len(draft or "") + 300
        budget = evidence_budget_chars(context, overhead, output, self._settings.max_evidence_chars)
        trace.context_tokens["code-assistant"] = context
        trace.evidence_budget_chars["code-assistant"] = budget
        shown = evidence.within(budget)

        messages = synthesis_messages(question, shown, draft)
        messages, max_tokens = fit_request(messages, context, output)
        await trace.progress.emit("synthesis", f"synthesis started: an answer from {len(shown.blocks)} evidence blocks")
        outcome = await self._assistant.complete(
            {"messages": messages, "max_tokens": max_tokens, "temperature": ANSWER_TEMPERATURE}, timeout_s
        )
        unverified: list[str] = []
        content = outcome.result.content if outcome.result is not None else None
        if content and content.strip():
            text = content.strip()
            citations, unverified = verify_citations(text, shown)
            if citations:
                return text, citations, "synthesis", outcome.provider, unverified
            fallbacks.append("synthesis: the answer cited nothing from the evidence → rejected")
        else:
            fallbacks.append(f"synthesis: {outcome.error or 'empty answer'}")
        if draft:
            citations, unverified_draft = verify_citations(draft, evidence)
            if citations:
                fallbacks.append("synthesis unavailable → the RLM's draft")
                return draft, citations, "draft", None, unverified + unverified_draft
        fallbacks.append("synthesis unavailable → citations only")
        answer, citations = citations_only(question, evidence.blocks)
        return answer, citations, "citations-only", None, unverified

    def _ms_since(self, started: float) -> float:
        return round((self._clock() - started) * 1000.0, 1)


async def _window(role: ChatRole) -> int | None:
    try:
        return await role.context_window()
    except Exception:  # noqa: BLE001 - unknown window → the safe default
        return None


def synthesis_messages(question: str, evidence: EvidenceSet, draft: str | None) -> list[dict[str, str]]:
    numbered = "\n\n".join(f"[{i}] {block.render()}" for i, block in enumerate(evidence.blocks, start=1))
    user = f"Question: {question}\n\nEvidence:\n{numbered}"
    if draft:
        user += f"\n\nDraft from the retrieval model (may be incomplete; verify it against the evidence):\n{draft}"
    return [{"role": "system", "content": SYNTHESIS_SYSTEM}, {"role": "user", "content": user}]


def verify_citations(text: str, evidence: EvidenceSet) -> tuple[list[Citation], list[str]]:
    """Citations written in `text` that point into the evidence, and the ones that do not."""
    found: list[Citation] = []
    unverified: list[str] = []
    seen: set[tuple[str | None, str, int, int]] = set()
    for span in citations_in(text):
        block = evidence.find(span.path, span.start_line, span.end_line)
        if block is None:
            unverified.append(f"{span.path}:{span.start_line}-{span.end_line}")
            continue
        key = (block.repo, block.path or span.path, span.start_line, span.end_line)
        if key in seen:
            continue
        seen.add(key)
        found.append(
            Citation(
                repo=block.repo,
                path=block.path or span.path,
                start_line=span.start_line,
                end_line=span.end_line,
                symbol=block.symbol,
                via=block.via,
            )
        )
    return found, unverified


def citations_only(question: str, blocks: Sequence[EvidenceBlock]) -> tuple[str, list[Citation]]:
    """The answer when no model could write one: the best located hits, as citations."""
    located = [(b, span) for b in blocks if (span := b.span) is not None][:CITATIONS_ONLY_HITS]
    lines = [f"No model could write an answer right now. The code most relevant to “{question}”:"]
    citations = []
    for block, (path, start, end) in located:
        first = next((line.strip() for line in block.text.splitlines() if line.strip()), "")
        what = f" {block.symbol}" if block.symbol else ""
        lines.append(f"- {block.citation}{what} ({block.kind}): {first[:120]}")
        citations.append(
            Citation(repo=block.repo, path=path, start_line=start, end_line=end, symbol=block.symbol, via=block.via)
        )
    return "\n".join(lines), citations
