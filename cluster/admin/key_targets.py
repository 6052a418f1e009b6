"""Where a pushed key goes (DESIGN §8): every virtual container, or those a push's `targets` name.

A key push reaches the in-cluster virtual containers and, through the fleet actor, each sidecar that
hosts virtual containers, in one `config` frame per sidecar. `targets` narrows both: a target is an
in-cluster container's name, a sidecar virtual container's name (the master's `<PCName>-OR-<Role>`
or the sidecar's own spelling), or a sidecar by agent URL or hostname (all its virtual containers).
A target that matches nothing refuses the push, naming the field and the position, never the value
(a misplaced key must not be echoed). Pure: no Ray, no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from cluster.cloud.state import ContainerState
from cluster.errors import ConfigError
from cluster.fleet import VirtualHost, normalise_agent_url
from cluster.naming import pc_name

__all__ = ["KeyTargets", "any_key_held", "key_targets"]


@dataclass(frozen=True)
class KeyTargets:
    """The containers a key push reaches.

    in_cluster: the in-cluster containers' names (None: all of them)
    sidecars:   agent id → the names (as the sidecar spells them) of its containers to take the key,
                None for all of them; one `config` frame each
    """

    in_cluster: frozenset[str] | None
    sidecars: dict[str, list[str] | None]

    def takes(self, name: str) -> bool:
        """Whether the in-cluster container `name` takes the key."""
        return self.in_cluster is None or name in self.in_cluster


def _names_sidecar(target: str, host: VirtualHost) -> bool:
    """`target` is the sidecar's agent URL (any spelling of it) or its hostname (with or without `.local`)."""
    try:
        if normalise_agent_url(target) == host.agent_url:
            return True
    except ValueError:
        pass
    if not host.hostname:
        return False
    wanted = target.strip().lower()
    return wanted in (host.hostname.lower(), pc_name(host.hostname).lower())


def key_targets(targets: list[str] | None, in_cluster: Collection[str], hosts: Iterable[VirtualHost]) -> KeyTargets:
    """The containers `targets` names (None: every container, in the cluster and on every sidecar).

    ConfigError("targets", ...) for a target that matches no container and no sidecar hosting one."""
    hosts = [host for host in hosts if host.containers]  # a sidecar hosting none takes no key
    if targets is None:
        return KeyTargets(in_cluster=None, sidecars={host.agent_id: None for host in hosts})
    chosen: set[str] = set()
    whole: set[str] = set()
    named: dict[str, set[str]] = {}
    for position, target in enumerate(targets):
        matched = target in in_cluster
        if matched:
            chosen.add(target)
        for host in hosts:
            if _names_sidecar(target, host):
                whole.add(host.agent_id)
                matched = True
            for view in host.containers:
                if target in (view.name, view.own_name):
                    named.setdefault(host.agent_id, set()).add(view.own_name)
                    matched = True
        if not matched:
            raise ConfigError(
                "targets",
                f"targets[{position}] matches no virtual container, in the cluster or on a sidecar, and no sidecar "
                "hosting one (by agent URL or hostname)",
            )
    sidecars: dict[str, list[str] | None] = dict.fromkeys(sorted(whole))
    sidecars.update({agent: sorted(names) for agent, names in sorted(named.items()) if agent not in whole})
    return KeyTargets(in_cluster=frozenset(chosen), sidecars=sidecars)


def any_key_held(states: Iterable[ContainerState], hosts: Iterable[VirtualHost]) -> bool:
    """Whether any virtual container holds a key: an in-cluster one (pushed, or from its node's
    environment) or one a reachable sidecar hosts."""
    return any(state.key_held for state in states) or any(view.key_held for host in hosts for view in host.containers)
