"""The git webhook (`POST /admin/hooks/git`) at a bounded cost and replay-safe: off means 404 before a
byte of the body is read; the body is a capped stream; the signature covers the method, path, query,
timestamp, delivery id and body; a stale timestamp or a delivery already accepted is refused; a
malformed or non-ASCII header is 400, never 500. The pure parts (serve_apps/admin/_hook_auth.py) with a fake
clock; the route on the real apps (the admin API mounted in the MCP app, as a replica serves it), no Ray.
"""

from __future__ import annotations

import json
import time
from typing import Any, cast

import pytest

from cluster.settings import SamespaceSettings
from cluster.sync import BuildPhase, BuildReport, BuildTicket
from serve_apps.admin._hook_auth import (
    DeliveryLedger,
    DeliveryVerdict,
    MalformedHookHeaders,
    parse_hook_headers,
    sign_delivery,
    signature_valid,
    signed_message,
)
from serve_apps.index_service import IndexService
from serve_apps.mcp import AskService
from tests.support.fakes.asgi import Answer, drive
from tests.support.fakes.virtual_time import VirtualClock

SECRET = "hook-s3cret-for-unit-tests"
PATH = "/admin/hooks/git"
WINDOW_S = 300.0
BODY = json.dumps({"ref": "refs/heads/main", "repository": {"clone_url": "https://github.com/o/r.git"}}).encode()


class FakeIndexes:
    """What the hook asks of `IndexService`: the registrations (none) and the refresh of named indexes."""

    def __init__(self) -> None:
        self.hooked: list[tuple[list[str], list[str]]] = []

    async def registrations(self) -> dict[str, Any]:
        return {}

    async def hook(self, folders: list[str], names: list[str]) -> list[BuildReport]:
        self.hooked.append((folders, names))
        return [
            BuildReport(
                ticket=BuildTicket(index=n, build=f"{n}__b1", job_id=f"job-{n}", folder=f"/src/{n}", submitted_at=0),
                phase=BuildPhase.STARTING,
                done=False,
            )
            for n in names
        ]


def replica(indexes: FakeIndexes, **limits: Any) -> Any:
    """The MCP app with the admin API under /admin, the webhook on (`secret`) or off."""
    from serve_apps.admin import build_admin_asgi
    from serve_apps.mcp import build_asgi_app

    secret = limits.pop("secret", SECRET)
    settings = SamespaceSettings(index={"hook_secret": secret}, limits=limits)
    admin = build_admin_asgi(cast(Any, None), settings, cast(IndexService, indexes))
    return build_asgi_app(cast(Any, None), cast(AskService, None), settings, admin=admin)


def signed_headers(
    body: bytes, query: bytes = b"", timestamp: str | None = None, delivery: str = "d-1", path: str = PATH
) -> list[tuple[bytes, bytes]]:
    stamp = timestamp if timestamp is not None else str(int(time.time()))
    signature = sign_delivery(SECRET, signed_message("POST", path, query, stamp, delivery, body))
    return [
        (b"x-samespace-signature", signature.encode()),
        (b"x-samespace-timestamp", stamp.encode()),
        (b"x-samespace-delivery", delivery.encode()),
    ]


def deliver(app: Any, body: bytes, headers: list[tuple[bytes, bytes]], query: bytes = b"") -> Answer:
    return drive(app, PATH, [body], headers=headers, query=query)


def test_the_signed_string_is_exactly_the_documented_one() -> None:
    message = signed_message("POST", PATH, b"index=api&index=web", "1700000000", "d-1", b'{"a": 1}')
    assert message == b'POST\n/admin/hooks/git\nindex=api&index=web\n1700000000\nd-1\n{"a": 1}'
    signature = sign_delivery(SECRET, message)
    assert signature.startswith("sha256=") and len(signature) == 7 + 64
    assert signature_valid(SECRET, message, signature)
    assert not signature_valid("another-secret-of-16b", message, signature)
    assert not signature_valid(SECRET, message + b" ", signature)


def test_a_hook_that_is_off_is_404_before_a_byte_of_the_body_is_read() -> None:
    indexes = FakeIndexes()
    answer = drive(replica(indexes, secret=None), PATH, [b"x" * 1024] * 100, headers=signed_headers(b""))
    assert (answer.status, answer.chunks_read, indexes.hooked) == (404, 0, [])


def test_a_hook_body_over_the_cap_is_413_naming_the_setting_and_the_rest_is_never_read() -> None:
    indexes = FakeIndexes()
    app = replica(indexes, max_hook_body_bytes=4096)
    answer = drive(app, PATH, [b"x" * 1024] * 200, headers=signed_headers(b"x" * 1024 * 200))
    assert answer.status == 413
    assert "limits.max_hook_body_bytes (SAMESPACE_LIMITS__MAX_HOOK_BODY_BYTES)" in json.loads(answer.body)["detail"]
    assert answer.chunks_read <= 5 and indexes.hooked == []


def test_a_signed_delivery_is_accepted_once_and_a_replay_of_it_is_409() -> None:
    indexes = FakeIndexes()
    app = replica(indexes)
    headers = signed_headers(BODY, query=b"index=api")
    accepted = deliver(app, BODY, headers, query=b"index=api")
    assert accepted.status == 200 and json.loads(accepted.body) == {"refreshed": ["api"]}
    assert deliver(app, BODY, headers, query=b"index=api").status == 409
    assert indexes.hooked == [([], ["api"])]
    other = signed_headers(BODY, query=b"index=api", delivery="d-2")  # a new delivery of the same push
    assert deliver(app, BODY, other, query=b"index=api").status == 200


@pytest.mark.parametrize(
    ("sent_query", "sent_body", "changed"),
    [
        (b"index=api", BODY, {}),  # ?index= added after signing
        (b"", BODY + b" ", {}),  # the body changed
        (b"", BODY, {"delivery": "d-other"}),  # the delivery id changed
        (b"", BODY, {"timestamp": "shift"}),  # the timestamp changed (still within the window)
        (b"", BODY, {"path": "/hooks/git"}),  # signed for another path
    ],
)
def test_the_signature_covers_query_body_delivery_timestamp_and_path(
    sent_query: bytes, sent_body: bytes, changed: dict[str, str]
) -> None:
    indexes = FakeIndexes()
    now = int(time.time())
    signed = signed_headers(BODY, timestamp=str(now), path=changed.get("path", PATH))
    fields = dict(signed)
    if "delivery" in changed:
        fields[b"x-samespace-delivery"] = changed["delivery"].encode()
    if "timestamp" in changed:
        fields[b"x-samespace-timestamp"] = str(now - 1).encode()
    answer = deliver(replica(indexes), sent_body, list(fields.items()), query=sent_query)
    assert answer.status == 401 and json.loads(answer.body)["detail"] == "bad signature"
    assert indexes.hooked == []


@pytest.mark.parametrize("offset_s", [-WINDOW_S - 5, WINDOW_S + 5])
def test_a_timestamp_outside_the_window_is_refused_naming_the_setting(offset_s: float) -> None:
    indexes = FakeIndexes()
    headers = signed_headers(BODY, timestamp=str(int(time.time() + offset_s)))
    answer = deliver(replica(indexes, hook_window_s=WINDOW_S), BODY, headers)
    assert answer.status == 401
    assert "limits.hook_window_s (SAMESPACE_LIMITS__HOOK_WINDOW_S)" in json.loads(answer.body)["detail"]
    assert answer.chunks_read == 0 and indexes.hooked == []


@pytest.mark.parametrize(
    ("header", "value"),
    [
        (b"x-samespace-signature", b"sha256=" + "é".encode("latin-1") * 64),  # non-ASCII
        (b"x-samespace-signature", b"sha256=00"),
        (b"x-samespace-timestamp", "１７００".encode()),  # non-ASCII digits
        (b"x-samespace-timestamp", b"12a"),
        (b"x-samespace-delivery", b"has space"),
        (b"x-samespace-delivery", b""),
    ],
)
def test_a_malformed_or_non_ascii_header_is_400_never_500(header: bytes, value: bytes) -> None:
    indexes = FakeIndexes()
    fields = dict(signed_headers(BODY))
    fields[header] = value
    answer = deliver(replica(indexes), BODY, list(fields.items()))
    assert answer.status == 400
    assert json.loads(answer.body)["detail"] == f"missing or malformed webhook header: {header.decode()}"
    assert value not in answer.body or not value  # the value is never echoed


def test_a_missing_signature_is_401_and_a_missing_delivery_id_400() -> None:
    indexes = FakeIndexes()
    fields = dict(signed_headers(BODY))
    unsigned = {k: v for k, v in fields.items() if k != b"x-samespace-signature"}
    assert deliver(replica(indexes), BODY, list(unsigned.items())).status == 401
    anonymous = {k: v for k, v in fields.items() if k != b"x-samespace-delivery"}
    assert deliver(replica(indexes), BODY, list(anonymous.items())).status == 400
    assert indexes.hooked == []


def test_parsed_headers_name_the_bad_ones_never_their_values() -> None:
    with pytest.raises(MalformedHookHeaders) as bad:
        parse_hook_headers({"x-samespace-signature": "sha256=zz", "x-samespace-timestamp": "1"})
    assert bad.value.headers == ["x-samespace-delivery", "x-samespace-signature"]
    assert "zz" not in str(bad.value)


def test_the_ledger_refuses_stale_and_replayed_deliveries_and_forgets_them_once_stale() -> None:
    clock = VirtualClock()
    clock.now = 1000.0
    ledger = DeliveryLedger(window_s=60, max_entries=10, clock=clock)
    assert ledger.admit("a", 1000) is DeliveryVerdict.ACCEPTED
    assert ledger.admit("a", 1000) is DeliveryVerdict.REPLAYED
    assert ledger.admit("a", 1010) is DeliveryVerdict.REPLAYED  # the id, whatever its timestamp
    assert ledger.admit("b", 939) is DeliveryVerdict.STALE
    assert ledger.admit("c", 1061) is DeliveryVerdict.STALE
    assert ledger.fresh(940) and ledger.fresh(1060) and not ledger.fresh(1060.5)
    clock.now = 1060.0
    assert ledger.admit("a", 1000) is DeliveryVerdict.REPLAYED  # still within the window
    clock.now = 1061.0
    assert ledger.admit("a", 1000) is DeliveryVerdict.STALE  # past it: stale, and forgotten
    assert len(ledger) == 0


def test_the_ledger_is_bounded_and_refuses_new_deliveries_while_full() -> None:
    clock = VirtualClock()
    ledger = DeliveryLedger(window_s=60, max_entries=3, clock=clock)
    assert [ledger.admit(d, 0) for d in "abc"] == [DeliveryVerdict.ACCEPTED] * 3
    assert ledger.admit("d", 0) is DeliveryVerdict.FULL
    assert ledger.admit("a", 0) is DeliveryVerdict.REPLAYED  # a replay is still a replay
    clock.now = 61.0  # a, b, c age out
    assert ledger.admit("d", 30) is DeliveryVerdict.ACCEPTED and len(ledger) == 1
