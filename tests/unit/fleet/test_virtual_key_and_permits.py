"""The key to a sidecar and the permits of its calls, from the master's side: the key travels in one
`config` frame per sidecar, built as it is posted, and in nothing else (no log record, no repr, nothing
kept); the fleet actor runs each virtual call under a key-wide permit whose ticket rides in the command
and books what the sidecar says the answer cost. No Ray: a fake budget actor, a fake sidecar."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

import actors.budget
from actors.budget import key_facts_through
from actors.discovery import LiveProvider
from actors.fleet import FleetActor
from cluster.cloud import Charge, KeyFacts, Outcome, Priority
from cluster.config.store import ConfigStore
from cluster.errors import RateLimited
from cluster.fleet.hub import FleetHub
from cluster.providers import ProviderInfo, ProviderKind
from cluster.roles import Role
from tests.support.virtual_sidecars import joined, row, settings_at, sleep_forever

CANARY = "sk-or-v1-canary-5f1d8e2a9b7c4e10"


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[FleetHub]:
    settings = settings_at(tmp_path)
    fleet_hub = FleetHub(settings, ConfigStore(settings.admin.config_path), clock=lambda: 100.0, sleep=sleep_forever)
    yield fleet_hub
    fleet_hub.stop_liveness()


def eligible(hub: FleetHub) -> dict[str, bool]:
    return {p.name: p.eligible for p in hub.providers() if p.kind is ProviderKind.CLOUD}


async def test_the_pushed_key_is_in_the_one_config_frame_and_in_no_log_record_or_repr(
    hub: FleetHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    sidecar, agent = await joined(hub, [row(keyHeld=False), row("reranker", keyHeld=False)])
    with sidecar:
        assert eligible(hub) == {"ws-7-OR-CodeEmbedding": False, "ws-7-OR-Reranker": False}
        keyed, issues = await hub.push_key(SecretStr(CANARY), {agent: ["ws-7-OR-CodeEmbedding"]})
        after = eligible(hub)
        views = hub.virtual_hosts()
    carrying = [frame for frame in sidecar.seen if CANARY in json.dumps(frame)]
    assert carrying == [frame for frame in sidecar.seen if frame["type"] == "config"]
    assert len(carrying) == 1
    assert carrying[0]["payload"] == {"openrouter": {"apiKey": CANARY, "containers": ["ws-7-OR-CodeEmbedding"]}}
    assert (keyed, issues) == (["ws-7-OR-CodeEmbedding"], [])
    assert after == {"ws-7-OR-CodeEmbedding": True, "ws-7-OR-Reranker": False}  # asked again: the key shows at once
    assert caplog.records and not any(CANARY in record.getMessage() for record in caplog.records)
    assert CANARY not in caplog.text
    kept = repr(hub) + repr(vars(hub)) + repr(vars(hub.desk)) + repr(vars(hub.virtual)) + repr(views)
    assert CANARY not in kept + repr(hub.providers())


async def test_a_sidecar_that_refuses_or_cannot_take_the_key_is_an_issue_that_never_carries_it(
    hub: FleetHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    sidecar, agent = await joined(hub, [row(keyHeld=False)])
    sidecar.replies["config"] = lambda frame: {"error": f"refused {frame['payload']['openrouter']['apiKey']}"}
    with sidecar:
        keyed, issues = await hub.push_key(SecretStr(CANARY), {agent: None, "a-gone": None})
    assert keyed == []
    assert set(issues) == {
        f"sidecar agent {agent}: the key did not land (UpstreamUnavailable)",
        "sidecar agent a-gone: the key did not land (UpstreamUnavailable)",
    }
    assert CANARY not in caplog.text and CANARY not in repr(vars(hub.desk))


class Remote:
    """An actor method's `.remote` over a plain function."""

    def __init__(self, fn: Any) -> None:
        self._fn = fn

    def remote(self, *args: Any) -> Any:
        return self._fn(*args)


class FakeBudget:
    """The BudgetActor's acquire and release: grants ticket 41, records every release."""

    def __init__(self) -> None:
        self.acquired: list[tuple[Any, ...]] = []
        self.released: list[tuple[Any, ...]] = []
        self.acquire = Remote(self._acquire)
        self.release = Remote(self._release)

    async def _acquire(self, project: str, priority: Priority, timeout_s: float, role: Role, subject: str) -> int:
        self.acquired.append((project, Priority(priority), role, subject))
        return 41

    def _release(self, *args: Any) -> asyncio.Future[None]:
        self.released.append(args)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


async def test_the_fleet_actor_calls_under_a_permit_whose_ticket_rides_in_the_command_and_books_the_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    budget = FakeBudget()
    monkeypatch.setattr(actors.budget, "get_budget_actor", lambda settings: budget)
    actor = FleetActor.__ray_metadata__.modified_class(settings_at(tmp_path))  # the class behind the Ray shell
    hub: FleetHub = actor._hub  # noqa: SLF001 - the fake sidecar answers the actor's own hub
    sidecar, _ = await joined(hub, [row(), row("reranker")])
    try:
        with sidecar:
            hub.providers()
            tagged = {"project": "proj", "priority": "interactive", "subject": "dana", "call_id": "c1"}
            vectors = await actor.virtual_embed("ws-7-OR-CodeEmbedding", ["abc"], **tagged)
            ranked = await actor.virtual_rerank("ws-7-OR-Reranker", "q", ["d0", "d1"], None, "proj", "bulk")
            sidecar.replies["virtual-embed"] = lambda frame: {"error": "slow down", "status": 429, "retryAfterS": 3}
            with pytest.raises(RateLimited):
                await actor.virtual_embed("ws-7-OR-CodeEmbedding", ["abc"], project="proj")
    finally:
        hub.stop_liveness()
    permits = [frame["permit"] for frame in sidecar.seen if frame.get("action", "").startswith("virtual-")]
    assert permits == ["41", "41", "41"] and vectors.shape == (1, 4) and [i for i, _ in ranked] == [1, 0]
    assert budget.acquired[:2] == [
        ("proj", Priority.INTERACTIVE, Role.CODE_EMBEDDING, "dana"),
        ("proj", Priority.BULK, Role.RERANKER, None),
    ]
    embed, rerank, limited = budget.released
    # (ticket, latency, outcome, retry after, role, charges, subject, call id)
    assert (embed[0], embed[2], embed[4], embed[5], embed[6], embed[7]) == (
        41,
        Outcome.OK,
        Role.CODE_EMBEDDING,
        [Charge(credits=0.25)],
        "dana",
        "c1",
    )
    assert rerank[2] is Outcome.OK and rerank[5][0].estimated and rerank[5][0].unpriced and rerank[5][0].credits > 0
    assert (limited[2], limited[3], limited[5]) == (Outcome.RATE_LIMITED, 3.0, [])


def test_a_sidecar_call_s_cost_is_the_reported_cost_else_an_unpriced_estimate_never_zero() -> None:
    from cluster.fleet import VirtualUsage, charges_for

    reported = charges_for(VirtualUsage.model_validate({"promptTokens": 9, "cost": 0.5}), "m", ["x"])
    counted = charges_for(VirtualUsage.model_validate({"totalTokens": 1000}), "m", ["x"])
    silent = charges_for(None, "m", ["a text of thirty characters..."])
    assert reported == [Charge(credits=0.5)]
    assert counted[0].unpriced and counted[0].credits == pytest.approx(1000 * 150e-6)
    assert silent[0].unpriced and silent[0].credits > 0


class KeyReader:
    """A provider's handle whose `key_facts` answers (a fleet actor takes the provider's name)."""

    def __init__(self, rpm: float) -> None:
        self.asked: list[tuple[Any, ...]] = []
        self.key_facts = Remote(self._facts)
        self._rpm = rpm

    async def _facts(self, *args: Any) -> KeyFacts:
        self.asked.append(args)
        return KeyFacts(rpm=self._rpm)


def live(name: str, hosted: str, eligible: bool, handle: KeyReader) -> LiveProvider:
    info = ProviderInfo(
        name=name,
        kind=ProviderKind.CLOUD,
        hosted=hosted,  # type: ignore[arg-type]  # 'ray' or 'sidecar'
        roles=[Role.CODE_EMBEDDING],
        node_id="",
        host="h",
        model="m",
        eligible=eligible,
    )
    return LiveProvider(info=info, handle=handle)


async def test_the_budget_reads_the_key_through_a_sidecar_container_by_name_when_no_in_cluster_one_can() -> None:
    keyless, fleet, in_cluster = KeyReader(1.0), KeyReader(120.0), KeyReader(600.0)
    found = [
        live("a-OR-CodeEmbedding", "sidecar", True, fleet),
        live("z-OR-CodeEmbedding", "ray", False, keyless),  # no key: not asked
    ]
    facts = await key_facts_through(found)
    assert (fleet.asked, keyless.asked) == ([("a-OR-CodeEmbedding",)], [])
    assert facts is not None and facts.rpm == 120.0
    found.append(live("y-OR-CodeEmbedding", "ray", True, in_cluster))
    facts = await key_facts_through(found)
    assert in_cluster.asked == [()] and len(fleet.asked) == 1  # an in-cluster container first, with no name
    assert facts is not None and facts.rpm == 600.0
    assert await key_facts_through([live("z-OR-CodeEmbedding", "ray", False, keyless)]) is None
