"""Config pushes: put routes, policies, a base URL and the key in force on the actors (DESIGN §8),
and say, from a driver, whether the roles that need the key have one.

Above the registry (which starts the virtual containers) and the dispatchers (which take each
role's policy): nothing here is persisted; the admin API writes the config store first
(`cluster/admin/push_plan.py`), so an actor restarting meanwhile reads the same values.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping

import ray
from pydantic import SecretStr
from ray import ObjectRef

from actors.discovery import DESCRIBE_TIMEOUT_S
from actors.dispatcher import get_dispatcher
from actors.fleet import find_fleet_actor
from actors.registry import CloudContainer, ensure_cloud_containers, ensure_providers
from cluster.admin import KeyTargets, PushPlan, key_targets
from cluster.cloud.key_readiness import local_only_roles, missing_key_message
from cluster.config import ConfigStore
from cluster.fleet import VirtualHost
from cluster.providers import ProviderView
from cluster.roles import Policy, Role
from cluster.settings import RoleRoute, SamespaceSettings

__all__ = [
    "apply_to_containers",
    "forget_discoveries",
    "key_destinations",
    "key_problem",
    "push_cloud_config",
    "push_policy",
    "put_in_force",
    "sidecar_key_hosts",
]

log = logging.getLogger("samespace.admin")


def apply_to_containers(
    containers: list[CloudContainer],
    *,
    routes: Mapping[Role, RoleRoute] | None = None,
    policies: Mapping[Role, Policy] | None = None,
    base_url: str | None = None,
) -> list[ObjectRef]:
    """Send each container what changed for its role (it merges the rest, DESIGN §8): its route,
    its policy, the base URL. Returns the calls' refs (ray.get or await them); a container with
    nothing to change is not called."""
    routes, policies = routes or {}, policies or {}
    refs: list[ObjectRef] = []
    for container in containers:
        route, policy = routes.get(container.role), policies.get(container.role)
        if route is not None or policy is not None or base_url is not None:
            refs.append(container.handle.apply.remote(route, policy, base_url))
    return refs


def push_cloud_config(
    settings: SamespaceSettings,
    *,
    routes: Mapping[Role, RoleRoute] | None = None,
    policies: Mapping[Role, Policy | str] | None = None,
    base_url: str | None = None,
) -> list[ObjectRef]:
    """Put pushed routes, policies and a base URL in force: each named role's dispatcher takes its
    policy, and every virtual container merges what changed for its role into what it holds.

    Validated first: a bad policy changes nothing anywhere. Returns the calls' refs: await them in
    async code (the admin API), `ray.get` them in a driver.
    """
    checked = {Role(role): Policy(policy) for role, policy in (policies or {}).items()}
    refs = [get_dispatcher(settings, role).set_policy.remote(policy) for role, policy in checked.items()]
    containers = ensure_cloud_containers(settings)
    return refs + apply_to_containers(containers, routes=routes, policies=checked, base_url=base_url)


def forget_discoveries(settings: SamespaceSettings, roles: Iterable[Role]) -> list[ObjectRef]:
    """After a pushed route landed: each role's dispatcher drops the discovery its single calls
    reuse (up to 2 s), which still names the old model and pin. Returns the calls' refs."""
    return [get_dispatcher(settings, role).forget_discovery.remote() for role in roles]


def push_policy(settings: SamespaceSettings, role: Role, policy: Policy | str) -> Policy:
    """Put a policy in force for a role, from a driver: its dispatcher and every virtual container
    of the role (each keeps the route and base URL it holds). Not persisted (the admin API is)."""
    policy = Policy(policy)
    ray.get(push_cloud_config(settings, policies={role: policy}))
    return policy


async def sidecar_key_hosts(settings: SamespaceSettings) -> list[VirtualHost]:
    """The reachable sidecars hosting virtual containers, as the fleet actor knows them (none when
    no sidecar ever reached this cluster, or the fleet actor does not answer). Outside a Ray driver
    or replica there is no fleet: nothing is looked up, and no driver started."""
    if not ray.is_initialized():
        return []
    fleet = await asyncio.to_thread(find_fleet_actor, settings)
    if fleet is None:
        return []
    try:
        hosts: list[VirtualHost] = await asyncio.wait_for(fleet.virtual_hosts.remote(), DESCRIBE_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - the in-cluster containers still take the key
        log.warning("the fleet actor did not say which sidecars host virtual containers: %s", type(exc).__name__)
        return []
    return hosts


async def key_destinations(
    settings: SamespaceSettings, targets: list[str] | None, containers: list[CloudContainer]
) -> KeyTargets:
    """Where a key push goes (`cluster/admin/key_targets.py`): ConfigError("targets", ...) for a
    target matching nothing, before anything is persisted or sent."""
    return key_targets(targets, [c.name for c in containers], await sidecar_key_hosts(settings))


async def _send_key(
    settings: SamespaceSettings, key: SecretStr, containers: list[CloudContainer], targets: KeyTargets | None
) -> tuple[list[str], list[str]]:
    """The key to each targeted in-cluster container, and through the fleet actor to each targeted
    sidecar (one `config` frame each). Returns the containers that took it (names) and the issues."""
    targets = targets or await key_destinations(settings, None, containers)
    chosen = [c for c in containers if targets.takes(c.name)]
    answers = await asyncio.gather(*(c.handle.set_key.remote(key) for c in chosen), return_exceptions=True)
    issues = [
        f"{c.name}: the key did not land ({type(a).__name__})"
        for c, a in zip(chosen, answers, strict=True)
        if isinstance(a, BaseException)
    ]
    keyed = [c.name for c, a in zip(chosen, answers, strict=True) if not isinstance(a, BaseException)]
    if targets.sidecars:
        fleet = await asyncio.to_thread(find_fleet_actor, settings)
        if fleet is None:
            return keyed, [*issues, "the fleet actor is gone: the key reached no sidecar"]
        try:
            on_sidecars, sidecar_issues = await fleet.push_key.remote(key, targets.sidecars)
        except Exception as exc:  # noqa: BLE001 - said as an issue; the in-cluster containers took it
            return keyed, [*issues, f"the key reached no sidecar ({type(exc).__name__})"]
        keyed += on_sidecars
        issues += sidecar_issues
    return keyed, issues


async def put_in_force(
    settings: SamespaceSettings, plan: PushPlan, key: SecretStr | None, targets: KeyTargets | None = None
) -> tuple[list[CloudContainer], list[str], list[str]]:
    """Send a push plan to the actors (DESIGN §8): each role's dispatcher its policy, each virtual
    container what changed for its role, then the dispatchers of re-routed roles forget their
    discovery, then the containers take `key` (last: no request goes out on the old route with it):
    those `targets` names (None: every in-cluster container and every sidecar hosting virtual
    containers, through the fleet actor). Nothing is persisted here. Returns the in-cluster
    containers, each send that did not land, and the containers (in-cluster and on sidecars) that
    took the key, by name."""
    refs = await asyncio.to_thread(
        lambda: push_cloud_config(settings, routes=plan.routes, policies=plan.policies, base_url=plan.base_url)
    )
    issues = [
        f"a push did not land: {type(r).__name__}"
        for r in await asyncio.gather(*refs, return_exceptions=True)
        if isinstance(r, BaseException)
    ]
    if plan.routes:  # only once the routes landed: a discovery now sees the new model and pin
        await asyncio.gather(*await asyncio.to_thread(forget_discoveries, settings, list(plan.routes)))
    containers = await asyncio.to_thread(ensure_cloud_containers, settings)
    keyed: list[str] = []
    if key is not None:
        keyed, key_issues = await _send_key(settings, key, containers, targets)
        issues += key_issues
    return containers, issues, keyed


def key_problem(settings: SamespaceSettings, roles: Iterable[Role] = (Role.CODE_EMBEDDING,)) -> str | None:
    """From a driver (the reindex job; never from async code): the one paragraph saying that
    `roles` need the OpenRouter key and no virtual container holds one, or None.

    Starts the providers the cluster should have first (after a restart the containers may not
    exist yet), then asks each role's dispatcher who serves it (`DispatcherActor.providers`).
    """
    ensure_providers(settings)
    views: dict[Role, list[ProviderView]] = {
        role: ray.get(get_dispatcher(settings, role).providers.remote()) for role in roles
    }
    stored = ConfigStore(settings.admin.config_path).read()
    return missing_key_message(views, key_pushed_before=stored.key_pushed, local_only=local_only_roles(settings))
