"""A virtual container's values as plain Python (cluster/cloud/container.py), the budget's spend
file (cluster/cloud/spend_file.py) and its limits from the settings: what the actors hold, no Ray."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cluster.cloud import (
    SPEND_FILE,
    BudgetLimits,
    cloud_identity,
    read_key_facts,
    read_spend,
    requests_per_minute,
    spend_path,
    starting_config,
)
from cluster.cloud.budget.model import DEFAULT_PERMITS
from cluster.cloud.openai_wire import KeyInfo, RateLimitInfo
from cluster.cloud.spend import SpendRecord
from cluster.config.store import PersistedConfig, PersistedRole, overlay
from cluster.roles import Policy, Role
from cluster.settings import BudgetSettings, RoleRoute, SamespaceSettings

CREATED_WITH = RoleRoute(model="created/model", upstream="created-pin")


def settings(tmp_path: Path) -> SamespaceSettings:
    return SamespaceSettings(
        admin={"config_path": tmp_path / "config.json"},
        store={"data_dir": tmp_path / "store"},
        cloud={"enabled": True, "routes": {"code-embedding": {"model": "static/model", "upstream": "static-pin"}}},
    )


# ---- the route and policy a container starts with ------------------------------------------------


def test_a_container_starts_with_the_pushed_route_and_policy_over_the_ones_it_was_created_with(
    tmp_path: Path,
) -> None:
    pushed = PersistedConfig(
        roles={Role.CODE_EMBEDDING: PersistedRole(model="pushed/model", upstream="pushed-pin")},
        policies={Role.CODE_EMBEDDING: Policy.CLOUD},
    )
    effective = overlay(settings(tmp_path), pushed)
    route, policy = starting_config(effective, Role.CODE_EMBEDDING, CREATED_WITH, Policy.LOCAL)
    assert (route.model, route.upstream, policy) == ("pushed/model", "pushed-pin", Policy.CLOUD)


def test_a_role_the_settings_do_not_name_keeps_the_route_and_policy_it_was_created_with(tmp_path: Path) -> None:
    route, policy = starting_config(settings(tmp_path), Role.RLM, CREATED_WITH, Policy.BACKUP)
    assert (route, policy) == (CREATED_WITH, Policy.BACKUP)


# ---- the encoder space of a cloud route -----------------------------------------------------------


def test_a_cloud_identity_names_the_model_the_pin_and_the_width() -> None:
    identity = cloud_identity(RoleRoute(model="org/embed", upstream="nebius"), 384)
    assert (identity.model, identity.weights_sha256, identity.width) == ("openrouter:org/embed", "upstream:nebius", 384)
    assert identity.normalized
    other_pin = cloud_identity(RoleRoute(model="org/embed", upstream="deepinfra"), 384)
    assert other_pin.space_id != identity.space_id  # another upstream is another space (DESIGN §6)


# ---- the key's rate and funding -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requests", "interval", "rpm"),
    [
        (10, "10s", 60.0),
        (20, "1m", 20.0),
        (120, "1h", 2.0),
        (1, "500ms", 120.0),
        (5, " 30S ", 10.0),
        (10, 10, 60.0),  # a number is seconds
        (10, "10", 60.0),  # no unit is seconds
        (None, "10s", None),
        (0, "10s", None),
        (-1, "10s", None),  # new SDKs: -1, "safe to ignore"
        (10, None, None),
        (10, "fast", None),
        (10, "0s", None),
    ],
)
def test_the_legacy_rate_limit_reads_as_requests_per_minute(
    requests: float | None, interval: str | float | None, rpm: float | None
) -> None:
    assert requests_per_minute(requests, interval) == rpm


def test_key_facts_take_the_credits_from_credits_when_it_answered_else_the_keys_own_limit() -> None:
    info = KeyInfo(limit_remaining=3.5, is_free_tier=False, rate_limit=RateLimitInfo(requests=20, interval="10s"))
    with_credits = read_key_facts(info, 12.0)
    assert (with_credits.rpm, with_credits.credits_remaining, with_credits.funded) == (120.0, 12.0, True)
    assert read_key_facts(info, None).credits_remaining == 3.5
    free = read_key_facts(KeyInfo(is_free_tier=True), None)
    assert (free.rpm, free.is_free_tier, free.credits_remaining, free.funded) == (None, True, None, False)


# ---- the spend file and the budget's limits -----------------------------------------------------------


def test_the_spend_file_lies_beside_the_embedded_store(tmp_path: Path) -> None:
    assert spend_path(settings(tmp_path)) == tmp_path / "store" / SPEND_FILE


def test_spend_is_read_back_and_a_missing_or_torn_file_starts_from_zero(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / SPEND_FILE
    assert read_spend(path) is None
    record = SpendRecord(day="2025-01-02", roles={Role.RLM: {"spent": 1.25}})
    path.write_text(record.model_dump_json())
    assert read_spend(path) == record
    path.write_text('{"day": "2025-01')
    with caplog.at_level(logging.WARNING, logger="samespace.budget"):
        assert read_spend(path) is None
    assert "starts again from 0" in caplog.text


def test_the_budgets_limits_take_the_override_and_the_window_from_the_settings() -> None:
    limits = BudgetLimits.from_settings(BudgetSettings(override=6, window_s=5.0))
    assert (limits.override, limits.window_s, limits.default_permits) == (6, 5.0, DEFAULT_PERMITS)
    assert BudgetLimits.from_settings(BudgetSettings()).override is None
