"""Spend per role per UTC day against daily caps (cluster/cloud/spend.py), the fake's usage.cost,
the client's usage listener, the caps in the config store, and a capped lane in the fan-out."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from cluster.cloud.openrouter import OpenRouterClient
from cluster.cloud.spend import (
    ESTIMATE_BASIS,
    UNPRICED_PRICE,
    CallUsage,
    Charge,
    ModelPrice,
    SpendLedger,
    SpendRecord,
    SpendState,
    charge_for,
    utc_day,
)
from cluster.config.store import ConfigStore, PersistedConfig, effective_settings
from cluster.errors import SpendCapReached
from cluster.roles import Role
from cluster.settings import SamespaceSettings
from tests.support.fakes.openrouter_fake import (
    FakeConfig,
    FakeState,
    KeyConfig,
    ModelEntry,
    UpstreamBehaviour,
    build_fake_app,
)

EMBED = Role.CODE_EMBEDDING
CHAT = Role.CODE_ASSISTANT


class Clock:
    def __init__(self, when: datetime) -> None:
        self.now = when.timestamp()

    def __call__(self) -> float:
        return self.now


def at(text: str) -> Clock:
    return Clock(datetime.fromisoformat(text).replace(tzinfo=UTC))


# -- what one call costs -------------------------------------------------------------------------


def test_a_response_cost_is_charged_as_reported_and_never_as_an_estimate() -> None:
    usage = CallUsage(model="m", cost=0.25, prompt_tokens=1000, completion_tokens=10)
    assert charge_for(usage, ModelPrice(prompt=1.0, completion=1.0)) == Charge(credits=0.25)


def test_without_a_cost_the_charge_is_tokens_times_the_listed_price_and_says_it_is_an_estimate() -> None:
    usage = CallUsage(model="m", prompt_tokens=1000, completion_tokens=10)
    charge = charge_for(usage, ModelPrice(prompt=0.001, completion=0.01))
    assert charge.estimated and not charge.unpriced
    assert charge.credits == pytest.approx(1000 * 0.001 + 10 * 0.01)


def test_without_a_cost_or_a_price_the_call_is_charged_the_unpriced_estimate_never_zero() -> None:
    charge = charge_for(CallUsage(model="m", prompt_tokens=50, completion_tokens=7), None)
    assert charge.estimated and charge.unpriced
    assert charge.credits > 0
    assert charge.credits == pytest.approx(50 * UNPRICED_PRICE.prompt + 7 * UNPRICED_PRICE.completion)


# Listed prices per 1M tokens (prompt, completion) of models across the catalogue: an embedding model,
# a small and a frontier chat model, and the top of the catalogue.
LISTED_PER_M = [(0.02, 0.0), (0.15, 0.6), (15.0, 75.0), (150.0, 600.0)]


@pytest.mark.parametrize(("prompt_per_m", "completion_per_m"), LISTED_PER_M)
def test_an_unpriced_call_is_charged_at_least_what_a_listed_model_charges_for_its_tokens(
    prompt_per_m: float, completion_per_m: float
) -> None:
    usage = CallUsage(model="m", prompt_tokens=12_345, completion_tokens=678)
    listed = charge_for(usage, ModelPrice(prompt=prompt_per_m / 1e6, completion=completion_per_m / 1e6))
    assert charge_for(usage, None).credits >= listed.credits > 0


def test_unpriced_calls_reach_the_cap_and_the_report_says_what_was_estimated_and_on_what_basis() -> None:
    ledger = SpendLedger({EMBED: 1.0}, clock=at("2026-12-02T10:00:00"))
    ledger.charge(EMBED, Charge(credits=0.25))  # reported by upstream
    ledger.charge(EMBED, charge_for(CallUsage(model="e", prompt_tokens=1000), ModelPrice(prompt=1e-4)))  # listed
    for _ in range(4):  # the price lookup failed: 2000 tokens each at the unpriced default
        ledger.charge(EMBED, charge_for(CallUsage(model="e", prompt_tokens=2000), None))
    assert ledger.state(EMBED) is SpendState.CAPPED  # unpriced calls used to cost 0: the cap never held
    view = ledger.view()
    embed = view.roles[EMBED]
    unpriced = 4 * 2000 * UNPRICED_PRICE.prompt
    assert (embed.calls, embed.unpriced_calls) == (6, 4)
    assert embed.unpriced_credits == pytest.approx(unpriced)
    assert embed.estimated == pytest.approx(0.1 + unpriced) and embed.spent == pytest.approx(0.35 + unpriced)
    assert view.basis == ESTIMATE_BASIS and "per 1M" in view.basis and "unpriced" in view.basis
    assert view.model_dump(mode="json")["roles"]["code-embedding"]["unpriced_credits"] == pytest.approx(unpriced)


def test_a_spend_file_written_before_unpriced_credits_existed_still_loads() -> None:
    old = '{"day": "2026-12-02", "roles": {"rlm": {"spent": 1.0, "estimated": 0.0, "calls": 2, "unpriced_calls": 1}}}'
    record = SpendRecord.model_validate_json(old)
    assert record.roles[Role.RLM].unpriced_credits == 0.0 and record.roles[Role.RLM].unpriced_calls == 1


# -- the ledger ----------------------------------------------------------------------------------


def test_spend_adds_up_per_role_and_a_role_at_its_cap_is_refused_with_a_clear_error() -> None:
    ledger = SpendLedger({EMBED: 1.0}, clock=at("2026-12-02T10:00:00"))
    assert ledger.state(EMBED) is SpendState.OK and ledger.state(CHAT) is SpendState.UNCAPPED
    assert ledger.charge(EMBED, Charge(credits=0.6)) is SpendState.OK
    ledger.check(EMBED)  # under the cap: no refusal
    assert ledger.charge(EMBED, Charge(credits=0.5, estimated=True)) is SpendState.CAPPED
    ledger.charge(CHAT, Charge(credits=7.0))
    ledger.check(CHAT)  # uncapped roles are never refused
    with pytest.raises(SpendCapReached) as refused:
        ledger.check(EMBED)
    message = str(refused.value)
    assert "code-embedding" in message and "1.1 of 1 credits" in message and "2026-12-03T00:00:00+00:00" in message
    view = ledger.view()
    embed = view.roles[EMBED]
    assert (embed.spent, embed.estimated, embed.calls, embed.refused) == (pytest.approx(1.1), 0.5, 2, 1)
    assert (embed.cap, embed.state) == (1.0, SpendState.CAPPED)
    assert view.roles[CHAT].state is SpendState.UNCAPPED and view.roles[CHAT].spent == 7.0


def test_the_refusal_pickles_across_actors_with_its_fields() -> None:
    error = pickle.loads(pickle.dumps(SpendCapReached("rlm", 2.0, 2.5, "2026-12-03T00:00:00+00:00")))
    assert (error.role, error.cap, error.spent) == ("rlm", 2.0, 2.5) and "rlm" in str(error)


def test_raising_a_cap_lets_the_role_call_again_and_removing_it_uncaps() -> None:
    ledger = SpendLedger({EMBED: 0.1}, clock=at("2026-12-02T10:00:00"))
    ledger.charge(EMBED, Charge(credits=0.2))
    assert ledger.state(EMBED) is SpendState.CAPPED
    ledger.set_caps({EMBED: 0.5})
    assert ledger.state(EMBED) is SpendState.OK
    ledger.set_caps({})
    assert ledger.state(EMBED) is SpendState.UNCAPPED


def test_spend_starts_again_at_midnight_utc() -> None:
    clock = at("2026-12-02T23:59:59")
    ledger = SpendLedger({EMBED: 1.0}, clock=clock)
    ledger.charge(EMBED, Charge(credits=1.5))
    assert ledger.state(EMBED) is SpendState.CAPPED and ledger.view().day == "2026-12-02"
    clock.now += 1.0  # 00:00:00 UTC
    assert ledger.state(EMBED) is SpendState.OK
    view = ledger.view()
    assert view.day == "2026-12-03" and view.roles[EMBED].spent == 0.0
    assert view.resets_at == "2026-12-04T00:00:00+00:00"


def test_a_persisted_record_of_today_is_resumed_and_one_of_yesterday_is_dropped(tmp_path: Path) -> None:
    clock = at("2026-12-02T08:00:00")
    first = SpendLedger({EMBED: 1.0}, clock=clock)
    first.charge(EMBED, Charge(credits=0.75))
    saved = tmp_path / "spend.json"
    saved.write_text(first.record.model_dump_json())
    record = SpendRecord.model_validate_json(saved.read_text())
    resumed = SpendLedger({EMBED: 1.0}, clock=clock, record=record)  # a restart, the same day
    assert resumed.view().roles[EMBED].spent == 0.75 and resumed.view().roles[EMBED].calls == 1
    clock.now += 24 * 3600
    assert SpendLedger({EMBED: 1.0}, clock=clock, record=record).view().roles[EMBED].spent == 0.0


def test_the_day_is_the_utc_date() -> None:
    assert utc_day(datetime(2026, 12, 2, 23, 30, tzinfo=UTC).timestamp()) == "2026-12-02"


# -- caps in settings and the config store -------------------------------------------------------


def test_caps_set_by_the_operator_override_the_settings_and_null_removes_one(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    settings = SamespaceSettings(
        budget={"daily_caps": {"code-embedding": 5.0, "rlm": 1.0}}, admin={"config_path": path}
    )
    ConfigStore(path).write(PersistedConfig(spend_caps={EMBED: 0.5, Role.RLM: None, CHAT: 2.0}))
    assert effective_settings(settings).budget.daily_caps == {EMBED: 0.5, CHAT: 2.0}


def test_a_negative_cap_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="daily_caps"):
        SamespaceSettings(budget={"daily_caps": {"rlm": -1.0}})


# -- the fake reports usage.cost as OpenRouter does; the client hands it on -----------------------


def priced_fake(*, report_cost: bool = True) -> FakeState:
    models = [
        ModelEntry(id="e/embed", context_length=512, output_modalities=["embeddings"], prompt_price=0.001),
        ModelEntry(id="c/chat", context_length=8192, prompt_price=0.0001, completion_price=0.002),
    ]
    config = FakeConfig(
        keys={"sk-or-v1-spend": KeyConfig(label="spend")},
        upstreams={"pin": UpstreamBehaviour()},
        models=models,
        report_cost=report_cost,
    )
    return FakeState(config=config)


def priced_client(state: FakeState, seen: list[CallUsage]) -> OpenRouterClient:
    import httpx

    return OpenRouterClient(
        provider_name="host-OR-CodeEmbedding",
        key=SecretStr("sk-or-v1-spend"),
        base_url="http://fake.test/api/v1",
        transport=httpx.ASGITransport(app=build_fake_app(state)),
        on_usage=seen.append,
    )


async def test_each_response_reports_its_cost_in_credits_and_the_client_hands_it_on() -> None:
    state = priced_fake()
    seen: list[CallUsage] = []
    async with priced_client(state, seen) as client:
        await client.embed("e/embed", "pin", ["alpha beta gamma", "delta"], 384)
        result = await client.chat("c/chat", [{"role": "user", "content": "say something short"}])
        price = await client.model_price("c/chat")
    embed, chat = seen
    assert (embed.model, embed.prompt_tokens, embed.completion_tokens) == ("e/embed", 4, 0)
    assert embed.cost == pytest.approx(4 * 0.001)
    assert result.usage is not None and chat.cost == result.usage.cost
    expected = chat.prompt_tokens * 0.0001 + chat.completion_tokens * 0.002
    assert chat.completion_tokens > 0 and chat.cost == pytest.approx(expected)
    assert price == ModelPrice(prompt=0.0001, completion=0.002)
    assert state.usage["sk-or-v1-spend"] == pytest.approx(embed.cost + chat.cost)  # the key's usage grows by it


async def test_without_usage_cost_the_listener_gets_the_tokens_and_the_price_makes_the_estimate() -> None:
    state = priced_fake(report_cost=False)
    seen: list[CallUsage] = []
    async with priced_client(state, seen) as client:
        await client.embed("e/embed", "pin", ["one two three"], 384)
        price = await client.model_price("e/embed")
    (usage,) = seen
    assert usage.cost is None and usage.prompt_tokens == 3
    charge = charge_for(usage, price)
    assert charge.estimated and charge.credits == pytest.approx(3 * 0.001)


@pytest.mark.parametrize(
    "pricing",
    [{"prompt": "-1", "completion": "-1"}, {"prompt": None, "completion": None}, None],
    ids=["variable-price-router", "no-prices", "no-pricing"],
)
async def test_a_price_the_catalogue_does_not_give_is_unknown_not_zero(pricing: dict[str, str | None] | None) -> None:
    import httpx

    def catalogue(request: httpx.Request) -> httpx.Response:
        entries = [{"id": "openrouter/auto", "pricing": pricing}, {"id": "free/model", "pricing": {"prompt": "0"}}]
        return httpx.Response(200, json={"data": entries})

    client = OpenRouterClient(
        provider_name="p",
        key=SecretStr("sk-or-v1-spend"),
        base_url="http://fake.test/api/v1",
        transport=httpx.MockTransport(catalogue),
    )
    async with client:
        assert await client.model_price("openrouter/auto") is None  # charged the unpriced estimate
        assert await client.model_price("not/listed") is None
        assert await client.model_price("free/model") == ModelPrice(prompt=0.0, completion=0.0)  # listed free


async def test_a_failing_usage_listener_never_fails_the_call() -> None:
    state = priced_fake()

    def broken(_: CallUsage) -> None:
        raise RuntimeError("listener down")

    import httpx

    client = OpenRouterClient(
        provider_name="p",
        key=SecretStr("sk-or-v1-spend"),
        base_url="http://fake.test/api/v1",
        transport=httpx.ASGITransport(app=build_fake_app(state)),
        on_usage=broken,
    )
    async with client:
        vectors = await client.embed("e/embed", "pin", ["x"], 384)
    assert vectors.shape == (1, 384)
