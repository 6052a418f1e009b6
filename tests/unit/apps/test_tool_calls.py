"""Every MCP tool call through `_tool_call` (serve_apps/mcp/_calls.py), without Ray: the caller must hold
the tool's scope (defense in depth behind the HTTP guard), an OAuth caller over its rate is refused with a
clear tool error while another keeps calling, and each call leaves one audit line: who, which tool, the
indexes it named and answered from, the outcome, the time and the cloud credits its requests were
charged (found by the call id its requests carry), the query only under audit.include_queries.

The budget actor's handle is the one fake here (no Ray): its methods run the real `SubjectQuotas` and
`CallCredits` the actor holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from cluster.auth import ANONYMOUS, AuditLog, AuditQuery, AuditRecord, Principal, SubjectQuotas, acting_as
from cluster.cloud import CallCredits, current_request_tag
from cluster.errors import IndexNotFound
from cluster.search import FileHit, FileSearchResult
from cluster.settings import AuditSettings, QuotaSettings
from serve_apps.mcp._calls import ToolCalls, _tool_call

READER = Principal(kind="oauth", subject="alice", client_id="cursor", scopes=frozenset({"samespace:read"}))
BOB = Principal(kind="oauth", subject="bob", scopes=frozenset({"samespace:read"}))
QUERY = "where do we compute the late fee"


class Remote:
    """`handle.method.remote(...)` over a plain coroutine function."""

    def __init__(self, function: Any) -> None:
        self.function = function

    async def remote(self, *args: Any) -> Any:
        return self.function(*args)


class FakeBudget:
    """The budget actor's handle, as far as the tool layer reaches it, over the real quota logic."""

    def __init__(self, requests_per_minute: int = 600) -> None:
        self.quotas = SubjectQuotas(QuotaSettings(requests_per_minute=requests_per_minute), lambda: 1000.0)
        self.credits = CallCredits()
        self.admitted: list[str] = []
        self.admit_call = Remote(self._admit)
        self.take_call_credits = Remote(self.credits.take)

    def _admit(self, subject: str) -> None:
        self.admitted.append(subject)
        self.quotas.admit(subject)


def calls(tmp_path: Path, budget: FakeBudget | None = None, *, cloud: bool = True, **audit: Any) -> ToolCalls:
    log = AuditLog(tmp_path / "audit.jsonl", AuditSettings(**audit), clock=lambda: 1_800_000_000.0)
    return ToolCalls(audit=log, budget=(lambda: budget) if budget is not None else None, cloud=cloud)


def lines(tool_calls: ToolCalls) -> list[AuditRecord]:
    assert tool_calls.audit is not None
    return tool_calls.audit.read(AuditQuery())


def found_files(*repos: str) -> FileSearchResult:
    hit = {"path": "fees.py", "language": "python", "match": "stem", "symbols": [], "symbols_total": 0}
    return FileSearchResult(query="fees", files=[FileHit(repo=r, **hit) for r in repos])


async def test_a_caller_without_the_tools_scope_is_refused_before_the_call_runs(tmp_path: Path) -> None:
    tool_calls, ran = calls(tmp_path), []

    async def index() -> None:
        ran.append(True)

    with acting_as(READER), pytest.raises(ToolError) as refused:
        await _tool_call("index_repository", index(), tool_calls, scope="shop")
    assert "samespace:index" in str(refused.value) and "access denied" in str(refused.value)
    with pytest.raises(ToolError, match="samespace:read"):  # outside any request: ANONYMOUS holds no scope
        await _tool_call("search_code", index(), tool_calls)
    assert ran == []
    (second, first) = lines(tool_calls)
    assert (first.subject, first.action, first.outcome) == ("alice", "index_repository", "denied")
    assert first.indexes == ["shop"]
    assert (second.subject, second.kind, second.outcome) == (ANONYMOUS.subject, "anonymous", "denied")


async def test_an_oauth_caller_over_its_rate_gets_a_clear_error_and_another_keeps_calling(tmp_path: Path) -> None:
    budget = FakeBudget(requests_per_minute=2)
    tool_calls = calls(tmp_path, budget)

    async def search() -> FileSearchResult:
        return found_files("shop")

    with acting_as(READER):
        for _ in range(2):
            await _tool_call("search_files", search(), tool_calls)
        with pytest.raises(ToolError) as refused:
            await _tool_call("search_files", search(), tool_calls)
    message = str(refused.value)
    assert "quota exceeded for 'alice'" in message and "quotas.requests_per_minute" in message and "retry in" in message
    with acting_as(BOB):
        assert (await _tool_call("search_files", search(), tool_calls)).files[0].repo == "shop"
    outcomes = [(r.subject, r.outcome) for r in lines(tool_calls)]
    assert outcomes == [("bob", "ok"), ("alice", "quota"), ("alice", "ok"), ("alice", "ok")]


async def test_shared_callers_are_not_counted_against_a_person(tmp_path: Path) -> None:
    budget = FakeBudget(requests_per_minute=1)
    tool_calls = calls(tmp_path, budget)

    async def search() -> FileSearchResult:
        return found_files()

    with acting_as(Principal.shared("token")):
        for _ in range(3):
            await _tool_call("search_files", search(), tool_calls)
    assert budget.admitted == []
    assert [r.subject for r in lines(tool_calls)] == ["token"] * 3


async def test_one_audit_line_names_the_indexes_the_outcome_and_the_calls_credits(tmp_path: Path) -> None:
    budget = FakeBudget()
    tool_calls = calls(tmp_path, budget)

    async def search() -> FileSearchResult:
        tag = current_request_tag()  # what a cloud request made for this call carries
        assert tag.subject == "alice" and tag.call_id is not None
        budget.credits.add(tag.call_id, 0.125)
        return found_files("shop", "billing", "shop")

    with acting_as(READER):
        await _tool_call("search_files", search(), tool_calls, scope="sh*", query=QUERY)
    (line,) = lines(tool_calls)
    assert (line.subject, line.client_id, line.kind, line.surface) == ("alice", "cursor", "oauth", "mcp")
    assert (line.action, line.outcome, line.indexes) == ("search_files", "ok", ["sh*", "shop", "billing"])
    assert line.credits == pytest.approx(0.125) and line.ms >= 0
    assert line.query is None and QUERY not in (tmp_path / "audit.jsonl").read_text()
    assert current_request_tag().call_id is None  # the tag ends with the call


async def test_an_error_is_audited_as_such_and_the_query_kept_only_when_asked(tmp_path: Path) -> None:
    tool_calls = calls(tmp_path, include_queries=True, cloud=False)

    async def missing() -> None:
        raise IndexNotFound("nope", ["shop"])

    with acting_as(READER), pytest.raises(ToolError, match="unknown repo 'nope'"):
        await _tool_call("search_code", missing(), tool_calls, scope="nope", query=QUERY)
    (line,) = lines(tool_calls)
    assert (line.outcome, line.indexes, line.query, line.credits) == ("error", ["nope"], QUERY, 0.0)
