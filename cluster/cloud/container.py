"""A virtual container's values, as plain Python: the route and policy it starts with, the encoder
space its route embeds into, and the key's limits as GET /key and /credits report them.

`actors/virtual_container.py` is the Ray shell that holds them (and the key) and makes the calls.
"""

from __future__ import annotations

from cluster.cloud.budget import KeyFacts
from cluster.cloud.openai_wire import KeyInfo
from cluster.roles import Policy, Role
from cluster.settings import RoleRoute, SamespaceSettings
from cluster.space import EncoderIdentity

__all__ = ["cloud_identity", "read_key_facts", "requests_per_minute", "starting_config"]

# OpenRouter's legacy rate-limit intervals: '10s', '1m', '1h', '500ms'.
_INTERVAL_UNITS_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def starting_config(
    effective: SamespaceSettings, role: Role, route: RoleRoute, policy: Policy
) -> tuple[RoleRoute, Policy]:
    """The route and policy a container (re)starts with: those of `effective` (the settings with the
    durable config over them) where it names them for `role`, else the ones it was created with. A
    restarted container so comes back with the pushed route and policy, never the static ones."""
    started_route = effective.cloud.routes.get(role, route)
    started_policy = effective.policy(role) if role in effective.policies else policy
    return started_route, started_policy


def cloud_identity(route: RoleRoute, width: int) -> EncoderIdentity:
    """The encoder space of a pinned cloud route: model slug, pinned upstream, width, token cap."""
    return EncoderIdentity(
        model=f"openrouter:{route.model}",
        weights_sha256=f"upstream:{route.upstream}",
        width=width,
        normalized=True,
        max_seq_length=route.max_input_tokens,
    )


def requests_per_minute(requests: float | None, interval: str | float | None) -> float | None:
    """OpenRouter's legacy `rate_limit {requests, interval}` as requests per minute ('10s', '1m', '1h');
    None when either is missing or unreadable."""
    if requests is None or requests <= 0 or interval is None:
        return None
    if isinstance(interval, int | float):
        seconds = float(interval)
    else:
        text = interval.strip().lower()
        unit = next((u for u in ("ms", "s", "m", "h") if text.endswith(u)), "s")
        try:
            seconds = float(text.removesuffix(unit)) * _INTERVAL_UNITS_S[unit]
        except ValueError:
            return None
    return requests / seconds * 60.0 if seconds > 0 else None


def read_key_facts(info: KeyInfo, credits_remaining: float | None) -> KeyFacts:
    """What the budget sizes itself from (DESIGN §7): the key's rate, whether it is a free-tier key,
    and the credits left (`credits_remaining` from /credits when it answered, which needs a
    management key; else the key's own remaining limit)."""
    rpm = None
    if info.rate_limit is not None:
        rpm = requests_per_minute(info.rate_limit.requests, info.rate_limit.interval)
    remaining = credits_remaining if credits_remaining is not None else info.limit_remaining
    return KeyFacts(rpm=rpm, is_free_tier=bool(info.is_free_tier), credits_remaining=remaining)
