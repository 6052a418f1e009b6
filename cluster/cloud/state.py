"""What a virtual container holds, and whether that agrees with the durable config.

The admin API reports what the containers say they apply (asked each time, never cached) beside
what the config store says should be in force; any difference is named, so a push that did not
land is seen instead of believed.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import Field

from cluster.roles import Policy, Role
from cluster.settings import RoleRoute, SamespaceSettings
from cluster.types import Strict

__all__ = ["ContainerState", "disagreements"]


class ContainerState(Strict):
    """One virtual container's configuration as it holds it now. Never the key, only whether it has one."""

    name: str
    role: Role
    route: RoleRoute
    policy: Policy
    base_url: str
    key_held: bool = Field(description="Whether a key is in the container's memory.")


def disagreements(effective: SamespaceSettings, states: Iterable[ContainerState]) -> list[str]:
    """Each way a container differs from `effective` (the settings with the durable config over
    them, `config_store.effective_settings`): route, policy or base URL."""
    found = []
    for state in sorted(states, key=lambda s: s.name):
        route = effective.cloud.routes.get(state.role)
        if route is None:
            found.append(f"{state.name}: serves {state.role.value}, which the config routes nowhere")
        elif (state.route.model, state.route.upstream) != (route.model, route.upstream):
            found.append(
                f"{state.name}: holds model {state.route.model!r} pinned to {state.route.upstream!r}, "
                f"the config says {route.model!r} pinned to {route.upstream!r}"
            )
        policy = effective.policy(state.role)
        if state.policy is not policy:
            found.append(f"{state.name}: applies policy {state.policy.value}, the config says {policy.value}")
        if state.base_url != effective.cloud.base_url:
            found.append(f"{state.name}: sends to {state.base_url}, the config says {effective.cloud.base_url}")
    return found
