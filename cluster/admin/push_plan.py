"""An admin push of the cloud config: what it is, what it changes in the store, what is sent where (DESIGN §8).

Pure: no Ray, no file I/O, no clock of its own. The admin API validates the body (`OpenRouterPush`),
asks `key_check_needed` whether to look for a held key before refusing, persists `merged` through
the config store, then hands a `PushPlan` to the actors (`actors.config_push.put_in_force`).

    stored = store.read()
    if key_check_needed(push, stored) and not any_key_held:
        refuse with NO_KEY_YET
    persisted = store.update(lambda config: merged(config, push, now))
    plan = plan_push(settings, persisted, push)      # or plan_repush(settings, persisted)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from cluster.config.store import PersistedConfig, PersistedRole, overlay
from cluster.roles import Policy, Role
from cluster.settings import CloudSettings, RoleRoute, SamespaceSettings

__all__ = [
    "NO_CONTAINERS",
    "NO_KEY_YET",
    "ModelPush",
    "OpenRouterPush",
    "PushPlan",
    "key_check_needed",
    "merged",
    "plan_push",
    "plan_repush",
]

NO_KEY_YET = "no key has been pushed yet: include api_key"
MAX_TARGETS = 256
NO_CONTAINERS = "no virtual container exists: enable the cloud (cloud.enabled) first"


class _Body(BaseModel):
    # Inputs are hidden in errors: a bad body may carry the key, and a message must not echo it.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)


class ModelPush(_Body):
    """The model that serves one role; embedding roles name their pinned upstream (DESIGN §6)."""

    model: str = Field(min_length=1)
    provider: str | None = Field(default=None, min_length=1, description="Pinned upstream (embedding roles).")
    dims: int | None = Field(default=None, ge=1)


class OpenRouterPush(_Body):
    """One admin push, partial: only what it names changes; the rest is merged from the store."""

    api_key: SecretStr | None = None
    base_url: str | None = Field(default=None, min_length=1)
    models: dict[Role, ModelPush] | None = None
    policies: dict[Role, Policy] | None = None
    targets: list[Annotated[str, Field(min_length=1, max_length=2048)]] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_TARGETS,
        description="Where the key goes (default: every virtual container, in-cluster and on sidecars): names of "
        "in-cluster or sidecar virtual containers, or sidecars by agent URL or hostname (all their virtual "
        "containers). Only with api_key.",
    )

    @field_validator("base_url")
    @classmethod
    def _base_url_is_plain_http(cls, value: str | None) -> str | None:
        return None if value is None else CloudSettings.check_base_url(value)

    @model_validator(mode="after")
    def _embedding_models_are_pinned(self) -> OpenRouterPush:
        for role, push in (self.models or {}).items():
            if role.writes_index and push.provider is None:
                raise ValueError(f"models.{role.value}.provider: an embedding route must name a pinned upstream")
        if self.targets is not None and self.api_key is None:
            raise ValueError("targets: name where the key goes, so only with api_key")
        return self

    @property
    def only_local_policies(self) -> bool:
        """Only policies, all `local`: the way out of a missing key, never refused for want of one."""
        return (
            self.api_key is None
            and self.base_url is None
            and not self.models
            and bool(self.policies)
            and all(p is Policy.LOCAL for p in (self.policies or {}).values())
        )


@dataclass(frozen=True)
class PushPlan:
    """What must be sent where to put a persisted config in force.

    Each role in `policies` has its dispatcher take the policy; each virtual container takes what
    changed for its role (its route, its policy) and the base URL when one is set; every container
    takes the key, last, when `sends_key`. The roles whose route changed then drop the discovery
    their single calls reuse. `effective` is the settings with the persisted config over them:
    what the containers are checked against afterwards.
    """

    effective: SamespaceSettings
    routes: dict[Role, RoleRoute] = field(default_factory=dict)
    policies: dict[Role, Policy] = field(default_factory=dict)
    base_url: str | None = None
    sends_key: bool = False
    needs_containers: bool = False  # a push of a key, a model or a base URL has nothing to land on without one

    def pushed_to(
        self, containers: Iterable[tuple[str, Role]], takes_key: Callable[[str], bool] | None = None
    ) -> list[str]:
        """The (name, role) containers this plan sends something to, by name. `takes_key`: which of
        them a key push reaches (default all: a push without `targets`)."""

        def keyed(name: str) -> bool:
            return self.sends_key and (takes_key is None or takes_key(name))

        everyone = self.base_url is not None
        return [
            name for name, role in containers if everyone or keyed(name) or role in self.routes or role in self.policies
        ]

    def missing_containers(self, count: int) -> list[str]:
        """The issue to report when the plan needed containers and `count` exist."""
        return [NO_CONTAINERS] if count == 0 and self.needs_containers else []


def key_check_needed(push: OpenRouterPush, stored: PersistedConfig) -> bool:
    """Whether this push may need a key that was never pushed: then the admin API asks the
    containers whether one holds a key (from the nodes' environment) and refuses with NO_KEY_YET
    when none does. A push carrying a key, a store that had one pushed, and a push of `local`
    policies only (the way out of a missing key) never need the check."""
    return push.api_key is None and not stored.key_pushed and not push.only_local_policies


def merged(config: PersistedConfig, push: OpenRouterPush, now: float) -> PersistedConfig:
    """The stored config with a push merged in; never the key, only that one was pushed and when (`now`, unix s)."""
    roles = dict(config.roles)
    for role, model in (push.models or {}).items():
        roles[role] = PersistedRole(model=model.model, upstream=model.provider, dims=model.dims)
    update: dict[str, Any] = {"roles": roles, "policies": {**config.policies, **(push.policies or {})}}
    if push.base_url is not None:
        update["base_url"] = push.base_url
    if push.api_key is not None:
        update.update(key_pushed=True, last_pushed_at=now)
    return PersistedConfig.model_validate({**config.model_dump(), **update})


def plan_push(settings: SamespaceSettings, persisted: PersistedConfig, push: OpenRouterPush) -> PushPlan:
    """What `push` changed, with the values in force after it was persisted (`persisted`)."""
    return _plan(
        settings,
        persisted,
        routes=set(push.models or {}),
        policies=set(push.policies or {}),
        base_url=push.base_url is not None,
        sends_key=push.api_key is not None,
        needs_containers=push.api_key is not None or bool(push.models) or push.base_url is not None,
    )


def plan_repush(settings: SamespaceSettings, persisted: PersistedConfig) -> PushPlan:
    """The whole durable config again (never a key): every role's route and policy, and the base URL."""
    return _plan(
        settings,
        persisted,
        routes=set(Role),
        policies=set(Role),
        base_url=True,
        sends_key=False,
        needs_containers=False,
    )


def _plan(
    settings: SamespaceSettings,
    persisted: PersistedConfig,
    *,
    routes: set[Role],
    policies: set[Role],
    base_url: bool,
    sends_key: bool,
    needs_containers: bool,
) -> PushPlan:
    effective = overlay(settings, persisted)
    return PushPlan(
        effective=effective,
        routes={role: route for role, route in effective.cloud.routes.items() if role in routes},
        policies={role: effective.policy(role) for role in Role if role in policies},
        base_url=effective.cloud.base_url if base_url else None,
        sends_key=sends_key,
        needs_containers=needs_containers,
    )
