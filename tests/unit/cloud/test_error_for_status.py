"""cluster.cloud.error_for_status: the one mapping of a failed OpenRouter answer (status, Retry-After,
error metadata) to an UpstreamError, as the in-cluster client reads it from a response and as the
fleet reads it from a sidecar's result."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from cluster.cloud import error_for_status, read_json, upstream_faults
from cluster.errors import (
    AuthFailed,
    PaymentRequired,
    RateLimited,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnavailable,
)

IN_FLIGHT = {"reason": "in_flight_budget_exhausted", "limit_source": "openrouter_in_flight_budget"}


@pytest.mark.parametrize(
    ("status", "retry_after", "metadata", "error", "expected_retry"),
    [
        (429, 3.0, None, RateLimited, 3.0),
        (429, None, None, RateLimited, None),
        (402, None, None, PaymentRequired, None),
        (402, 1.5, None, RateLimited, 1.5),
        (402, 2.0, IN_FLIGHT, RateLimited, 2.0),
        (402, None, {"reason": "in_flight_budget_exhausted"}, RateLimited, None),
        (402, None, {"limit_source": "openrouter_in_flight_budget"}, RateLimited, None),
        (402, 5.0, {"reason": "weight_exceeds_budget"}, PaymentRequired, None),
        (402, 5.0, {"limit_source": "openrouter_credits"}, PaymentRequired, None),
        (402, 5.0, {"limit_source": "openrouter_key_limit"}, RateLimited, 5.0),
        (401, None, None, AuthFailed, None),
        (403, None, None, AuthFailed, None),
        (408, None, None, UpstreamTimeout, None),
        (500, None, None, UpstreamUnavailable, None),
        (503, 4.0, None, UpstreamUnavailable, None),
        (529, None, None, UpstreamUnavailable, None),
        (400, None, None, UpstreamError, None),
        (404, None, {"reason": "weight_exceeds_budget"}, UpstreamError, None),
    ],
)
def test_each_status_maps_to_the_most_specific_error(
    status: int,
    retry_after: float | None,
    metadata: dict[str, Any] | None,
    error: type[UpstreamError],
    expected_retry: float | None,
) -> None:
    got = error_for_status("p", "POST /embeddings: no", status, retry_after, metadata)
    assert type(got) is error
    assert (got.provider, got.detail, got.status) == ("p", "POST /embeddings: no", status)
    if isinstance(got, RateLimited):
        assert got.retry_after_s == expected_retry


@pytest.mark.parametrize(
    ("hint", "expected"),
    [(4, 4.0), (2.5, 2.5), (-3, 0.0), (True, None), ("7", None), (float("nan"), None), (float("inf"), None)],
)
def test_metadata_retry_after_seconds_stands_in_for_a_missing_retry_after(hint: Any, expected: float | None) -> None:
    limited = error_for_status("p", "d", 429, None, {"retry_after_seconds": hint})
    assert isinstance(limited, RateLimited) and limited.retry_after_s == expected
    # a 402 with only the hint is transient too (a Retry-After in the body), unless it is spent credits
    in_body = error_for_status("p", "d", 402, None, {"retry_after_seconds": hint})
    assert type(in_body) is (RateLimited if expected is not None else PaymentRequired)


def test_a_retry_after_header_wins_over_the_metadata_hint() -> None:
    got = error_for_status("p", "d", 429, 2.0, {"retry_after_seconds": 30})
    assert isinstance(got, RateLimited) and got.retry_after_s == 2.0


def _raised(response: httpx.Response) -> UpstreamError:
    with pytest.raises(UpstreamError) as caught, upstream_faults("p", "POST /embeddings"):
        read_json(response)
    return caught.value


def test_the_in_cluster_client_reads_the_hint_from_the_error_body() -> None:
    body = {"error": {"code": 402, "message": "busy", "metadata": {**IN_FLIGHT, "retry_after_seconds": 6}}}
    got = _raised(httpx.Response(402, json=body))
    assert isinstance(got, RateLimited) and (got.status, got.retry_after_s) == (402, 6.0)
    assert "reason=in_flight_budget_exhausted" in got.detail


def test_the_in_cluster_client_reads_weight_exceeds_budget_as_payment_required_despite_retry_after() -> None:
    body = {"error": {"code": 402, "message": "too big", "metadata": {"reason": "weight_exceeds_budget"}}}
    got = _raised(httpx.Response(402, json=body, headers={"Retry-After": "5"}))
    assert type(got) is PaymentRequired and got.status == 402
