"""Providers of a role, as discovered, and which of them serve under a policy (DESIGN §3, §4).

A provider is a local actor or a virtual container. Discovery asks the actors themselves
(actors/discovery.py); this module only describes and selects.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Literal

from pydantic import Field

from cluster.roles import Policy, Role, effective_behaviour
from cluster.space import EncoderIdentity
from cluster.types import Strict

# The reason discovery gives a provider actor that did not describe itself in time (often: still
# loading its model). A job may wait for it; anything else ineligible is final for the call.
NOT_ANSWERING = "did not answer"


class ProviderKind(StrEnum):
    LOCAL = "local"
    CLOUD = "cloud"


class ProviderInfo(Strict):
    """What a provider says about itself when asked."""

    name: str
    kind: ProviderKind
    roles: list[Role] = Field(description="Roles this provider can serve.")
    node_id: str
    host: str
    model: str
    hosted: Literal["ray", "sidecar"] = Field(
        default="ray", description="Where a local provider runs: a Ray actor, or a sidecar's server."
    )
    upstream: str | None = Field(default=None, description="Pinned OpenRouter upstream (cloud embedding roles).")
    identity: EncoderIdentity | None = Field(default=None, description="Encoder space (embedding providers).")
    policy_applied: dict[Role, Policy] = Field(
        default_factory=dict, description="The policy the provider itself last received, per role."
    )
    eligible: bool
    reason: str | None = Field(default=None, description="Why it is ineligible.")
    served: int = 0
    failures: int = 0
    last_error: str | None = None

    @property
    def lane_kind(self) -> str:
        """The metrics' `provider_kind`: local, cloud, or sidecar (a local kind hosted by a sidecar)."""
        return "sidecar" if self.hosted == "sidecar" else self.kind.value


def not_answering(name: str, kind: ProviderKind, fault: str) -> ProviderInfo:
    """A provider actor that did not describe itself (`fault`: why, e.g. the exception's class):
    reported as ineligible for every role, never left out of the list."""
    return ProviderInfo(
        name=name,
        kind=kind,
        roles=list(Role),
        node_id="",
        host="",
        model="",
        eligible=False,
        reason=f"{NOT_ANSWERING}: {fault}",
    )


class ProviderView(Strict):
    """A provider as the registry reports it: its own view beside the policy in force."""

    provider: ProviderInfo
    role: Role
    policy_in_force: Policy
    policy_applied: Policy | None
    serves: str = Field(description="'pool' (fan-out / first choice), 'reserve' (backup) or 'no' (policy excludes).")


class Selection(Strict):
    """Who serves a role right now: the primary pool, and the reserve used only if the pool cannot."""

    role: Role
    policy: Policy
    primary: list[ProviderInfo]
    reserve: list[ProviderInfo]
    excluded: dict[str, str] = Field(default_factory=dict, description="provider → why it does not serve")


def select_providers(role: Role, policy: Policy, providers: Sequence[ProviderInfo]) -> Selection:
    """Apply DESIGN §3: local / cloud / aggregate (one pool) / backup (cloud in reserve)."""
    behaviour = effective_behaviour(role, policy)
    local: list[ProviderInfo] = []
    cloud: list[ProviderInfo] = []
    excluded: dict[str, str] = {}
    for provider in sorted(providers, key=lambda p: p.name):
        if role not in provider.roles:
            continue
        if not provider.eligible:
            excluded[provider.name] = f"ineligible: {provider.reason or 'unknown'}"
        elif provider.kind is ProviderKind.LOCAL and not behaviour.local_serves:
            excluded[provider.name] = f"policy {policy.value}: local actors do not serve {role.value}"
        elif provider.kind is ProviderKind.CLOUD and not behaviour.cloud_may_serve:
            excluded[provider.name] = f"policy {policy.value}: the cloud does not serve {role.value}"
        else:
            (local if provider.kind is ProviderKind.LOCAL else cloud).append(provider)
    if behaviour.joins_fan_out:
        return Selection(role=role, policy=policy, primary=local + cloud, reserve=[], excluded=excluded)
    if behaviour.allows_fallback:
        return Selection(role=role, policy=policy, primary=local, reserve=cloud, excluded=excluded)
    return Selection(role=role, policy=policy, primary=local, reserve=[], excluded=excluded)


def provider_views(role: Role, policy: Policy, providers: Sequence[ProviderInfo]) -> list[ProviderView]:
    """Every provider of the role with the policy in force and the one it applies, side by side."""
    selection = select_providers(role, policy, providers)
    pool = {p.name for p in selection.primary}
    reserve = {p.name for p in selection.reserve}
    return [
        ProviderView(
            provider=p,
            role=role,
            policy_in_force=policy,
            policy_applied=p.policy_applied.get(role),
            serves="pool" if p.name in pool else "reserve" if p.name in reserve else "no",
        )
        for p in sorted(providers, key=lambda p: p.name)
        if role in p.roles
    ]


def format_views(role: Role, views: list[ProviderView]) -> list[str]:
    """A role's providers as lines a person reads: kind, model and pin, both policies, eligibility, counts."""
    lines = [f"{role.value}:"]
    if not views:
        lines.append("  (no provider)")
    for v in views:
        p = v.provider
        state = "eligible" if p.eligible else f"INELIGIBLE ({p.reason})"
        applied = v.policy_applied.value if v.policy_applied else "-"
        upstream = f" @{p.upstream}" if p.upstream else ""
        lines.append(
            f"  {p.name:40} {p.kind.value:5} {p.model}{upstream}  policy {v.policy_in_force.value}/applied {applied}"
            f"  serves={v.serves}  {state}  served={p.served} failures={p.failures}"
        )
    return lines
