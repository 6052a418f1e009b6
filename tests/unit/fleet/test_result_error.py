"""A failed virtual command's result → the error the in-cluster OpenRouter client raises for the same
answer: `status`, `retryAfterS` and OpenRouter's error `metadata` (its whitelisted keys only) read
through cluster.cloud.error_for_status, so a 402 means the same on both paths."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from cluster.cloud import read_json, upstream_faults
from cluster.errors import PaymentRequired, RateLimited, UpstreamError, UpstreamUnavailable
from cluster.fleet.commands import result_error
from cluster.fleet.frames import ResultFrame, parse_frame
from sidecar.wire import error_result

AGENT, PROVIDER = "agent-1", "ws-7-OR-CodeEmbedding"


def failed(**extra: Any) -> ResultFrame:
    """A failed command's result as the master parses it off the wire."""
    frame = parse_frame(json.dumps({"type": "result", "id": "c1", "error": "openrouter 402: no", **extra}))
    assert isinstance(frame, ResultFrame)
    return frame


def test_a_402_with_retry_after_but_weight_exceeds_budget_is_payment_required() -> None:
    # before: any 402 with a Retry-After was RateLimited on this path
    error = result_error(
        AGENT, PROVIDER, failed(status=402, retryAfterS=5, metadata={"reason": "weight_exceeds_budget"})
    )
    assert type(error) is PaymentRequired and (error.provider, error.status) == (PROVIDER, 402)
    credits = result_error(
        AGENT, PROVIDER, failed(status=402, retryAfterS=5, metadata={"limit_source": "openrouter_credits"})
    )
    assert type(credits) is PaymentRequired


@pytest.mark.parametrize(
    "metadata",
    [{"limit_source": "openrouter_in_flight_budget"}, {"reason": "in_flight_budget_exhausted"}],
)
def test_a_402_for_the_in_flight_budget_without_retry_after_is_rate_limited(metadata: dict[str, Any]) -> None:
    error = result_error(AGENT, PROVIDER, failed(status=402, metadata=metadata))
    assert isinstance(error, RateLimited) and (error.status, error.retry_after_s) == (402, None)
    assert error.provider == PROVIDER


def test_metadata_retry_after_seconds_stands_in_for_a_missing_retry_after_s() -> None:
    hinted = result_error(AGENT, PROVIDER, failed(status=429, metadata={"retry_after_seconds": 4}))
    assert isinstance(hinted, RateLimited) and hinted.retry_after_s == 4.0
    in_flight = result_error(
        AGENT,
        PROVIDER,
        failed(status=402, metadata={"reason": "in_flight_budget_exhausted", "retry_after_seconds": 2.5}),
    )
    assert isinstance(in_flight, RateLimited) and in_flight.retry_after_s == 2.5
    header = result_error(AGENT, PROVIDER, failed(status=429, retryAfterS=1, metadata={"retry_after_seconds": 30}))
    assert isinstance(header, RateLimited) and header.retry_after_s == 1.0  # Retry-After wins


@pytest.mark.parametrize(
    "metadata",
    [
        "weight_exceeds_budget",
        ["weight_exceeds_budget"],
        None,
        {"reason": {"nested": "weight_exceeds_budget"}},
        {"reason": ["weight_exceeds_budget"]},
        {"Reason": "weight_exceeds_budget"},
        {"other": "weight_exceeds_budget"},
    ],
)
def test_metadata_that_is_not_a_dict_of_plain_whitelisted_values_is_ignored(metadata: Any) -> None:
    error = result_error(AGENT, PROVIDER, failed(status=402, retryAfterS=1.5, metadata=metadata))
    assert isinstance(error, RateLimited) and error.retry_after_s == 1.5  # as without metadata


@pytest.mark.parametrize("hint", [True, "7", -1.0, {"s": 3}])
def test_a_retry_after_that_is_not_a_non_negative_number_is_ignored(hint: Any) -> None:
    error = result_error(AGENT, PROVIDER, failed(status=429, retryAfterS=hint))
    assert isinstance(error, RateLimited) and error.retry_after_s is None


def test_without_a_status_metadata_changes_nothing() -> None:
    error = result_error(AGENT, PROVIDER, failed(metadata={"reason": "weight_exceeds_budget"}))
    assert type(error) is UpstreamUnavailable and (error.provider, error.status) == (AGENT, None)


def _in_cluster(status: int, headers: dict[str, str], metadata: dict[str, Any] | None) -> UpstreamError:
    body: dict[str, Any] = {"code": status, "message": "no"}
    if metadata is not None:
        body["metadata"] = metadata
    with pytest.raises(UpstreamError) as caught, upstream_faults(PROVIDER, "POST /embeddings"):
        read_json(httpx.Response(status, json={"error": body}, headers=headers))
    return caught.value


@pytest.mark.parametrize(
    ("status", "retry_after", "metadata"),
    [
        (402, 5, {"reason": "weight_exceeds_budget"}),
        (402, 5, {"limit_source": "openrouter_credits"}),
        (402, None, {"limit_source": "openrouter_in_flight_budget"}),
        (402, 1, {"reason": "in_flight_budget_exhausted", "limit_source": "openrouter_in_flight_budget"}),
        (402, None, {"retry_after_seconds": 3}),
        (402, 2, None),
        (402, None, None),
        (429, None, {"retry_after_seconds": 8}),
        (429, 3, {"error_type": "rate_limit_exceeded"}),
        (529, None, None),
        (408, None, None),
    ],
)
def test_a_relayed_answer_means_what_the_same_answer_means_to_the_in_cluster_client(
    status: int, retry_after: int | None, metadata: dict[str, Any] | None
) -> None:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    direct = _in_cluster(status, headers, metadata)
    wire = error_result("c1", "openrouter: no", status=status, retry_after_s=retry_after, metadata=metadata)
    frame = parse_frame(json.dumps(wire))
    assert isinstance(frame, ResultFrame)
    relayed = result_error(AGENT, PROVIDER, frame)
    assert (type(relayed), relayed.status) == (type(direct), direct.status)
    assert getattr(relayed, "retry_after_s", None) == getattr(direct, "retry_after_s", None)
