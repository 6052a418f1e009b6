"""What a virtual container's failed OpenRouter call puts on the wire besides `status` and `retryAfterS`:
the whitelisted keys of OpenRouter's error `metadata` (`reason`, `limit_source`, `retry_after_seconds`,
short strings or numbers, scrubbed of the key), so that the master tells a 402's transient in-flight
budget from spent credits; nothing else of the upstream body, which may echo a secret."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from sidecar.wire import MAX_METADATA_CHARS, error_metadata, error_result, key_config_frame
from tests.support.fakes.openrouter_fake import KeyConfig
from tests.support.sidecar_agents import (
    OR_BASE_URL,
    OR_KEY_A,
    FakeOpenRouter,
    WsMaster,
    make_settings,
    or_serve,
    running,
    wait_until,
)

pytestmark = pytest.mark.timeout(90)

UPSTREAM_CANARY = "sk-or-v1-canary-echoed-by-upstream-0000000000"
EMBED = {"type": "command", "id": "e1", "action": "virtual-embed", "role": "code-embedding", "texts": ["x"]}


async def failed_embed(master: WsMaster, openrouter: FakeOpenRouter) -> dict[str, Any]:
    """One embed command's result from a sidecar whose OpenRouter is `openrouter`."""
    async with running(make_settings(master.url, [or_serve()], openrouter_base_url=OR_BASE_URL), openrouter=openrouter):
        await wait_until(lambda: master.of_type("heartbeat"), what="a heartbeat")
        await master.send(key_config_frame("k1", SecretStr(OR_KEY_A), None))
        await master.result("k1")
        await master.send({**EMBED, "permit": "permit-1"})
        return await master.result("e1")


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (
            KeyConfig(label="key-a", in_flight_budget=0, in_flight_retry_after_s=2),
            {
                "status": 402,
                "retryAfterS": 2.0,
                "metadata": {"reason": "in_flight_budget_exhausted", "limit_source": "openrouter_in_flight_budget"},
            },
        ),
        (KeyConfig(label="key-a", credits=0.0), {"status": 402, "metadata": {"limit_source": "openrouter_credits"}}),
    ],
)
async def test_a_402_from_the_fake_carries_why_it_was_refused(
    master: WsMaster, key: KeyConfig, expected: dict[str, Any]
) -> None:
    openrouter = FakeOpenRouter()
    openrouter.state.config.keys[OR_KEY_A] = key
    result = await failed_embed(master, openrouter)
    assert {k: v for k, v in result.items() if k not in ("type", "id", "error")} == expected
    assert result["error"].startswith("openrouter 402: ")


async def test_only_the_whitelisted_metadata_crosses_the_wire_scrubbed_before_it_is_cut(master: WsMaster) -> None:
    metadata = {
        "reason": "weight_exceeds_budget",
        "limit_source": "z" * (MAX_METADATA_CHARS - 5) + OR_KEY_A,  # the key straddles the cut
        "retry_after_seconds": 9,
        "raw": UPSTREAM_CANARY,
        "provider_name": UPSTREAM_CANARY,
        "headers": {"authorization": f"Bearer {OR_KEY_A}"},
    }
    body = {"error": {"code": 402, "message": "Request weight exceeds budget", "metadata": metadata}}
    openrouter = FakeOpenRouter()
    openrouter.transport = httpx.MockTransport(
        lambda request: httpx.Response(402, json=body, headers={"Retry-After": "5"})
    )
    result = await failed_embed(master, openrouter)
    assert result == {
        "type": "result",
        "id": "e1",
        "error": "openrouter 402: Request weight exceeds budget",
        "status": 402,
        "retryAfterS": 5.0,
        "metadata": {
            "reason": "weight_exceeds_budget",
            "limit_source": "z" * (MAX_METADATA_CHARS - 5) + "*****",
            "retry_after_seconds": 9,
        },
    }
    sent = json.dumps(result)
    assert UPSTREAM_CANARY not in sent and "sk-or-v1" not in sent and OR_KEY_A[:12] not in sent


async def test_the_metadata_hint_fills_a_missing_retry_after_and_other_bodies_add_no_metadata(master: WsMaster) -> None:
    body = {"error": {"code": 429, "message": "slow down", "metadata": {"retry_after_seconds": 3, "error_type": "x"}}}
    openrouter = FakeOpenRouter()
    openrouter.transport = httpx.MockTransport(lambda request: httpx.Response(429, json=body))
    result = await failed_embed(master, openrouter)
    assert (result["status"], result["retryAfterS"], result["metadata"]) == (429, 3.0, {"retry_after_seconds": 3})


def test_error_metadata_keeps_only_short_plain_values_of_the_whitelisted_keys() -> None:
    assert error_metadata({"reason": "r" * 500, "limit_source": "s", "retry_after_seconds": 1.5, "x": "y"}) == {
        "reason": "r" * MAX_METADATA_CHARS,
        "limit_source": "s",
        "retry_after_seconds": 1.5,
    }
    bad = {"reason": ["r"], "limit_source": {"a": 1}, "retry_after_seconds": True}
    assert error_metadata(bad) == {}
    assert error_metadata({"retry_after_seconds": float("nan")}) == {}
    for not_a_dict in (None, "reason", ["reason"], 3):
        assert error_metadata(not_a_dict) == {}


def test_an_error_result_names_metadata_only_when_something_is_kept() -> None:
    assert error_result("c", "no", status=503, metadata={"provider_name": "p"}) == {
        "type": "result",
        "id": "c",
        "error": "no",
        "status": 503,
    }
    assert error_result("c", "no", status=402, metadata={"reason": "weight_exceeds_budget", "raw": "x"})[
        "metadata"
    ] == {"reason": "weight_exceeds_budget"}
