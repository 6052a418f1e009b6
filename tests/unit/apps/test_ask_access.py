"""An ask reads as the request's caller: `AskService` calls the search service inside the request, so
its seed retrieval and every gathering round (the planned searches, the model's tool calls, run
concurrently) read with the caller's reader, and an index the caller may not read never reaches the
evidence, the synthesis or the citations, even when the model names it. The chat roles are scripted
dispatchers (the edge); the index actor's reads are its own, in process over a real catalogue."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.ask.pipeline import AskRequest, AskResult
from cluster.auth import Principal, acting_as
from serve_apps.mcp import AskService
from tests.support.in_process_index import InProcessIndex
from tests.support.index_access import (
    ANN,
    SETTINGS,
    SHARED,
    ScriptedDispatcher,
    assistant_reply,
    indexed,
    rlm_reply,
    service_over,
)

QUESTION = "How is an invoice total charged to a card?"


@pytest.fixture
def index(tmp_path: Path) -> Iterator[InProcessIndex]:
    store, catalog = indexed(tmp_path)
    yield InProcessIndex(catalog, SETTINGS)
    store.close()


async def ask_as(
    principal: Principal, index: InProcessIndex
) -> tuple[AskResult, ScriptedDispatcher, ScriptedDispatcher]:
    rlm, assistant = ScriptedDispatcher(rlm_reply), ScriptedDispatcher(assistant_reply)
    asker = AskService(service_over(index), SETTINGS, rlm, assistant)
    with acting_as(principal):
        result = await asker.ask(AskRequest(question=QUESTION))
    return result, rlm, assistant


async def test_the_seed_and_every_gathering_round_read_as_the_caller_and_never_reach_another_groups_index(
    index: InProcessIndex,
) -> None:
    result, rlm, assistant = await ask_as(ANN, index)
    assert result.produced.rounds >= 1 and len(result.produced.tools_called) >= 5  # the rounds ran
    methods = [method for method, _ in index.readers]
    assert {"search", "search_symbols", "search_files", "read_lines", "neighbors", "overview"} <= set(methods)
    assert {reader.subject for _, reader in index.readers} == {"ann"}  # seed, plan and rounds alike
    assert result.citations and {c.repo for c in result.citations} == {"alpha"}
    synthesis = json.dumps(assistant.requests)
    assert "alpha" in synthesis and "beta" not in synthesis  # no evidence from beta
    told = [m["content"] for r in rlm.requests for m in r["messages"] if m["role"] == "tool"]
    assert any("unknown repo 'beta'; indexed repos: alpha" in t for t in told)  # as a name that does not exist
    assert not any("beta" in t.replace("unknown repo 'beta'", "") for t in told)


async def test_an_unrestricted_caller_gathers_from_both(index: InProcessIndex) -> None:
    _, rlm, _ = await ask_as(SHARED, index)
    assert {reader.subject for _, reader in index.readers} == {"token"}
    told = [m["content"] for r in rlm.requests for m in r["messages"] if m["role"] == "tool"]
    assert any("beta" in t and "unknown repo" not in t for t in told)
