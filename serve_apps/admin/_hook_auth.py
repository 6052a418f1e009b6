"""The git webhook's authentication (`POST /admin/hooks/git`): a signature over the whole request and
replay protection. Pure: no I/O, the clock injected.

A delivery carries three headers, all ASCII:

    X-Samespace-Timestamp  the time it was signed, Unix seconds, 1-12 decimal digits
    X-Samespace-Delivery   its id, unique per delivery: 1-128 of A-Z a-z 0-9 . _ : -
    X-Samespace-Signature  "sha256=" + the hex HMAC-SHA256, keyed with `index.hook_secret` (UTF-8),
                           of the signed string:

    METHOD "\\n" PATH "\\n" QUERY "\\n" TIMESTAMP "\\n" DELIVERY "\\n" BODY

where METHOD is "POST", PATH the request's path as the server receives it ("/admin/hooks/git",
UTF-8), QUERY the raw query string as sent, without the "?" ("" when none, e.g. "index=api"),
TIMESTAMP and DELIVERY the two headers' values, and BODY the raw body bytes. So the named indexes
(`?index=`), the time and the id are covered as much as the body is.

A missing signature is 401, a malformed or non-ASCII header 400, a timestamp more than
`limits.hook_window_s` from now 401, a bad signature 401, a delivery id already accepted 409.
Accepted ids are remembered in memory by each replica (`DeliveryLedger`) until their timestamp leaves
the window, at most `limits.max_hook_deliveries` of them (429 while full): with several replicas, a
replay inside the window can reach each replica once at most, and a refresh it triggers joins the
build already running.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
from collections.abc import Mapping
from enum import StrEnum

from pydantic import Field, ValidationError

from cluster.types import Clock, Strict

__all__ = [
    "DELIVERY_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "DeliveryLedger",
    "DeliveryVerdict",
    "HookHeaders",
    "MalformedHookHeaders",
    "parse_hook_headers",
    "sign_delivery",
    "signature_valid",
    "signed_message",
]

SIGNATURE_HEADER = "x-samespace-signature"
TIMESTAMP_HEADER = "x-samespace-timestamp"
DELIVERY_HEADER = "x-samespace-delivery"
SIGNATURE_PREFIX = "sha256="


class HookHeaders(Strict):
    """A delivery's three headers, checked: ASCII only, the shapes above."""

    signature: str = Field(pattern=r"^sha256=[0-9a-f]{64}$")
    timestamp: str = Field(pattern=r"^[0-9]{1,12}$")
    delivery: str = Field(pattern=r"^[A-Za-z0-9._:-]{1,128}$")

    @property
    def signed_at(self) -> int:
        return int(self.timestamp)


class MalformedHookHeaders(ValueError):
    """A header missing or of the wrong shape: `headers` names them, never their values."""

    def __init__(self, headers: list[str]) -> None:
        super().__init__(headers)
        self.headers = headers

    def __str__(self) -> str:
        return "missing or malformed webhook header: " + ", ".join(self.headers)


_HEADER_OF = {"signature": SIGNATURE_HEADER, "timestamp": TIMESTAMP_HEADER, "delivery": DELIVERY_HEADER}


def parse_hook_headers(headers: Mapping[str, str]) -> HookHeaders:
    """The three headers of a request (lower-case names), or MalformedHookHeaders."""
    values = {field: headers.get(header) for field, header in _HEADER_OF.items()}
    try:
        return HookHeaders.model_validate(values)
    except ValidationError as exc:
        raise MalformedHookHeaders(sorted({_HEADER_OF[str(e["loc"][0])] for e in exc.errors()})) from None


def signed_message(method: str, path: str, query: bytes, timestamp: str, delivery: str, body: bytes) -> bytes:
    """The bytes the signature covers (the module docstring's signed string)."""
    head = b"\n".join((method.encode("ascii"), path.encode("utf-8"), query, timestamp.encode(), delivery.encode()))
    return head + b"\n" + body


def sign_delivery(secret: str, message: bytes) -> str:
    """The X-Samespace-Signature value of a signed string: what a sender (or a test) puts in the header."""
    return SIGNATURE_PREFIX + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_valid(secret: str, message: bytes, signature: str) -> bool:
    """Whether a checked (ASCII) signature header signs `message`, compared in constant time."""
    return hmac.compare_digest(sign_delivery(secret, message).encode(), signature.encode("ascii"))


class DeliveryVerdict(StrEnum):
    ACCEPTED = "accepted"
    STALE = "stale"  # the timestamp is more than the window from now
    REPLAYED = "replayed"  # this id was accepted within the window
    FULL = "full"  # max_entries ids are remembered: nothing new until some age out


class DeliveryLedger:
    """The delivery ids this replica accepted, each kept until its timestamp leaves the window (a replay
    after that is stale anyway), at most `max_entries`. Record only signed deliveries, or anyone could
    fill it or block an id in advance."""

    def __init__(self, window_s: float, max_entries: int, clock: Clock) -> None:
        self._window_s = window_s
        self._max = max_entries
        self._clock = clock
        self._expiry: dict[str, float] = {}
        self._by_expiry: list[tuple[float, str]] = []  # heap of (expiry, id), one entry per remembered id

    def __len__(self) -> int:
        return len(self._expiry)

    def fresh(self, signed_at: float) -> bool:
        """Whether a timestamp lies within the window of now (checked again by `admit`)."""
        return abs(self._clock() - signed_at) <= self._window_s

    def admit(self, delivery: str, signed_at: float) -> DeliveryVerdict:
        """Remember `delivery` and accept it, unless it is stale, already seen, or there is no room."""
        now = self._clock()
        while self._by_expiry and self._by_expiry[0][0] < now:
            _, old = heapq.heappop(self._by_expiry)
            del self._expiry[old]
        if abs(now - signed_at) > self._window_s:
            return DeliveryVerdict.STALE
        if delivery in self._expiry:
            return DeliveryVerdict.REPLAYED
        if len(self._expiry) >= self._max:
            return DeliveryVerdict.FULL
        expiry = signed_at + self._window_s
        self._expiry[delivery] = expiry
        heapq.heappush(self._by_expiry, (expiry, delivery))
        return DeliveryVerdict.ACCEPTED
