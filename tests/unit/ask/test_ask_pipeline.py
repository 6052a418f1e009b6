"""The gathering loop and the ask pipeline on a virtual clock, with scripted chat roles and in-memory tools.

The end-to-end versions (real Ray, Serve, MCP client, the fakes over HTTP) are in tests/e2e/test_ask_e2e.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from cluster.ask.ask_progress import AskProgress, ProgressReporter
from cluster.ask.evidence import EvidenceBlock
from cluster.ask.pipeline import AskPipeline, AskRequest, AskResult
from cluster.ask.rlm import ChatOutcome, GatherLoop
from cluster.cloud.openai_wire import ChatResult, ToolCall
from cluster.settings import RlmSettings
from tests.support.fakes.virtual_time import VirtualClock

TARGET = EvidenceBlock(
    tool="t",
    repo="shop",
    path="billing/adjust.py",
    start_line=1,
    end_line=3,
    symbol="zeta_adjust",
    kind="function",
    text="def zeta_adjust(amount):\n    return round(amount * 1.0725, 2)",
)
DECOYS = [
    EvidenceBlock(
        tool="t",
        repo="shop",
        path=f"billing/fees_{i}.py",
        start_line=1,
        end_line=4,
        symbol=f"late_fee_{i}",
        kind="function",
        text=f"def late_fee_{i}(invoice):\n    # overdue invoice late fee\n"
        f"    return zeta_adjust(invoice.total * 0.0{i})",
    )
    for i in range(12)
]
QUESTION = "How is the late fee of an overdue invoice computed?"
FEE_COMMIT = "9f" * 20


class MemoryTools:
    """CodeTools over a list of blocks: 'semantic' search by word overlap, symbol search by name."""

    def __init__(self, blocks: list[EvidenceBlock], fail: set[str] | None = None) -> None:
        self.blocks = blocks
        self.fail = fail or set()
        self.calls: list[tuple[str, Any]] = []

    def _maybe_fail(self, name: str) -> None:
        if name in self.fail:
            raise RuntimeError(f"{name} is down")

    async def search_code(self, query: str, limit: int, rerank: bool) -> list[EvidenceBlock]:
        self.calls.append(("search_code", (query, rerank)))
        self._maybe_fail("search_code")
        words = set(query.lower().split())
        scored = [(len(words & set(b.text.lower().replace("(", " ").split())), b) for b in self.blocks]
        return [b for score, b in sorted(scored, key=lambda p: -p[0]) if score][:limit]

    async def search_symbols(self, query: str, limit: int) -> list[EvidenceBlock]:
        self.calls.append(("search_symbols", query))
        self._maybe_fail("search_symbols")
        return [b for b in self.blocks if b.symbol == query][:limit]

    async def search_files(self, query: str, limit: int) -> list[EvidenceBlock]:
        self.calls.append(("search_files", query))
        return [b for b in self.blocks if query in (b.path or "")][:limit]

    async def read_range(self, repo: str | None, path: str, start_line: int, end_line: int) -> list[EvidenceBlock]:
        self.calls.append(("read_range", (repo, path)))
        return [b for b in self.blocks if b.path == path]

    async def neighbors(self, repo: str | None, path: str, line: int, count: int) -> list[EvidenceBlock]:
        self.calls.append(("neighbors", (repo, path, line)))
        self._maybe_fail("neighbors")
        return []

    async def repo_overview(self, repo: str | None) -> list[EvidenceBlock]:
        self.calls.append(("repo_overview", repo))
        return [EvidenceBlock(tool="repo_overview", text="shop: billing code", kind="overview")]

    async def search_commits(self, query: str, limit: int) -> list[EvidenceBlock]:
        self.calls.append(("search_commits", query))
        return []

    async def symbol_history(self, symbol: str, path: str | None, limit: int) -> list[EvidenceBlock]:
        self.calls.append(("symbol_history", (symbol, path)))
        text = (
            f"the history of {symbol!r}:\n{FEE_COMMIT} 2026-11-02T10:00:00Z ana: modified billing/fees_0.py:late_fee_0"
        )
        return [EvidenceBlock(tool="symbol_history", kind="history", text=text + "\n  Fees follow the 2026 tariff")]

    async def what_changed(self, since: str, path: str | None, limit: int) -> list[EvidenceBlock]:
        self.calls.append(("what_changed", (since, path)))
        return []


Responder = Callable[[dict[str, Any]], ChatResult | None]


class ScriptedRole:
    """A chat role answering through `respond` (None = the endpoint failed); records every request."""

    def __init__(
        self,
        respond: Responder,
        *,
        context: int | None = 32_768,
        clock: VirtualClock | None = None,
        latency_s: float = 0.0,
        name: str = "scripted",
    ) -> None:
        self.respond = respond
        self.context = context
        self.clock = clock
        self.latency_s = latency_s
        self.name = name
        self.requests: list[dict[str, Any]] = []

    async def complete(self, request: dict[str, Any], timeout_s: float) -> ChatOutcome:
        self.requests.append(request)
        if self.clock is not None:
            if self.latency_s > timeout_s:
                self.clock.now += timeout_s
                return ChatOutcome(None, error="UpstreamTimeout")
            self.clock.now += self.latency_s
        try:
            result = self.respond(request)
        except Exception as exc:  # noqa: BLE001  the real ChatRole maps every failure to "nothing", so does this one
            return ChatOutcome(None, error=type(exc).__name__)
        return ChatOutcome(result, self.name) if result is not None else ChatOutcome(None, error="UpstreamUnavailable")

    async def context_window(self) -> int | None:
        return self.context


def text(content: str) -> ChatResult:
    return ChatResult(content=content, finish_reason="stop")


def calls(*pairs: tuple[str, Any]) -> ChatResult:
    return ChatResult(
        tool_calls=[
            ToolCall(id=f"c{i}", name=n, arguments=a if isinstance(a, str) else json.dumps(a))
            for i, (n, a) in enumerate(pairs)
        ],
        finish_reason="tool_calls",
    )


def conversation(request: dict[str, Any]) -> str:
    return json.dumps(request["messages"])


def rlm_script(request: dict[str, Any]) -> ChatResult:
    """Plan a semantic search; when a decoy mentions zeta_adjust, look it up; then draft."""
    seen = conversation(request)
    if "tools" not in request:
        return text(
            '{"subQuestions": [{"question": "fee", "tool": "search_code", "query": "late fee overdue invoice"}]}'
        )
    if "def zeta_adjust" not in seen and request.get("tool_choice") != "none":
        return calls(("search_symbols", {"query": "zeta_adjust"}))
    return text("The fee is late_fee_0 (billing/fees_0.py:1-4) adjusted by zeta_adjust (billing/adjust.py:1-3).")


def assistant_script(request: dict[str, Any]) -> ChatResult:
    return text(
        "The late fee is a share of the total (billing/fees_0.py:1-4), rounded by zeta_adjust (billing/adjust.py:1-3)."
    )


def pipeline(
    tools: MemoryTools, rlm: ScriptedRole, assistant: ScriptedRole, clock: VirtualClock, **settings: Any
) -> AskPipeline:
    return AskPipeline(tools, rlm, assistant, RlmSettings(**settings), clock)


def ask(p: AskPipeline, question: str = QUESTION, deep: bool = True) -> AskResult:
    return asyncio.run(p.ask(AskRequest(question=question, deep=deep)))


def ask_with_progress(p: AskPipeline, deep: bool = True) -> tuple[AskResult, list[AskProgress]]:
    heard: list[AskProgress] = []

    async def listen(event: AskProgress) -> None:
        heard.append(event)

    return asyncio.run(p.ask(AskRequest(question=QUESTION, deep=deep), listen)), heard


def paths(result: AskResult) -> set[str]:
    return {c.path for c in result.citations}


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


def test_the_eleventh_chunk_is_found_by_a_second_round_symbol_search_and_cited(clock: VirtualClock) -> None:
    tools = MemoryTools([*DECOYS, TARGET])
    plain = asyncio.run(tools.search_code(QUESTION, 10, True))
    assert TARGET not in plain  # one-shot top-10 retrieval misses it
    result = ask(pipeline(tools, ScriptedRole(rlm_script), ScriptedRole(assistant_script), clock))
    assert result.produced.mode == "synthesis" and result.produced.fallbacks == []
    assert "billing/adjust.py" in paths(result)
    cited = next(c for c in result.citations if c.path == "billing/adjust.py")
    assert cited.via == "rlm" and cited.symbol == "zeta_adjust"
    assert "search_symbols(query='zeta_adjust')" in result.produced.tools_called


def test_rounds_stop_at_max_rounds_and_the_last_round_cannot_call_tools(clock: VirtualClock) -> None:
    def greedy(request: dict[str, Any]) -> ChatResult:
        if "tools" not in request:
            return text("not json at all")  # single-question mode
        return calls(("search_files", {"query": "billing"}))  # asks for more, always

    rlm = ScriptedRole(greedy)
    tools = MemoryTools([*DECOYS, TARGET])
    result = ask(pipeline(tools, rlm, ScriptedRole(assistant_script), clock, max_rounds=3))
    rounds = [r for r in rlm.requests if "tools" in r]
    assert len(rounds) == 3 and result.produced.rounds == 3
    assert [r["tool_choice"] for r in rounds] == ["auto", "auto", "none"]
    assert len([c for c in tools.calls if c[0] == "search_files"]) == 2  # the last round's call never ran
    assert any("last round" in r for r in result.produced.rejected_tool_calls)
    assert result.produced.plan == []  # unparseable plan → the question itself was searched


def test_the_deadline_stops_the_rounds_and_the_answer_still_comes(clock: VirtualClock) -> None:
    def slow_greedy(request: dict[str, Any]) -> ChatResult:
        if "tools" not in request:
            return text('{"subQuestions": [{"tool": "search_code", "query": "late fee"}]}')
        return calls(("search_files", {"query": "billing"}))

    rlm = ScriptedRole(slow_greedy, clock=clock, latency_s=30.0)
    result = ask(
        pipeline(MemoryTools(DECOYS), rlm, ScriptedRole(assistant_script), clock, max_rounds=8, gather_deadline_s=75.0)
    )
    assert result.produced.rlm_status == "deadline"
    assert result.produced.rounds < 8 and result.produced.mode == "synthesis"
    assert result.produced.timings.gather_ms <= 75_000 + 1


def test_an_unreachable_rlm_means_an_answer_from_plain_retrieval(clock: VirtualClock) -> None:
    result = ask(
        pipeline(MemoryTools([*DECOYS, TARGET]), ScriptedRole(lambda r: None), ScriptedRole(assistant_script), clock)
    )
    assert result.produced.rlm_status == "unavailable" and result.produced.mode == "synthesis"
    assert any(f.startswith("rlm: unavailable") and "plain retrieval" in f for f in result.produced.fallbacks)
    assert paths(result) == {"billing/fees_0.py"}  # the seed hit; the RLM-only find is not claimed
    assert all(c.via == "seed" for c in result.citations)


def test_a_dead_synthesis_falls_back_to_the_draft_then_to_citations_only(clock: VirtualClock) -> None:
    tools = MemoryTools([*DECOYS, TARGET])
    drafted = ask(pipeline(tools, ScriptedRole(rlm_script), ScriptedRole(lambda r: None), clock))
    assert drafted.produced.mode == "draft" and "billing/adjust.py" in paths(drafted)
    assert "synthesis unavailable → the RLM's draft" in drafted.produced.fallbacks

    both_down = ask(pipeline(tools, ScriptedRole(lambda r: None), ScriptedRole(lambda r: None), clock))
    assert both_down.produced.mode == "citations-only"
    assert both_down.answer.startswith("No model could write an answer")
    assert "billing/fees_0.py" in both_down.answer and len(both_down.citations) >= 1


def test_an_answer_that_cites_nothing_from_the_evidence_is_not_accepted(clock: VirtualClock) -> None:
    invented = ScriptedRole(lambda r: text("It is in src/made_up.py:1-99, trust me."))
    result = ask(pipeline(MemoryTools([*DECOYS, TARGET]), ScriptedRole(rlm_script), invented, clock))
    assert result.produced.mode == "draft"
    assert "src/made_up.py:1-99" in result.produced.unverified_citations
    assert "src/made_up.py" not in paths(result)


def test_everything_down_still_returns_an_answer_and_never_raises(clock: VirtualClock) -> None:
    tools = MemoryTools(DECOYS, fail={"search_code", "search_symbols", "neighbors"})
    result = ask(pipeline(tools, ScriptedRole(lambda r: 1 / 0), ScriptedRole(lambda r: None), clock))
    assert result.produced.mode == "no-evidence" and result.citations == []
    assert any(f.startswith("retrieval: failed") for f in result.produced.fallbacks)


def test_a_smaller_context_window_shrinks_the_evidence_budget(clock: VirtualClock) -> None:
    padded = [d.model_copy(update={"text": d.text + "\n    # overdue late fee invoice policy" * 12}) for d in DECOYS]

    def run(context: int) -> tuple[AskResult, int]:
        rlm = ScriptedRole(rlm_script, context=context)
        assistant = ScriptedRole(assistant_script, context=context)
        result = ask(pipeline(MemoryTools([*padded, TARGET]), rlm, assistant, clock))
        assert result.produced.context_tokens == {"rlm": context, "code-assistant": context}
        return result, len(json.dumps(assistant.requests[-1]["messages"]))

    (large, large_sent), (small, small_sent) = run(40_960), run(2_500)
    assert large.produced.evidence_budget_chars["rlm"] == 13_000
    assert small.produced.evidence_budget_chars["rlm"] < 3_000
    assert (
        small.produced.evidence_budget_chars["code-assistant"] < large.produced.evidence_budget_chars["code-assistant"]
    )
    assert small.produced.evidence_blocks < large.produced.evidence_blocks and small_sent < large_sent


def test_an_unknown_window_uses_the_safe_default(clock: VirtualClock) -> None:
    rlm = ScriptedRole(rlm_script, context=None)
    result = ask(
        pipeline(
            MemoryTools([*DECOYS, TARGET]),
            rlm,
            ScriptedRole(assistant_script, context=None),
            clock,
            default_context_tokens=4096,
        )
    )
    assert result.produced.context_tokens == {"rlm": 4096, "code-assistant": 4096}


@pytest.mark.parametrize(
    "garbage",
    [
        calls(("search_symbols", "{not json")),
        calls(("drop_database", {"query": "x"})),
        calls(("read_range", {"path": "billing/adjust.py", "start_line": "one", "end_line": 3})),
        calls(("search_symbols", [1, 2, 3])),
        text('<tool_call>{"name": "search_code", "arguments": {"query": 7}}</tool_call>'),
    ],
)
def test_malformed_tool_calls_are_survived_and_reported(clock: VirtualClock, garbage: ChatResult) -> None:
    def script(request: dict[str, Any]) -> ChatResult:
        if "tools" not in request:
            return text('```json\n{"subQuestions": [{"tool": "search_code", "query": "late fee"},]}\n```')
        if request.get("tool_choice") == "none":
            return text("Draft: see billing/fees_0.py:1-4.")
        return garbage

    rlm = ScriptedRole(script)
    result = ask(pipeline(MemoryTools([*DECOYS, TARGET]), rlm, ScriptedRole(assistant_script), clock))
    assert result.produced.mode == "synthesis" and result.produced.rejected_tool_calls
    errors = [m for r in rlm.requests for m in r["messages"] if m.get("role") == "tool" and "error" in m["content"]]
    assert errors  # the model was shown what was wrong with its call


def test_a_tool_that_raises_is_shown_to_the_model_not_to_the_client(clock: VirtualClock) -> None:
    tools = MemoryTools([*DECOYS, TARGET], fail={"search_symbols"})
    rlm = ScriptedRole(rlm_script)
    result = ask(pipeline(tools, rlm, ScriptedRole(assistant_script), clock))
    assert result.produced.mode == "synthesis"
    tool_texts = [m["content"] for r in rlm.requests for m in r["messages"] if m.get("role") == "tool"]
    assert any("search_symbols is down" in t for t in tool_texts)


def test_deep_false_skips_the_rlm(clock: VirtualClock) -> None:
    rlm = ScriptedRole(rlm_script)
    result = ask(pipeline(MemoryTools([*DECOYS, TARGET]), rlm, ScriptedRole(assistant_script), clock), deep=False)
    assert rlm.requests == [] and result.produced.rounds == 0 and result.produced.mode == "synthesis"


def test_seed_searches_rerank_and_loop_searches_do_not(clock: VirtualClock) -> None:
    tools = MemoryTools([*DECOYS, TARGET])
    ask(pipeline(tools, ScriptedRole(rlm_script), ScriptedRole(assistant_script), clock))
    searches = [args for name, args in tools.calls if name == "search_code"]
    assert len(searches) > 1 and searches[0] == (QUESTION, True) and all(rerank is False for _, rerank in searches[1:])
    assert len([c for c in tools.calls if c[0] == "neighbors"]) == 2  # the best seed hits' surroundings


def test_the_loop_alone_reports_an_endpoint_error_mid_run(clock: VirtualClock) -> None:
    answers = iter([text('{"subQuestions": [{"tool": "search_code", "query": "late fee"}]}'), None])
    loop = GatherLoop(ScriptedRole(lambda r: next(answers)), MemoryTools(DECOYS), RlmSettings(), clock)
    result = asyncio.run(loop.run(QUESTION, [], deadline=60.0))
    assert result.status == "endpoint-error" and result.rounds == 1 and result.evidence.blocks


def test_progress_reports_plan_rounds_tools_synthesis_and_done_in_the_order_they_happen(clock: VirtualClock) -> None:
    tools = MemoryTools([*DECOYS, TARGET])
    result, heard = ask_with_progress(pipeline(tools, ScriptedRole(rlm_script), ScriptedRole(assistant_script), clock))
    assert [(e.kind, e.round, e.tool) for e in heard] == [
        ("plan", None, None),
        ("tool", 0, "search_code(query='late fee overdue invoice')"),  # the planned search
        ("round", 1, None),
        ("tool", 1, "search_symbols(query='zeta_adjust')"),
        ("round", 2, None),
        ("synthesis", None, None),
        ("done", None, None),
    ]
    assert [e.step for e in heard] == [1, 2, 3, 4, 5, 6, 7]  # only increases
    assert [e.total for e in heard] == [None] * 6 + [7]
    assert all(e.rounds == 2 for e in heard if e.kind in ("plan", "round", "tool"))
    assert heard[0].message == "plan made: search_code('late fee overdue invoice')"
    assert heard[2].message.startswith("round 1 of 2") and heard[4].message.startswith("round 2 of 2")
    assert heard[3].message == "round 1: search_symbols(query='zeta_adjust') → 1 found, 1 new"
    assert (
        heard[5].message.startswith("synthesis started") and heard[6].message == "done: synthesis answer, 2 citations"
    )
    quiet = ask(
        pipeline(MemoryTools([*DECOYS, TARGET]), ScriptedRole(rlm_script), ScriptedRole(assistant_script), clock)
    )
    assert (result.answer, result.citations) == (quiet.answer, quiet.citations)  # listening changes nothing


def test_a_progress_callback_that_raises_never_fails_the_ask(clock: VirtualClock) -> None:
    calls_seen: list[str] = []

    async def broken(event: AskProgress) -> None:
        calls_seen.append(event.kind)
        raise RuntimeError("the client went away")

    tools = MemoryTools([*DECOYS, TARGET])
    p = pipeline(tools, ScriptedRole(rlm_script), ScriptedRole(assistant_script), clock)
    result = asyncio.run(p.ask(AskRequest(question=QUESTION), broken))
    assert result.produced.mode == "synthesis" and result.produced.fallbacks == []
    assert "billing/adjust.py" in paths(result)
    assert calls_seen == ["plan", "tool", "round", "tool", "round", "synthesis", "done"]  # it carried on


def test_a_listener_that_hangs_is_given_up_and_the_events_keep_their_order() -> None:
    heard: list[int] = []

    async def stuck_on_two(event: AskProgress) -> None:
        if event.step == 2:
            await asyncio.Event().wait()
        heard.append(event.step)

    async def run() -> None:
        reporter = ProgressReporter(stuck_on_two, timeout_s=0.05)
        await asyncio.gather(*(reporter.emit("tool", f"call {i}") for i in range(4)))
        await reporter.done("done")

    asyncio.run(run())
    assert heard == [1]  # step 2 timed out; the listener is not called again for this ask


def test_without_the_rlm_the_progress_is_synthesis_then_done(clock: VirtualClock) -> None:
    tools = MemoryTools([*DECOYS, TARGET])
    shallow, heard = ask_with_progress(
        pipeline(tools, ScriptedRole(rlm_script), ScriptedRole(assistant_script), clock), deep=False
    )
    assert [e.kind for e in heard] == ["synthesis", "done"] and shallow.produced.mode == "synthesis"
    down, heard = ask_with_progress(
        pipeline(tools, ScriptedRole(lambda r: None), ScriptedRole(assistant_script), clock)
    )
    assert [e.kind for e in heard] == ["synthesis", "done"] and down.produced.rlm_status == "unavailable"
    assert [e.step for e in heard] == [1, 2] and heard[-1].total == 2


def test_an_ask_that_fails_inside_still_reports_done(clock: VirtualClock) -> None:
    class NoWindow(ScriptedRole):
        async def context_window(self) -> int | None:
            raise RuntimeError("boom")

    result, heard = ask_with_progress(
        pipeline(MemoryTools(DECOYS), NoWindow(rlm_script), ScriptedRole(assistant_script), clock)
    )
    assert any(f.startswith("internal error") for f in result.produced.fallbacks)
    assert [e.kind for e in heard] == ["done"] and heard[0].message == "done: no-evidence answer, 0 citations"


def test_a_why_question_gathers_the_symbols_commits_and_the_answer_sees_them(clock: VirtualClock) -> None:
    def why(request: dict[str, Any]) -> ChatResult:
        if "tools" not in request:
            return text("not json")  # single-question mode
        if FEE_COMMIT not in conversation(request) and request.get("tool_choice") != "none":
            return calls(("symbol_history", {"symbol": "late_fee_0", "path": "billing/fees_0.py"}))
        return text(f"late_fee_0 (billing/fees_0.py:1-4) changed in {FEE_COMMIT} to follow the 2026 tariff.")

    assistant = ScriptedRole(assistant_script)
    tools = MemoryTools([*DECOYS, TARGET])
    result = ask(pipeline(tools, ScriptedRole(why), assistant, clock), "Why did the late fee change last month?")
    assert ("symbol_history", ("late_fee_0", "billing/fees_0.py")) in tools.calls
    assert "symbol_history(symbol='late_fee_0', path='billing/fees_0.py')" in result.produced.tools_called
    assert FEE_COMMIT in conversation(assistant.requests[-1])  # the synthesis is shown the commit
