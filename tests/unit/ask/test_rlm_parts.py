"""The RLM's parts without Ray: query cache, plan parser, tool-call parsing, evidence budgeting."""

from __future__ import annotations

import asyncio
import json

import pytest

from cluster.ask.evidence import (
    MIN_OUTPUT_TOKENS,
    EvidenceBlock,
    EvidenceSet,
    citations_in,
    evidence_budget_chars,
)
from cluster.ask.plan import PLAN_MAX_SUBQUESTIONS, parse_plan
from cluster.ask.rlm import fit_request
from cluster.ask.tools import (
    ToolCallError,
    ToolRequest,
    calls_in_text,
    requests_from_reply,
    tool_schemas,
    validate_call,
)
from cluster.cloud.openai_wire import ToolCall
from cluster.search.query_cache import QueryVectorCache
from tests.support.fakes.virtual_time import VirtualClock


def block(path: str, start: int, end: int, text: str = "x = 1", tool: str = "search_code") -> EvidenceBlock:
    return EvidenceBlock(tool=tool, repo="r", path=path, start_line=start, end_line=end, text=text)


# --- query cache -----------------------------------------------------------------------------


def test_the_cache_computes_once_per_key_and_serves_concurrent_misses_from_one_flight() -> None:
    clock = VirtualClock()
    cache: QueryVectorCache[str] = QueryVectorCache(ttl_s=60, max_entries=10, clock=clock)
    calls: list[str] = []

    async def compute() -> str:
        calls.append("q")
        await asyncio.sleep(0.01)
        return "vector"

    async def main() -> list[str]:
        return list(await asyncio.gather(*(cache.get_or_compute("q", compute) for _ in range(5))))

    assert asyncio.run(main()) == ["vector"] * 5
    assert calls == ["q"] and cache.misses == 1 and cache.hits == 4


def test_the_cache_expires_after_its_ttl_and_evicts_the_least_recently_used() -> None:
    clock = VirtualClock()
    cache: QueryVectorCache[int] = QueryVectorCache(ttl_s=10, max_entries=2, clock=clock)
    computed: list[str] = []

    def get(key: str) -> int:
        async def compute() -> int:
            computed.append(key)
            return len(computed)

        return asyncio.run(cache.get_or_compute(key, compute))

    get("a"), get("b"), get("a")  # a is now the most recent
    get("c")  # evicts b
    assert computed == ["a", "b", "c"]
    get("a")
    assert computed == ["a", "b", "c"]
    get("b")
    assert computed[-1] == "b"
    clock.now += 11
    get("b")
    assert computed[-2:] == ["b", "b"]


def test_a_failed_computation_is_not_cached_and_reaches_every_waiter() -> None:
    cache: QueryVectorCache[int] = QueryVectorCache(ttl_s=10, max_entries=2, clock=VirtualClock())

    async def boom() -> int:
        await asyncio.sleep(0.01)
        raise RuntimeError("encoder down")

    async def main() -> list[object]:
        return list(await asyncio.gather(*(cache.get_or_compute("k", boom) for _ in range(3)), return_exceptions=True))

    results = asyncio.run(main())
    assert all(isinstance(r, RuntimeError) for r in results) and len(cache) == 0


# --- plan ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        (
            '{"restated": "x", "subQuestions": [{"question": "a", "tool": "search_code", "query": "late fee"}, '
            '{"question": "b", "tool": "search_symbols", "query": "zeta_adjust"}]}'
        ),
        (
            '```json\n{"subQuestions": [{"question": "a", "tool": "search_code", "query": "late fee"},'
            ' {"question": "b", "tool": "search_symbols", "query": "zeta_adjust"},]}\n```'
        ),
        (
            'Sure! Here is the plan: {"sub_questions": [{"q": "a", "tool": "search_code", "query": "late fee"},'
            ' {"tool": "search_symbols", "query": "zeta_adjust"}]} hope it helps'
        ),
    ],
)
def test_the_plan_parser_forgives_fences_wrappers_trailing_commas_and_key_spellings(reply: str) -> None:
    plan = parse_plan(reply, "How is the late fee computed?")
    assert plan is not None
    assert [(s.tool, s.query) for s in plan] == [("search_code", "late fee"), ("search_symbols", "zeta_adjust")]


def test_the_plan_is_capped_deduplicated_clamped_and_unknown_tools_become_semantic_search() -> None:
    items = [{"tool": "search_code", "query": "same"}] * 3 + [
        {"tool": "grep", "query": "q" * 200},
        {"tool": "search_files", "query": "a.py"},
        {"tool": "search_symbols", "query": "f1"},
        {"tool": "search_symbols", "query": "f2"},
    ]
    plan = parse_plan(json.dumps({"subQuestions": items}), "question")
    assert plan is not None and len(plan) == PLAN_MAX_SUBQUESTIONS
    assert plan[1].tool == "search_code" and len(plan[1].query) == 80
    assert [s.query for s in plan].count("same") == 1


@pytest.mark.parametrize(
    "reply",
    [
        None,
        "",
        "no json here",
        '{"subQuestions": "nope"}',
        '{"subQuestions": []}',
        '{"subQuestions": [{"tool": "search_code"}]',
        "[1, 2",
    ],
)
def test_an_unparseable_plan_is_none(reply: str | None) -> None:
    assert parse_plan(reply, "question") is None


# --- tool calls ------------------------------------------------------------------------------


def test_tool_schemas_are_openai_functions_for_every_tool() -> None:
    names = [s["function"]["name"] for s in tool_schemas()]
    assert names == [
        "search_code",
        "search_symbols",
        "search_files",
        "read_range",
        "neighbors",
        "repo_overview",
        "search_commits",
        "symbol_history",
        "what_changed",
    ]
    history = next(s for s in tool_schemas() if s["function"]["name"] == "what_changed")["function"]["parameters"]
    assert history["required"] == ["since"]
    read = next(s for s in tool_schemas() if s["function"]["name"] == "read_range")["function"]["parameters"]
    assert read["required"] == ["path", "start_line", "end_line"] and read["type"] == "object"


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("rm_rf", "{}", "unknown tool"),
        ("search_code", "{not json", "not JSON"),
        ("search_code", "[1]", "JSON object"),
        ("search_code", '{"query": 5}', "query"),
        ("read_range", '{"path": "a.py", "start_line": "ten", "end_line": 3}', "start_line"),
        ("neighbors", '{"path": "a.py", "line": 0}', "line"),
        ("search_symbols", "{}", "query"),
    ],
)
def test_malformed_calls_become_errors_naming_the_problem(name: str, arguments: str, error: str) -> None:
    checked = validate_call("c1", name, arguments)
    assert isinstance(checked, ToolCallError) and error in checked.error


def test_valid_calls_ignore_stray_keys_and_label_themselves() -> None:
    checked = validate_call("c1", "search_code", '{"query": "late fee", "projectId": 1}')
    assert isinstance(checked, ToolRequest) and checked.label() == "search_code(query='late fee')"


def test_calls_written_as_text_are_recovered_in_every_known_dialect() -> None:
    qwen = (
        "<tool_call>\n<function=search_symbols>\n<parameter=query>\nzeta_adjust\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    hermes = '<tool_call>{"name": "search_files", "arguments": {"query": "billing"}}</tool_call>'
    line = 'thinking...\n{"name": "search_code", "arguments": {"query": "late fee"}}'
    pythonic = 'I will call search_symbols("zeta_adjust") and neighbors(path="a.py", line=3)'
    assert calls_in_text(qwen) == [("search_symbols", {"query": "zeta_adjust"})]
    assert calls_in_text(hermes) == [("search_files", {"query": "billing"})]
    assert calls_in_text(line) == [("search_code", {"query": "late fee"})]
    assert calls_in_text(pythonic) == [
        ("search_symbols", {"query": "zeta_adjust"}),
        ("neighbors", {"path": "a.py", "line": 3}),
    ]
    assert calls_in_text("The answer is in billing.py:3-9.") == []


def test_a_reply_prefers_structured_calls_and_splits_valid_from_rejected() -> None:
    calls = [
        ToolCall(id="a", name="search_code", arguments='{"query": "x"}'),
        ToolCall(id="b", name="nope", arguments="{}"),
        ToolCall(id="c", name="search_symbols", arguments="{bad"),
    ]
    valid, rejected = requests_from_reply(calls, 'search_files("ignored")', 1)
    assert [v.id for v in valid] == ["a"] and [r.id for r in rejected] == ["b", "c"]
    valid, rejected = requests_from_reply([], 'search_files("billing")', 2)
    assert [(v.name, v.args.query) for v in valid] == [("search_files", "billing")] and not rejected  # type: ignore[attr-defined]


# --- evidence --------------------------------------------------------------------------------


def test_evidence_drops_seen_places_and_ranges_inside_held_blocks() -> None:
    evidence = EvidenceSet(10_000)
    assert len(evidence.add([block("a.py", 1, 20), block("b.py", 1, 5)])) == 2
    again = evidence.add([block("a.py", 1, 20, tool="search_symbols"), block("a.py", 5, 9), block("a.py", 15, 30)])
    assert [(b.path, b.start_line) for b in again] == [("a.py", 15)]
    assert evidence.duplicates == 2


def test_evidence_stops_at_its_budget_and_truncates_only_with_room() -> None:
    evidence = EvidenceSet(700)
    big = "y = 2\n" * 200
    admitted = evidence.add([block("a.py", 1, 3), block("b.py", 1, 200, text=big), block("c.py", 1, 2)])
    assert [b.path for b in admitted] == ["a.py", "b.py"]
    assert admitted[1].text.endswith("…") and evidence.chars <= 700
    assert evidence.dropped_for_budget == 1


def test_the_evidence_budget_follows_the_context_window() -> None:
    small = evidence_budget_chars(2048, overhead_chars=1000, output_tokens=512, cap_chars=13_000)
    large = evidence_budget_chars(40_960, overhead_chars=1000, output_tokens=2048, cap_chars=13_000)
    assert large == 13_000
    assert 0 < small < 3_500  # (2048 − 256 − 768 − 313) × 3.2
    assert evidence_budget_chars(1024, overhead_chars=4000, output_tokens=512, cap_chars=13_000) == 0


def test_citations_are_read_in_every_usual_spelling_and_checked_against_the_evidence() -> None:
    text = "See pkg/tax.py:10-24 and (web/a.ts:7), also `pkg/tax.py:10-24` again; v1.2 is not a path."
    assert [(c.path, c.start_line, c.end_line) for c in citations_in(text)] == [
        ("pkg/tax.py", 10, 24),
        ("web/a.ts", 7, 7),
    ]
    evidence = EvidenceSet(10_000)
    evidence.add([block("pkg/tax.py", 5, 30)])
    assert evidence.find("pkg/tax.py", 10, 24) is not None
    assert evidence.find("tax.py", 10, 24) is not None  # a shortened path still points into it
    assert evidence.find("pkg/tax.py", 40, 50) is None and evidence.find("web/a.ts", 7, 7) is None


def test_fit_request_shrinks_max_tokens_then_drops_the_oldest_tool_turns() -> None:
    head = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    turn = [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
        {"role": "tool", "tool_call_id": "1", "content": "z" * 3000},
    ]
    messages, max_tokens = fit_request(head + turn, 40_960, 2048)
    assert messages == head + turn and max_tokens == 2048
    messages, max_tokens = fit_request(head + turn + turn, 2200, 2048)
    assert messages == head + turn and max_tokens >= MIN_OUTPUT_TOKENS
