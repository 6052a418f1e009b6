"""Error classification: the one place an HTTP outcome of an OpenAI-compatible call becomes an UpstreamError.

`read_json` turns a finished response into its JSON body or a fault carrier; `upstream_faults()`
maps every carrier and every lower-level failure (httpx transport, timeout, validation) to the most
specific `UpstreamError` subclass, with any upstream text scrubbed of the key (DESIGN §8).
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import math
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from cluster.errors import (
    AuthFailed,
    MalformedResponse,
    PaymentRequired,
    RateLimited,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnavailable,
)

__all__ = [
    "IN_FLIGHT_LIMIT_SOURCE",
    "IN_FLIGHT_REASON",
    "MAX_DETAIL_CHARS",
    "OVERLOADED_STATUSES",
    "REDACTED",
    "ShapeFault",
    "error_for_status",
    "parse_retry_after",
    "read_json",
    "upstream_faults",
]

MAX_DETAIL_CHARS = 300  # upstream error text kept in our messages
# 402 metadata that marks the transient in-flight spending budget (retry after Retry-After).
IN_FLIGHT_REASON = "in_flight_budget_exhausted"
IN_FLIGHT_LIMIT_SOURCE = "openrouter_in_flight_budget"
OVERLOADED_STATUSES = frozenset({529})  # "Provider Overloaded" (outside 5xx semantics, same meaning)
REDACTED = "********"  # what a secret reads as in any text we build


class _ErrorBody(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    code: int | str | None = None
    message: str = ""
    metadata: dict[str, Any] | None = None


class _ErrorEnvelope(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    error: _ErrorBody


class _StatusFault(Exception):
    """Internal carrier: a response whose status (or in-band error) is a failure."""

    def __init__(self, response: httpx.Response, status: int, body: _ErrorBody | None) -> None:
        super().__init__(status)
        self.response = response
        self.status = status
        self.body = body


class ShapeFault(Exception):
    """Carrier: a 2xx body that is not the expected shape. Raise it inside `upstream_faults`, which
    turns it into MalformedResponse."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """`Retry-After` as seconds: delta-seconds or an HTTP-date (RFC 9110 §10.2.3); None if absent or unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def _redact(text: str, secret: SecretStr | None) -> str:
    if secret is not None:
        raw = secret.get_secret_value()
        if raw:
            text = text.replace(raw, REDACTED)
    return text


def _detail(where: str, body: _ErrorBody | None, fallback_text: str, secret: SecretStr | None) -> str:
    message = body.message if body is not None and body.message else fallback_text.strip()
    extras = []
    metadata = (body.metadata if body is not None else None) or {}
    for field in ("reason", "limit_source", "provider_name", "error_type"):
        value = metadata.get(field)
        if isinstance(value, str) and value:
            extras.append(f"{field}={value}")
    text = message[:MAX_DETAIL_CHARS] or "(empty body)"
    if extras:
        text = f"{text} [{', '.join(extras)}]"
    return _redact(f"{where}: {text}", secret)


def _status_error(provider: str, where: str, fault: _StatusFault, secret: SecretStr | None) -> UpstreamError:
    status, body, headers = fault.status, fault.body, fault.response.headers
    detail = _detail(where, body, "" if body is not None else _safe_text(fault.response), secret)
    metadata = body.metadata if body is not None else None
    return error_for_status(provider, detail, status, parse_retry_after(headers.get("Retry-After")), metadata)


def _hinted_seconds(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return max(0.0, float(value))
    return None


def error_for_status(
    provider: str, detail: str, status: int, retry_after: float | None, metadata: Mapping[str, Any] | None
) -> UpstreamError:
    """The error one failed OpenRouter answer means: the one mapping of an HTTP status (with its
    `Retry-After` in seconds, if any, and the error body's `metadata`) to an UpstreamError, shared by
    this client and the answers a sidecar relays (cluster/fleet/commands.py).

    429 RateLimited. 402 (DESIGN §7 / OpenRouter limits): the in-flight budget (`reason` or
    `limit_source` says so) is transient, RateLimited; `weight_exceeds_budget` and `openrouter_credits`
    are PaymentRequired even with a Retry-After; any other 402 is RateLimited with a Retry-After, else
    PaymentRequired. 401/403 AuthFailed, 408 UpstreamTimeout, 5xx and 529 UpstreamUnavailable, anything
    else UpstreamError. Without a Retry-After, `metadata.retry_after_seconds` stands in for it.
    `detail` is used as given: the caller has already scrubbed and capped it."""
    meta: Mapping[str, Any] = metadata or {}
    if retry_after is None:
        retry_after = _hinted_seconds(meta.get("retry_after_seconds"))
    if status == 429:
        return RateLimited(provider, detail, 429, retry_after)
    if status == 402:
        reason, source = meta.get("reason"), meta.get("limit_source")
        in_flight = reason == IN_FLIGHT_REASON or source == IN_FLIGHT_LIMIT_SOURCE
        too_big = reason == "weight_exceeds_budget" or source == "openrouter_credits"
        if in_flight or (retry_after is not None and not too_big):
            return RateLimited(provider, detail, 402, retry_after)
        return PaymentRequired(provider, detail, 402)
    if status in (401, 403):
        return AuthFailed(provider, detail, status)
    if status == 408:
        return UpstreamTimeout(provider, detail, status)
    if status >= 500 or status in OVERLOADED_STATUSES:
        return UpstreamUnavailable(provider, detail, status)
    return UpstreamError(provider, detail, status)


def _safe_text(response: httpx.Response) -> str:
    try:
        return response.text
    except (UnicodeDecodeError, httpx.ResponseNotRead):
        return ""


@contextlib.contextmanager
def upstream_faults(provider: str, where: str, *, secret: SecretStr | None = None) -> Iterator[None]:
    """Map every lower-level failure of one OpenRouter call to the most specific UpstreamError.

    `where` names the call ("POST /embeddings"); `secret` is scrubbed from any upstream text.
    """
    try:
        yield
    except _StatusFault as fault:
        raise _status_error(provider, where, fault, secret) from None
    except ShapeFault as fault:
        raise MalformedResponse(provider, _redact(f"{where}: {fault.what}", secret)) from None
    except ValidationError as exc:
        first = exc.errors()[0] if exc.error_count() else {"loc": (), "msg": "?"}
        loc = ".".join(str(part) for part in first["loc"]) or "(root)"
        raise MalformedResponse(provider, f"{where}: unexpected shape at {loc}: {first['msg']}") from None
    except (httpx.TimeoutException, TimeoutError) as exc:
        raise UpstreamTimeout(provider, f"{where}: no answer in time ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise UpstreamUnavailable(provider, f"{where}: transport failed ({type(exc).__name__})") from exc


def read_json(response: httpx.Response) -> Any:
    """The JSON body of a finished response; a failure status or an in-band error raises a carrier that
    `upstream_faults` maps."""
    try:
        payload = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        if response.is_success:
            raise ShapeFault(f"HTTP {response.status_code} body is not JSON") from None
        raise _StatusFault(response, response.status_code, None) from None
    error_body = _error_body(payload)
    if not response.is_success:
        raise _StatusFault(response, response.status_code, error_body)
    if error_body is not None:
        # OpenRouter may answer 200 with an in-band error; its code is the real status.
        code = error_body.code
        status = int(code) if isinstance(code, int) or (isinstance(code, str) and code.isdigit()) else 502
        raise _StatusFault(response, status, error_body)
    return payload


def _error_body(payload: Any) -> _ErrorBody | None:
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        try:
            return _ErrorEnvelope.model_validate(payload).error
        except ValidationError:
            return None
    return None
