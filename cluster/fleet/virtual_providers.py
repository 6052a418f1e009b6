"""Sidecar-hosted virtual containers: a sidecar's OpenRouter roles as cloud providers of the master.

A sidecar started with `--serve <role>=openrouter:<model>@<upstream>` hosts a virtual container.
The master learns of it by asking (the `containers` command, `FleetHub` on registration and every
`fleet.virtual_discovery_s`), never from a heartbeat, and keeps the answer in memory per agent id
(`VirtualBook`; never persisted). Each row becomes a `cloud` provider with `hosted="sidecar"`, named
by the master `<PCName>-OR-<Role>` from the host's reported hostname (DESIGN §4), so it joins the
cloud lanes, the key-wide budget (every call carries a permit) and the gate like an in-cluster one.

Accounting: the book counts the permits the master sent to each (agent, role). A sidecar that
reports more upstream calls for a container than the permits it was sent (counted from the first
answer this book saw for it: before that no permit can have gone out) called OpenRouter without
one: every virtual container of that agent is ineligible from then on (sticky for the agent id; a
new registration is a new agent), said once at WARNING. Pure: no clock, no I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from cluster.cloud.container import cloud_identity
from cluster.cloud.key_readiness import NO_KEY_REASON
from cluster.fleet.agent_registry import HostView
from cluster.fleet.frames import VIRTUAL_ROLE_LABELS, VirtualContainerRow
from cluster.naming import virtual_container_name
from cluster.providers import ProviderInfo, ProviderKind
from cluster.roles import Role
from cluster.settings import RoleRoute

__all__ = [
    "FAILING_STATE",
    "VirtualBook",
    "VirtualContainerView",
    "VirtualHost",
    "VirtualRoute",
    "pc_host",
    "row_role",
    "virtual_hosts",
    "virtual_providers",
]

log = logging.getLogger("samespace.fleet")

FAILING_STATE = "failing"
Stats = Mapping[str, tuple[int, int, str | None]]  # provider → (served, failures, last error)


@dataclass(frozen=True)
class VirtualRoute:
    """Where a sidecar virtual container's commands go: the agent, the role, and what it serves."""

    agent: str
    role: Role
    model: str
    upstream: str | None
    own_name: str  # the container's name as the sidecar spells it (what a key frame names)


class VirtualContainerView(BaseModel):
    """One virtual container of a sidecar, for the admin API (names only; never the key)."""

    model_config = ConfigDict(frozen=True)

    name: str  # the master's name, `<PCName>-OR-<Role>` (the provider's)
    own_name: str  # as the sidecar names it
    role: Role
    key_held: bool


class VirtualHost(BaseModel):
    """A reachable sidecar that hosts virtual containers, as the admin API targets a key push."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    agent_url: str
    hostname: str | None
    containers: list[VirtualContainerView]


class VirtualBook:
    """What the hub knows of its sidecars' virtual containers, in memory only: the rows each agent
    last reported, the permits sent to each (agent, role), and the agents caught calling OpenRouter
    without a permit (sticky for the agent id)."""

    def __init__(self) -> None:
        self._rows: dict[str, list[VirtualContainerRow]] = {}
        self._permits: dict[tuple[str, Role], int] = {}
        self._unpermitted: dict[str, str] = {}
        # The upstream calls a container had already reported when this book first saw it: a master
        # that restarted (its fleet actor with it) meets a sidecar whose counters kept running.
        self._baseline: dict[tuple[str, Role], int] = {}

    def __repr__(self) -> str:
        return f"VirtualBook({len(self._rows)} agents)"

    def record(self, agent: str, rows: list[VirtualContainerRow]) -> None:
        """An agent's answer to `containers`: kept, and checked against the permits it was sent."""
        self._rows[agent] = list(rows)
        if agent in self._unpermitted:
            return
        for row in rows:
            role = row_role(row)
            if role is None:
                continue
            sent = self._permits.get((agent, role), 0)
            base = self._baseline.setdefault((agent, role), max(0, row.upstream_calls - sent))
            calls = row.upstream_calls - base
            if calls > sent:
                reason = f"called OpenRouter without a permit ({calls} calls, {sent} permits)"
                self._unpermitted[agent] = reason
                log.warning("sidecar agent %s, virtual container %s: %s", agent, row.name[:80], reason)
                return

    def permit_sent(self, agent: str, role: Role) -> None:
        """Count one permitted command sent to the agent's container of `role` (before it is sent)."""
        self._permits[(agent, role)] = self._permits.get((agent, role), 0) + 1

    def permits(self, agent: str, role: Role) -> int:
        return self._permits.get((agent, role), 0)

    def rows(self, agent: str) -> list[VirtualContainerRow]:
        return list(self._rows.get(agent, ()))

    def unpermitted(self, agent: str) -> str | None:
        """Why the agent's virtual containers are refused for calling without a permit, or None."""
        return self._unpermitted.get(agent)

    def forget(self, agent: str) -> None:
        """An agent replaced or evicted: its rows, permits and verdict go (a new agent starts clean)."""
        self._rows.pop(agent, None)
        self._unpermitted.pop(agent, None)
        for key in [key for key in self._permits if key[0] == agent]:
            del self._permits[key]
        for key in [key for key in self._baseline if key[0] == agent]:
            del self._baseline[key]

    def agents(self) -> list[str]:
        return sorted(self._rows)


def row_role(row: VirtualContainerRow) -> Role | None:
    """The role a row serves, when it is one a virtual container may serve; else None (ignored)."""
    if row.role not in VIRTUAL_ROLE_LABELS:
        return None
    try:
        return Role(row.role)
    except ValueError:
        return None


def pc_host(host: HostView) -> str:
    """The host name the master names a sidecar's virtual containers by: the reported hostname, else
    the agent URL's host."""
    return host.hostname or urlsplit(host.agent_url).hostname or host.agent_url


def _identity_route(row: VirtualContainerRow, role: Role, routes: Mapping[Role, RoleRoute]) -> RoleRoute:
    """The route a row's identity is built from: its model and pin, with the master's token cap for
    the role when the master routes the same model (else the RoleRoute default)."""
    master = routes.get(role)
    upstream = row.provider or None
    if master is not None and master.model == row.model:
        return RoleRoute(model=row.model, upstream=upstream, max_input_tokens=master.max_input_tokens)
    return RoleRoute(model=row.model, upstream=upstream)


def _host_reason(host: HostView) -> str | None:
    if not host.fresh:
        return "no recent heartbeat" if host.seen_s_ago is not None else "not connected since start"
    if host.transport == "none":
        return "disconnected (its socket closed)"
    return None


def _row_reason(row: VirtualContainerRow) -> str | None:
    if not row.key_held:
        return NO_KEY_REASON
    if row.state == FAILING_STATE:
        return f"the sidecar reports it failing: {(row.last_error or 'no detail')[:200]}"
    return None


def virtual_providers(
    hosts: list[HostView],
    book: VirtualBook,
    routes: Mapping[Role, RoleRoute],
    width: int,
    stats: Stats | None = None,
    reserved: Collection[str] = (),
) -> tuple[list[ProviderInfo], dict[str, VirtualRoute]]:
    """Every virtual container the registered agents reported, as cloud providers hosted by sidecars.

    Eligible only while its agent is fresh and reachable, the row holds a key, is not failing, and
    the agent never called OpenRouter without a permit. A name already taken, in any case (by a
    name in `reserved`, e.g. an in-cluster container's, or by an earlier agent in URL order), is
    listed under `<name>~<agent id>`, ineligible, "name collides with <holder>", and gets no route:
    every provider name of a discovery stays unique (the dispatchers key their lanes by it)."""
    infos: list[ProviderInfo] = []
    found: dict[str, VirtualRoute] = {}
    # Host names are case-insensitive: 'WS-7' and 'ws-7' name one PC, so their containers collide.
    taken: dict[str, str] = {name.casefold(): "an in-cluster provider" for name in reserved}
    for host in hosts:
        if not host.agent_id:
            continue
        for row in book.rows(host.agent_id):
            role = row_role(row)
            if role is None:
                continue
            name = virtual_container_name(pc_host(host), role)
            holder = taken.get(name.casefold())
            if holder is not None:
                reason: str | None = f"name collides with {holder}"
                name = f"{name}~{host.agent_id}"
            else:
                taken[name.casefold()] = f"the virtual container of sidecar {host.agent_url}"
                reason = book.unpermitted(host.agent_id) or _host_reason(host) or _row_reason(row)
                found[name] = VirtualRoute(host.agent_id, role, row.model, row.provider or None, row.name)
            served, failures, last_error = (stats or {}).get(name, (0, 0, None))
            route = _identity_route(row, role, routes)
            infos.append(
                ProviderInfo(
                    name=name,
                    kind=ProviderKind.CLOUD,
                    hosted="sidecar",
                    roles=[role],
                    node_id="",
                    host=pc_host(host),
                    model=row.model,
                    upstream=route.upstream,
                    identity=cloud_identity(route, width) if role.writes_index else None,
                    eligible=reason is None,
                    reason=reason,
                    served=served,
                    failures=failures,
                    last_error=last_error,
                )
            )
    return infos, found


def virtual_hosts(hosts: list[HostView], book: VirtualBook, reachable: Collection[str]) -> list[VirtualHost]:
    """The reachable agents hosting virtual containers, with each container's names and key state."""
    out = []
    for host in hosts:
        if not host.agent_id or host.agent_id not in reachable:
            continue
        views = [
            VirtualContainerView(
                name=virtual_container_name(pc_host(host), role), own_name=row.name, role=role, key_held=row.key_held
            )
            for row in book.rows(host.agent_id)
            if (role := row_role(row)) is not None
        ]
        if views:
            out.append(
                VirtualHost(agent_id=host.agent_id, agent_url=host.agent_url, hostname=host.hostname, containers=views)
            )
    return out
