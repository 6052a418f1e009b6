"""Config pushes: put routes, policies, a base URL and the key in force on the actors (DESIGN §8),
and say, from a driver, whether the roles that need the key have one.

Above the registry (which starts the virtual containers) and the dispatchers (which take each
role's policy): nothing here is persisted; the admin API writes the config store first
(`cluster/admin/push_plan.py`), so an actor restarting meanwhile reads the same values.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

import ray
from pydantic import SecretStr
from ray import ObjectRef

from actors.dispatcher import get_dispatcher
from actors.registry import CloudContainer, ensure_cloud_containers, ensure_providers
from cluster.admin import PushPlan
from cluster.cloud.key_readiness import local_only_roles, missing_key_message
from cluster.config import ConfigStore
from cluster.providers import ProviderView
from cluster.roles import Policy, Role
from cluster.settings import RoleRoute, SamespaceSettings

__all__ = [
    "apply_to_containers",
    "forget_discoveries",
    "key_problem",
    "push_cloud_config",
    "push_policy",
    "put_in_force",
]


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


async def put_in_force(
    settings: SamespaceSettings, plan: PushPlan, key: SecretStr | None
) -> tuple[list[CloudContainer], list[str]]:
    """Send a push plan to the actors (DESIGN §8): each role's dispatcher its policy, each virtual
    container what changed for its role, then the dispatchers of re-routed roles forget their
    discovery, then every container takes `key` (last: no request goes out on the old route with
    it). Nothing is persisted here. Returns the containers and each send that did not land."""
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
    if key is not None:
        answers = await asyncio.gather(*(c.handle.set_key.remote(key) for c in containers), return_exceptions=True)
        issues += [
            f"{c.name}: the key did not land ({type(a).__name__})"
            for c, a in zip(containers, answers, strict=True)
            if isinstance(a, BaseException)
        ]
    return containers, issues


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
