"""Which roles need the OpenRouter key and have none, said once, in one paragraph.

The key is never persisted (DESIGN §8), so after a restart every virtual container is keyless
until the key is pushed again. A role that then has no provider left is not a crash to show as
a traceback: it is a state to name, with the two ways out. The reindex job, `make run`,
`GET /admin/health` and `make status` all print `missing_key_message`.

Input: per role, the providers as its dispatcher reports them (`DispatcherActor.providers()`:
each view carries the policy in force and each provider's own `describe()`). Pure: no Ray, no
clock of its own (`wait_for_key` takes one).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from pydantic import Field

from cluster.providers import NOT_ANSWERING, ProviderKind, ProviderView
from cluster.roles import Policy, Role, effective_behaviour
from cluster.settings import SamespaceSettings
from cluster.types import Clock, Strict

__all__ = [
    "DEFAULT_KEY_POLL_S",
    "NO_KEY_REASON",
    "PUSH_KEY_COMMAND",
    "KeyNeed",
    "RoleKeys",
    "local_only_roles",
    "missing_key_message",
    "role_keys",
    "roles_missing_key",
    "wait_for_key",
]

# What a keyless virtual container says of itself in `describe()` (the one spelling).
NO_KEY_REASON = "no OpenRouter key pushed"
PUSH_KEY_COMMAND = "make push-key < key.txt"
DEFAULT_KEY_POLL_S = 2.0


class KeyNeed(Strict):
    """Why a role needs the key: `cloud` (its policy serves from the cloud only) or `no-local`
    (aggregate/backup, but no local provider exists for it)."""

    role: Role
    policy: Policy
    why: str = Field(description="'cloud' or 'no-local'.")


class RoleKeys(Strict):
    """What key readiness needs to know of one role."""

    role: Role
    policy: Policy
    local: int = Field(default=0, ge=0, description="Local providers that serve, or are still starting.")
    keyed: int = Field(default=0, ge=0, description="Virtual containers holding a key (eligible).")
    keyless: int = Field(default=0, ge=0, description="Virtual containers that said they have no key.")


def role_keys(role: Role, views: Sequence[ProviderView]) -> RoleKeys | None:
    """Count one role's providers; None when the dispatcher reported none (nothing to say about a key)."""
    if not views:
        return None
    local = keyed = keyless = 0
    for view in views:
        info = view.provider
        if info.kind is ProviderKind.LOCAL:
            # A local actor still loading its model will serve: it is no reason to need the cloud.
            local += info.eligible or (info.reason or "").startswith(NOT_ANSWERING)
        elif info.eligible:
            keyed += 1
        elif info.reason == NO_KEY_REASON:
            keyless += 1
        # a container that did not answer says nothing about the key either way
    return RoleKeys(role=role, policy=views[0].policy_in_force, local=local, keyed=keyed, keyless=keyless)


def roles_missing_key(states: Iterable[RoleKeys], *, local_only: Collection[Role] = ()) -> list[KeyNeed]:
    """The roles whose policy needs the cloud, whose only cloud providers have no key.

    `local_only`: roles whose cloud reserve is never used (the RLM under `rlm.fallback_mode:
    local-only`): for them only the `cloud` policy needs a key.
    """
    needs = []
    for state in states:
        if state.keyed or not state.keyless:  # a key is there, or there is no container to hold one
            continue
        behaviour = effective_behaviour(state.role, state.policy)
        if not behaviour.local_serves:
            needs.append(KeyNeed(role=state.role, policy=state.policy, why="cloud"))
        elif behaviour.cloud_may_serve and state.local == 0 and state.role not in local_only:
            needs.append(KeyNeed(role=state.role, policy=state.policy, why="no-local"))
    return sorted(needs, key=lambda need: list(Role).index(need.role))


def missing_key_message(
    views: Mapping[Role, Sequence[ProviderView]],
    *,
    key_pushed_before: bool = False,
    local_only: Collection[Role] = (),
) -> str | None:
    """One paragraph naming every role that needs the key and has none, and the two ways out; None
    when nothing is missing.

    views:             per role, `DispatcherActor.providers()` (roles left out are not checked)
    key_pushed_before: the config store's `key_pushed` (a key was pushed before a restart)
    local_only:        see `roles_missing_key`
    """
    states = [state for role, role_views in views.items() if (state := role_keys(role, role_views)) is not None]
    needs = roles_missing_key(states, local_only=local_only)
    if not needs:
        return None
    described = _join([_describe(need) for need in needs])
    one = len(needs) == 1
    lost = (
        " A key was pushed before, but keys are never written to disk, so a restart forgets it."
        if key_pushed_before
        else ""
    )
    set_local = _join([f"`make set-policy ROLE={need.role.value} POLICY=local`" for need in needs])
    return (
        f"No OpenRouter key is loaded, and {described} {'needs' if one else 'need'} one: "
        f"{'it has' if one else 'they have'} no provider that can serve without it.{lost} "
        f"Either push the key again with `{PUSH_KEY_COMMAND}`, "
        f"or serve {'that role' if one else 'those roles'} locally with {set_local}."
    )


def local_only_roles(settings: SamespaceSettings) -> frozenset[Role]:
    """Roles whose cloud reserve is never used: the RLM under `rlm.fallback_mode: local-only`."""
    return frozenset({Role.RLM}) if settings.rlm.fallback_mode == "local-only" else frozenset()


def wait_for_key(
    check: Callable[[], str | None],
    *,
    wait_s: float,
    clock: Clock,
    sleep: Callable[[float], None],
    emit: Callable[[str], None],
    poll_s: float = DEFAULT_KEY_POLL_S,
) -> str | None:
    """Wait up to `wait_s` for `check()` (a `missing_key_message`) to turn None, saying so in one line.

    Returns None when the key arrived (or was never missing), else the last message, which the
    caller prints (once) before it stops, with no traceback. `wait_s` 0 checks once, never waits.
    """
    message = check()
    if message is None or wait_s <= 0:
        return message
    emit(f"no OpenRouter key yet: waiting up to {wait_s:g} s for `{PUSH_KEY_COMMAND}` (cloud.key_wait_s)")
    deadline = clock() + wait_s
    while (left := deadline - clock()) > 0:
        sleep(min(poll_s, left))
        message = check()
        if message is None:
            emit("an OpenRouter key arrived; going on")
            return None
    return message


def _describe(need: KeyNeed) -> str:
    if need.why == "cloud":
        return f"{need.role.value} (policy {need.policy.value})"
    return f"{need.role.value} (policy {need.policy.value}, no local provider)"


def _join(parts: Sequence[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]
