"""Virtual containers a sidecar hosts, from the master's side: discovered by asking (`containers`), never
from a heartbeat; named `<PCName>-OR-<Role>` by the master; eligible only while reachable, keyed, not
failing and never caught calling OpenRouter without a permit; called with the permit in the command,
their upstream failures arriving as the in-cluster client's errors. No Ray: the hub on a fixed clock,
a fake sidecar answering its HTTP outbox."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cluster.cloud import KeyFacts, cloud_identity
from cluster.cloud.key_readiness import NO_KEY_REASON
from cluster.config.store import ConfigStore
from cluster.errors import (
    AuthFailed,
    MissingPin,
    PaymentRequired,
    RateLimited,
    UpstreamError,
    UpstreamUnavailable,
)
from cluster.fleet.frames import HeartbeatFrame, VirtualContainerRow, capabilities, parse_frame
from cluster.fleet.hub import FleetHub
from cluster.fleet.virtual_providers import VirtualBook
from cluster.providers import ProviderInfo, ProviderKind
from cluster.roles import Role
from cluster.settings import RoleRoute
from tests.support.virtual_sidecars import (
    AGENT_URL,
    MODEL,
    WIDTH,
    joined,
    register,
    row,
    settings_at,
    settled,
    sleep_forever,
)


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[FleetHub]:
    settings = settings_at(tmp_path)
    fleet_hub = FleetHub(settings, ConfigStore(settings.admin.config_path), clock=lambda: 100.0, sleep=sleep_forever)
    yield fleet_hub
    fleet_hub.stop_liveness()


def cloud(hub: FleetHub, reserved: tuple[str, ...] = ()) -> dict[str, ProviderInfo]:
    return {p.name: p for p in hub.providers(reserved) if p.kind is ProviderKind.CLOUD}


async def test_a_registered_sidecar_is_asked_for_its_containers_and_each_row_is_a_sidecar_hosted_cloud_provider(
    hub: FleetHub, tmp_path: Path
) -> None:
    other_model = row("embedding", name="mine-too", model="other/embedder", provider="nebius")
    sidecar, _ = await joined(hub, [row(), row("reranker", keyHeld=False, provider=None), other_model])
    with sidecar:
        assert sidecar.actions() == ["containers"]  # asked once, as it registered
        found = cloud(hub)
    assert sorted(found) == ["ws-7-OR-CodeEmbedding", "ws-7-OR-Embedding", "ws-7-OR-Reranker"]
    code = found["ws-7-OR-CodeEmbedding"]
    assert (code.hosted, code.roles, code.model, code.upstream, code.eligible) == (
        "sidecar",
        [Role.CODE_EMBEDDING],
        MODEL,
        "deepinfra",
        True,
    )
    # The master's token cap for the role when it routes the same model; else the RoleRoute default.
    assert code.identity == cloud_identity(RoleRoute(model=MODEL, upstream="deepinfra", max_input_tokens=512), WIDTH)
    embed = found["ws-7-OR-Embedding"]
    assert embed.identity == cloud_identity(RoleRoute(model="other/embedder", upstream="nebius"), WIDTH)
    assert embed.identity is not None and embed.identity.max_seq_length == RoleRoute(model="x").max_input_tokens
    reranker = found["ws-7-OR-Reranker"]
    assert (reranker.eligible, reranker.reason, reranker.identity) == (False, NO_KEY_REASON, None)
    # Kept in memory only: the registry on disk knows the agent, never its virtual containers.
    hub.fleet.flush()
    stored = ConfigStore(tmp_path / "cluster.json").read().sidecars
    assert [record.capabilities for record in stored.values()] == [{}]
    assert "OR-" not in (tmp_path / "cluster.json").read_text()


async def test_a_heartbeat_carrying_virtual_container_data_changes_nothing(hub: FleetHub) -> None:
    agent, digest = register(hub)
    await asyncio.sleep(0)  # its `containers` command waits unanswered: no rows
    virtual = {
        "ws-7-OR-CodeEmbedding": {"name": "ws-7-OR-CodeEmbedding", "status": "running", "model": MODEL},
        "code-embedding": {"name": "ss-code-embedding", "status": "running", "type": "openrouter", "model": MODEL},
        "embedding": {"status": "running", "config": {"type": "openrouter", "model": MODEL}},
    }
    beat = {"type": "heartbeat", "agentUrl": AGENT_URL, "statusData": {"hostname": "ws-7", "containers": virtual}}
    status, _ = await hub.http_heartbeat(json.dumps(beat).encode(), agent, digest)
    assert status == 200
    assert hub.providers() == [] and hub.hosts()[0].capabilities == {}
    frame = parse_frame(json.dumps(beat))
    assert isinstance(frame, HeartbeatFrame) and capabilities(frame.status_data) == {}
    # A real local container beside them is still a capability: only the virtual entries are ignored.
    real = {**virtual, "reranker": {"status": "running", "type": "tei", "model": "bge"}}
    frame = parse_frame(json.dumps({**beat, "statusData": {"containers": real}}))
    assert isinstance(frame, HeartbeatFrame) and list(capabilities(frame.status_data)) == [Role.RERANKER]


async def test_a_call_carries_its_permit_and_comes_back_with_vectors_and_usage(hub: FleetHub) -> None:
    sidecar, agent = await joined(hub, [row()])
    with sidecar:
        cloud(hub)
        vectors, usage = await hub.virtual_embed("ws-7-OR-CodeEmbedding", ["a", "b"], "17")
        ranked_rows = [row("reranker")]
        sidecar.rows = [row(), *ranked_rows]
        await hub.discover_virtual(agent)
        cloud(hub)
        ranked, _ = await hub.virtual_rerank("ws-7-OR-Reranker", "q", ["d0", "d1", "d2"], 2, "18")
    embed = next(f for f in sidecar.seen if f.get("action") == "virtual-embed")
    assert {k: embed[k] for k in ("role", "model", "permit", "texts")} == {
        "role": "code-embedding",
        "model": MODEL,
        "permit": "17",
        "texts": ["a", "b"],
    }
    assert vectors.shape == (2, WIDTH) and vectors[1, 3] == 1.0
    assert usage is not None and (usage.prompt_tokens, usage.cost) == (7, 0.25)
    rerank = next(f for f in sidecar.seen if f.get("action") == "virtual-rerank")
    assert (rerank["permit"], rerank["topN"], rerank["documents"]) == ("18", 2, ["d0", "d1", "d2"])
    assert ranked == [(2, pytest.approx(0.2)), (1, pytest.approx(0.1))]
    assert hub.virtual.permits(agent, Role.CODE_EMBEDDING) == 1 and hub.virtual.permits(agent, Role.RERANKER) == 1


@pytest.mark.parametrize(
    ("extra", "error", "status"),
    [
        ({"status": 429, "retryAfterS": 3}, RateLimited, 429),
        ({"status": 402}, PaymentRequired, 402),
        ({"status": 402, "retryAfterS": 1.5}, RateLimited, 402),
        ({"status": 401}, AuthFailed, 401),
        ({"status": 503}, UpstreamUnavailable, 503),
        ({"status": 400}, UpstreamError, 400),
        ({}, UpstreamUnavailable, None),
    ],
)
async def test_an_upstream_failure_arrives_as_the_error_the_in_cluster_client_raises(
    hub: FleetHub, extra: dict[str, Any], error: type[UpstreamError], status: int | None
) -> None:
    sidecar, _ = await joined(hub, [row()])
    sidecar.replies["virtual-embed"] = lambda frame: {"error": "upstream said no", **extra}
    with sidecar:
        cloud(hub)
        with pytest.raises(UpstreamError) as caught:
            await hub.virtual_embed("ws-7-OR-CodeEmbedding", ["a"], "5")
    assert type(caught.value) is error and caught.value.status == status
    if error is RateLimited:
        expected_retry = extra.get("retryAfterS")
        assert isinstance(caught.value, RateLimited) and caught.value.retry_after_s == expected_retry
        assert caught.value.provider == "ws-7-OR-CodeEmbedding"


@pytest.mark.parametrize(
    ("extra", "error", "retry_after_s"),
    [
        ({"retryAfterS": 5, "metadata": {"reason": "weight_exceeds_budget"}}, PaymentRequired, None),
        ({"metadata": {"limit_source": "openrouter_in_flight_budget"}}, RateLimited, None),
        ({"metadata": {"reason": "in_flight_budget_exhausted", "retry_after_seconds": 2}}, RateLimited, 2.0),
    ],
)
async def test_a_402_s_metadata_tells_the_transient_in_flight_budget_from_a_refusal(
    hub: FleetHub, extra: dict[str, Any], error: type[UpstreamError], retry_after_s: float | None
) -> None:
    sidecar, _ = await joined(hub, [row()])
    sidecar.replies["virtual-embed"] = lambda frame: {"error": "openrouter 402: no", "status": 402, **extra}
    with sidecar:
        cloud(hub)
        with pytest.raises(UpstreamError) as caught:
            await hub.virtual_embed("ws-7-OR-CodeEmbedding", ["a"], "5")
    assert type(caught.value) is error and caught.value.status == 402
    assert getattr(caught.value, "retry_after_s", None) == retry_after_s


async def test_the_key_s_limits_are_read_through_virtual_key_info(hub: FleetHub) -> None:
    sidecar, _ = await joined(hub, [row()])
    body = {"data": {"rate_limit": {"requests": 10, "interval": "10s"}, "is_free_tier": False, "limit_remaining": 5}}
    sidecar.replies["virtual-key-info"] = lambda frame: {"response": body}
    with sidecar:
        cloud(hub)
        facts = await hub.key_facts("ws-7-OR-CodeEmbedding")
    assert facts == KeyFacts(rpm=60.0, is_free_tier=False, credits_remaining=5.0)


async def test_an_unpinned_embedding_container_is_refused_before_anything_is_sent(hub: FleetHub) -> None:
    sidecar, agent = await joined(hub, [row(provider=None)])
    with sidecar:
        info = cloud(hub)["ws-7-OR-CodeEmbedding"]
        assert info.upstream is None and info.eligible  # the gate refuses it: no-provider-pin
        with pytest.raises(MissingPin):
            await hub.virtual_embed("ws-7-OR-CodeEmbedding", ["a"], "1")
    assert sidecar.actions() == ["containers"] and hub.virtual.permits(agent, Role.CODE_EMBEDDING) == 0


async def test_a_sidecar_that_called_openrouter_without_a_permit_is_refused_for_good_and_said_once(
    hub: FleetHub, caplog: pytest.LogCaptureFixture
) -> None:
    sidecar, agent = await joined(hub, [row(upstreamCalls=0), row("reranker")])
    with sidecar, caplog.at_level(logging.WARNING, logger="samespace.fleet"):
        cloud(hub)
        await hub.virtual_embed("ws-7-OR-CodeEmbedding", ["a"], "9")
        sidecar.rows = [row(upstreamCalls=1), row("reranker")]  # one call, one permit: fine
        await hub.discover_virtual(agent)
        assert all(p.eligible for p in cloud(hub).values())
        sidecar.rows = [row(upstreamCalls=3), row("reranker")]
        await hub.discover_virtual(agent)
        after = cloud(hub)
        sidecar.rows = [row(upstreamCalls=0), row("reranker")]  # sticky: a later honest count changes nothing
        await hub.discover_virtual(agent)
        later = cloud(hub)
        with pytest.raises(UpstreamUnavailable, match="without a permit"):
            await hub.virtual_embed("ws-7-OR-CodeEmbedding", ["a"], "10")
    reason = "called OpenRouter without a permit (3 calls, 1 permits)"
    assert {p.reason for p in after.values()} == {reason} and not any(p.eligible for p in after.values())
    assert {p.reason for p in later.values()} == {reason}
    warnings = [r for r in caplog.records if "without a permit" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert sidecar.actions().count("virtual-embed") == 1  # the refused call was never sent


def test_the_book_counts_permits_per_agent_and_role_and_forgets_a_replaced_agent() -> None:
    book = VirtualBook()
    fresh = [VirtualContainerRow.model_validate(row(upstreamCalls=0))]
    rows = [VirtualContainerRow.model_validate(row(upstreamCalls=2))]
    book.record("a1", fresh)
    book.record("a2", fresh)
    book.permit_sent("a1", Role.CODE_EMBEDDING)
    book.permit_sent("a1", Role.CODE_EMBEDDING)
    book.permit_sent("a2", Role.CODE_EMBEDDING)
    book.record("a1", rows)
    book.record("a2", rows)
    assert book.unpermitted("a1") is None
    assert book.unpermitted("a2") == "called OpenRouter without a permit (2 calls, 1 permits)"
    book.forget("a2")
    assert (book.unpermitted("a2"), book.permits("a2", Role.CODE_EMBEDDING), book.rows("a2")) == (None, 0, [])


def test_a_restarted_master_counts_from_the_calls_a_sidecar_had_already_made() -> None:
    """The sidecar's counters outlive a master's fleet actor: the calls it reported when this book
    first saw it were made under the permits of the master's earlier life."""
    book = VirtualBook()
    book.record("a1", [VirtualContainerRow.model_validate(row(upstreamCalls=5))])
    book.permit_sent("a1", Role.CODE_EMBEDDING)
    book.record("a1", [VirtualContainerRow.model_validate(row(upstreamCalls=6))])
    assert book.unpermitted("a1") is None
    book.record("a1", [VirtualContainerRow.model_validate(row(upstreamCalls=8))])
    assert book.unpermitted("a1") == "called OpenRouter without a permit (3 calls, 1 permits)"


async def test_a_name_taken_already_is_listed_ineligible_under_another_name(hub: FleetHub) -> None:
    first, agent1 = await joined(hub, [row()])
    second, agent2 = await joined(hub, [row()], url="http://ws-7:9000", hostname="WS-7")
    with first, second:
        found = cloud(hub)
    # Agents in URL order: :8098 first; the later one collides (host names are case-insensitive: WS-7 is ws-7).
    assert sorted(found) == sorted(["ws-7-OR-CodeEmbedding", f"WS-7-OR-CodeEmbedding~{agent2}"])
    assert found["ws-7-OR-CodeEmbedding"].eligible
    later = found[f"WS-7-OR-CodeEmbedding~{agent2}"]
    assert not later.eligible and later.reason == f"name collides with the virtual container of sidecar {AGENT_URL}"
    reserved = cloud(hub, reserved=("ws-7-OR-CodeEmbedding",))
    mine = reserved[f"ws-7-OR-CodeEmbedding~{agent1}"]
    assert (mine.eligible, mine.reason) == (False, "name collides with an in-cluster provider")


async def test_the_liveness_loop_asks_every_reachable_agent_again_each_discovery_period(tmp_path: Path) -> None:
    now = [100.0]
    ticks: asyncio.Queue[None] = asyncio.Queue()

    async def sleep(seconds: float) -> None:
        await ticks.get()
        now[0] += seconds

    settings = settings_at(tmp_path, virtual_discovery_s=0.5, stale_after_s=3600, ping_interval_s=600)
    fleet_hub = FleetHub(settings, ConfigStore(settings.admin.config_path), clock=lambda: now[0], sleep=sleep)
    try:
        sidecar, _ = await joined(fleet_hub, [row()])
        with sidecar:
            for _ in range(4):  # four loop passes of 0.5 s: a discovery each
                ticks.put_nowait(None)
                await settled(fleet_hub)
                await asyncio.sleep(0.01)
            asked = sidecar.actions().count("containers")
    finally:
        fleet_hub.stop_liveness()
    assert asked == 5  # once as it registered, then once per period


async def test_a_sidecar_that_stops_speaking_keeps_its_rows_but_its_containers_stop_serving(tmp_path: Path) -> None:
    now = [100.0]
    settings = settings_at(tmp_path)
    fleet_hub = FleetHub(settings, ConfigStore(settings.admin.config_path), clock=lambda: now[0], sleep=sleep_forever)
    try:
        sidecar, _ = await joined(fleet_hub, [row()])
        with sidecar:
            assert cloud(fleet_hub)["ws-7-OR-CodeEmbedding"].eligible
        now[0] += settings.fleet.stale_after_s + 1
        stale = cloud(fleet_hub)["ws-7-OR-CodeEmbedding"]
    finally:
        fleet_hub.stop_liveness()
    assert (stale.eligible, stale.reason) == (False, "no recent heartbeat")
