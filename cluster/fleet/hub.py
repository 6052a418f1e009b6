"""The master's fleet hub: every sidecar's frames and calls meet here, whichever Serve replica holds
the socket or took the HTTP call.

`FleetHub` composes the registry (`Fleet`: agents, liveness, hosts), the command desk (`CommandDesk`:
commands and results) and the sidecar providers (`SidecarCalls`), and answers what the sidecar
endpoints ask: the frames to send on a socket, and the HTTP status and body for each fallback call.
Pure asyncio on an injected clock and sleep; `actors.fleet.FleetActor` is its Ray shell.

Every outbox is named by one function: `socket_outbox(connection)` for a live WebSocket,
`http_outbox(agent)` for an agent reached by HTTP polls.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping
from http import HTTPStatus
from typing import Any, Protocol, TypeVar

import numpy as np
from pydantic import SecretStr

from cluster.cloud.budget import KeyFacts
from cluster.cloud.openai_wire import ChatResult
from cluster.errors import ConfigError, SamespaceError, UpstreamUnavailable
from cluster.fleet.agent_registry import BAD_CREDENTIAL, UNKNOWN_AGENT, Fleet, HostRecord, HostView, RegistrationRefused
from cluster.fleet.commands import CommandDesk
from cluster.fleet.frames import (
    FrameRejected,
    FrameType,
    HeartbeatFrame,
    PollRequest,
    RegisterFrame,
    ResultFrame,
    VirtualUsage,
    config_frame,
    error_frame,
    key_config_frame,
    parse_frame,
    ping_frame,
)
from cluster.fleet.sidecar_providers import SidecarCalls, SidecarRoute, sidecar_providers
from cluster.fleet.virtual_calls import VirtualCalls
from cluster.fleet.virtual_providers import VirtualBook, VirtualHost, VirtualRoute, virtual_hosts, virtual_providers
from cluster.providers import ProviderInfo
from cluster.settings import SamespaceSettings
from cluster.types import Clock

__all__ = [
    "CLOSE_SOCKET",
    "STALE_CHECK_S",
    "Answer",
    "FleetHub",
    "http_outbox",
    "prove_agent",
    "socket_outbox",
]

log = logging.getLogger("samespace.fleet")

# An outbox entry for the replica that holds the socket: close it instead of sending a frame.
# Never sent to a sidecar: it names an instruction between the hub and the replica.
CLOSE_SOCKET = "__close__"
STALE_CHECK_S = 1.0
REPLACED = "the sidecar agent was replaced by a new registration"

Answer = tuple[int, dict[str, Any]]  # an HTTP fallback call's status and JSON body
Sleep = Callable[[float], Awaitable[None]]
_T = TypeVar("_T")


def socket_outbox(connection: str) -> str:
    return f"ws:{connection}"


def http_outbox(agent: str) -> str:
    return f"http:{agent}"


def prove_agent(fleet: Fleet, agent_id: str | None, digest: str | None) -> str | Answer:
    """The agent id when an HTTP call proves it comes from that registered agent; else the answer:
    409 for an unknown agent (the sidecar registers again), 403 for a missing or wrong credential."""
    if agent_id is None or not fleet.knows(agent_id):
        return HTTPStatus.CONFLICT, error_frame(UNKNOWN_AGENT)
    if fleet.authenticate(agent_id, digest) is None:
        return HTTPStatus.FORBIDDEN, error_frame(BAD_CREDENTIAL)
    return agent_id


def _bad_frame(frame: object, expected: str) -> Answer:
    """400 for a frame that is not the one this call takes: why it was refused, or what was expected."""
    body = frame.frame() if isinstance(frame, FrameRejected) else error_frame(f"expected a {expected} frame")
    return HTTPStatus.BAD_REQUEST, body


class RegistryStore(Protocol):
    """Where the registry's durable facts live (the config store, `cluster.config.store.ConfigStore`)."""

    def read_sidecars(self) -> dict[str, HostRecord]: ...

    def save_sidecars(self, records: dict[str, HostRecord]) -> None: ...


class FleetHub:
    """The master's shared fleet state. Durable registry facts go to `store`; volatile state stays here."""

    def __init__(self, settings: SamespaceSettings, store: RegistryStore, *, clock: Clock, sleep: Sleep) -> None:
        self._settings = settings
        self._store = store
        self._clock = clock
        self._sleep = sleep
        try:
            known = store.read_sidecars()
        except ConfigError as exc:  # an unreadable store: start empty, never overwrite it blindly
            log.warning("fleet registry unreadable, starting empty: %s", exc)
            known = {}
        self.fleet = Fleet(clock, settings.fleet, persist=self._persist, known=known)
        self.desk = CommandDesk()
        self._ids = itertools.count(1)
        self._routes: dict[str, SidecarRoute] = {}
        self._sidecar_calls = SidecarCalls(self._send, self._current_routes)
        self._stats: dict[str, tuple[int, int, str | None]] = {}
        self._loop_task: asyncio.Task[None] | None = None
        # Sidecar virtual containers (cluster/fleet/virtual_providers.py): discovered rows, permits, routes.
        self.virtual = VirtualBook()
        self._virtual_routes: dict[str, VirtualRoute] = {}
        self._virtual_calls = VirtualCalls(self._send, self._current_virtual_routes, self.virtual, self._width)
        self._asking: set[str] = set()  # agents with a `containers` command in flight
        self._background: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return "FleetHub()"

    # --- WebSocket (the replica that holds the socket calls these) ---------------------------
    def ws_opened(self) -> str:
        self._ensure_loop()
        connection = f"c{next(self._ids)}"
        self.fleet.opened(connection)
        return connection

    def ws_frame(self, connection: str, raw: str | bytes) -> tuple[list[dict[str, Any]], bool]:
        """One inbound frame → (frames to send back, close the socket?). The replica refused any
        frame over the limit before it came here."""
        frame = parse_frame(raw)
        reply = self.fleet.on_frame(connection, frame)
        agent = self.fleet.agent_of(connection)
        if isinstance(frame, ResultFrame) and agent is not None and not reply.frames:
            self.desk.resolve(agent, frame)
        if isinstance(frame, RegisterFrame):
            if agent is not None and not reply.close:
                url = frame.agent_url[:200]
                log.info("sidecar %s registered over WebSocket as agent %s (%s)", url, agent, connection)
                self._spawn(self.discover_virtual(agent))
            else:
                log.info("sidecar registration refused on %s: %s", connection, reply.frames[0].get("message"))
            self._fail_retired()
        return reply.frames, reply.close

    async def ws_next(self, connection: str, wait_s: float) -> list[dict[str, Any]]:
        """Frames to send on `connection` (commands, pings), waiting up to `wait_s`; a `CLOSE_SOCKET`
        entry when the fleet dropped the socket."""
        if not self.fleet.knows_connection(connection):
            return [{"type": CLOSE_SOCKET, "reason": "closed by the fleet"}]
        return await self.desk.take(socket_outbox(connection), wait_s)

    def ws_closed(self, connection: str) -> None:
        """The socket is gone: every command sent on it fails now (a superseded socket's too)."""
        agent = self.fleet.agent_of(connection)
        self.fleet.closed(connection)
        failed = self.desk.fail_outbox(socket_outbox(connection), "sidecar disconnected")
        if agent is not None:
            log.info("sidecar agent %s disconnected (%s); %d commands failed over", agent, connection, failed)

    # --- HTTP fallback (the replica checked the fleet token and the body size) -----------------
    def http_register(self, raw: bytes) -> Answer:
        frame = parse_frame(raw)
        if not isinstance(frame, RegisterFrame):
            return _bad_frame(frame, "register")
        self._ensure_loop()  # the liveness loop runs for HTTP-only fleets too
        admitted = self.fleet.admit(frame)
        self._fail_retired()
        if isinstance(admitted, RegistrationRefused):
            log.info("sidecar registration refused over HTTP: %s", admitted.message)
            return admitted.status, admitted.frame()
        log.info("sidecar %s registered over HTTP as agent %s", frame.agent_url[:200], admitted.agent_id)
        self._spawn(self.discover_virtual(admitted.agent_id))
        return HTTPStatus.OK, admitted.frame()

    async def http_heartbeat(self, raw: bytes, agent_id: str | None, digest: str | None) -> Answer:
        agent = prove_agent(self.fleet, agent_id, digest)
        if not isinstance(agent, str):
            return agent
        frame = parse_frame(raw)
        if not isinstance(frame, HeartbeatFrame):
            return _bad_frame(frame, "heartbeat")
        self._ensure_loop()
        answer = self.fleet.http_heartbeat(agent, frame)
        if answer.get("type") == FrameType.ERROR:
            return HTTPStatus.BAD_REQUEST, answer
        return HTTPStatus.OK, {"ok": True, "commands": await self.desk.take(http_outbox(agent), 0)}

    async def http_poll(self, raw: bytes, agent_id: str | None, digest: str | None) -> Answer:
        agent = prove_agent(self.fleet, agent_id, digest)
        if not isinstance(agent, str):
            return agent
        try:
            poll = PollRequest.model_validate_json(raw)
        except ValueError:
            return HTTPStatus.BAD_REQUEST, error_frame("poll: expected {agentUrl, waitS}")
        if poll.agent_url is not None and self.fleet.agent_id_for(poll.agent_url) != agent:
            return HTTPStatus.FORBIDDEN, error_frame("poll: agentUrl is not this agent's")
        self._ensure_loop()
        self.fleet.touch(agent)
        wait = min(poll.wait_s, self._settings.fleet.poll_wait_max_s)
        return HTTPStatus.OK, {"commands": await self.desk.take(http_outbox(agent), wait)}

    def http_result(self, raw: bytes, agent_id: str | None, digest: str | None) -> Answer:
        agent = prove_agent(self.fleet, agent_id, digest)
        if not isinstance(agent, str):
            return agent
        frame = parse_frame(raw)
        if not isinstance(frame, ResultFrame):
            return _bad_frame(frame, "result")
        if self.desk.agent_of(frame.id) != agent:  # unknown, or another agent's command
            return HTTPStatus.NOT_FOUND, error_frame("no pending command with that id")
        self.fleet.touch(agent)
        self.desk.resolve(agent, frame)
        return HTTPStatus.OK, {"ok": True}

    # --- reads ---------------------------------------------------------------------------------
    def hosts(self) -> list[HostView]:
        return self.fleet.hosts()

    def providers(self, reserved: Collection[str] = ()) -> list[ProviderInfo]:
        """Every sidecar-hosted provider: each (host, role) a heartbeat reports (`local`), then each
        virtual container a `containers` answer reported (`cloud`). `reserved`: names other providers
        of the discovery hold (the in-cluster ones): a virtual container may not take one."""
        hosts = self.fleet.hosts()
        infos, self._routes = sidecar_providers(hosts, self._width, self._stats)
        routes, stats = self._settings.cloud.routes, self._stats
        virtual, self._virtual_routes = virtual_providers(hosts, self.virtual, routes, self._width, stats, reserved)
        return infos + virtual

    def virtual_hosts(self) -> list[VirtualHost]:
        """The reachable sidecars hosting virtual containers: their names and whether each holds a key."""
        hosts = self.fleet.hosts()
        reachable = {h.agent_id for h in hosts if h.agent_id and self.fleet.reachable(h.agent_id)}
        return virtual_hosts(hosts, self.virtual, reachable)

    # --- provider calls (the dispatchers') -----------------------------------------------------
    async def embed(self, provider: str, texts: list[str]) -> np.ndarray:
        return await self._counted(provider, self._sidecar_calls.embed(provider, texts))

    async def rerank(self, provider: str, query: str, documents: list[str]) -> list[float]:
        return await self._counted(provider, self._sidecar_calls.rerank(provider, query, documents))

    async def chat(self, provider: str, **request: Any) -> ChatResult:
        return await self._counted(provider, self._sidecar_calls.chat(provider, **request))

    async def context_window(self, provider: str) -> int | None:
        return await self._sidecar_calls.context_window(provider)

    # --- virtual containers (the fleet actor's calls, each under a budget permit) ----------------
    def virtual_route(self, provider: str) -> VirtualRoute:
        """The virtual container's route (its role, model and pin); refused when unknown or distrusted."""
        if provider not in self._current_virtual_routes():
            self.providers()  # a container discovered since the last discovery asked
        return self._virtual_calls.route(provider)

    async def virtual_embed(
        self, provider: str, texts: list[str], permit: str
    ) -> tuple[np.ndarray, VirtualUsage | None]:
        return await self._counted(provider, self._virtual_calls.embed(provider, texts, permit))

    async def virtual_rerank(
        self, provider: str, query: str, documents: list[str], top_n: int | None, permit: str
    ) -> tuple[list[tuple[int, float]], VirtualUsage | None]:
        return await self._counted(provider, self._virtual_calls.rerank(provider, query, documents, top_n, permit))

    async def key_facts(self, provider: str) -> KeyFacts:
        """The key's limits, read through a sidecar's virtual container (for the BudgetActor)."""
        self.virtual_route(provider)
        return await self._virtual_calls.key_facts(provider)

    async def discover_virtual(self, agent: str | None = None) -> None:
        """Ask `agent` (default: every reachable agent) which virtual containers it hosts; the rows
        are kept in memory. An agent that does not answer keeps its last rows (its liveness decides
        whether they serve); one asked already is not asked twice at once."""
        agents = [agent] if agent is not None else [h.agent_id for h in self.fleet.hosts() if h.agent_id]
        await asyncio.gather(*(self._ask_containers(a) for a in agents if self.fleet.reachable(a)))

    async def discovered(self) -> None:
        """Wait for the discoveries running beside their callers (a registration's, the liveness loop's)."""
        while self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    async def push_key(self, key: SecretStr, containers: Mapping[str, list[str] | None]) -> tuple[list[str], list[str]]:
        """The OpenRouter key to sidecars: one `config` frame per agent (`containers`: agent id → its
        containers' own names to take the key, None for all), built as it is posted and kept nowhere
        else. Returns the virtual containers (the master's names) that took it, and each agent it did
        not reach, in words (never the key). Their rows are asked again, so the key shows at once."""
        agents = list(containers)
        answers = await asyncio.gather(
            *(self._send_key(agent, key, containers[agent]) for agent in agents), return_exceptions=True
        )
        issues = [
            f"sidecar agent {agent}: the key did not land ({type(answer).__name__})"
            for agent, answer in zip(agents, answers, strict=True)
            if isinstance(answer, BaseException)
        ]
        landed = [agent for agent, answer in zip(agents, answers, strict=True) if not isinstance(answer, BaseException)]
        await asyncio.gather(*(self.discover_virtual(agent) for agent in landed))
        keyed = [
            view.name
            for host in self.virtual_hosts()
            if host.agent_id in landed
            for view in host.containers
            if containers[host.agent_id] is None or view.own_name in (containers[host.agent_id] or [])
        ]
        return keyed, issues

    async def push_config(self, agent_url: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Send a `config` frame to the agent at `agent_url` and await its acknowledgement (a `result`
        with the id)."""
        agent = self.fleet.agent_id_for(agent_url)
        if agent is None:
            raise UpstreamUnavailable(agent_url[:200], "no agent registered at that URL")
        box = self._outbox_of(agent, agent)
        return await self.desk.request(
            agent, box, lambda i: config_frame(i, payload), self._settings.fleet.command_timeout_s, agent, "config"
        )

    # --- liveness ------------------------------------------------------------------------------
    async def liveness_loop(self) -> None:
        """Ping sweep every ping interval; stale hosts checked every second (their commands fail)."""
        ping_every = self._settings.fleet.ping_interval_s
        discover_every = self._settings.fleet.virtual_discovery_s
        next_ping = self._clock() + ping_every
        next_discovery = self._clock() + discover_every
        while True:
            await self._sleep(min(STALE_CHECK_S, ping_every, discover_every))
            try:
                self.fleet.flush()  # registry changes deferred by the write budget
                for agent in self.fleet.newly_stale():
                    failed = self.desk.fail_agent(agent, "no heartbeat: the host left the lanes")
                    log.info("sidecar agent %s went stale; %d commands failed over", agent, failed)
                if self._clock() >= next_ping:
                    next_ping = self._clock() + ping_every
                    self.sweep()
                if self._clock() >= next_discovery:
                    next_discovery = self._clock() + discover_every
                    self._spawn(self.discover_virtual())
            except Exception:
                log.exception("fleet liveness pass failed")

    def stop_liveness(self) -> None:
        """Cancel the liveness loop (started by the first socket or registration) and any discovery."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            self._loop_task = None
        for task in list(self._background):
            task.cancel()

    def sweep(self) -> None:
        """Close the sockets the fleet dropped (their commands fail), and ping every other one."""
        for connection, why in self.fleet.sweep():
            log.info("closing sidecar socket %s: %s", connection, why)
            self.desk.fail_outbox(socket_outbox(connection), f"socket closed: {why}")
            self.desk.post(socket_outbox(connection), {"type": CLOSE_SOCKET, "reason": why})
        for connection in self.fleet.connections():
            self.desk.post(socket_outbox(connection), ping_frame())

    # --- internals -----------------------------------------------------------------------------
    @property
    def _width(self) -> int:
        return self._settings.embedding.width

    def _current_routes(self) -> dict[str, SidecarRoute]:
        if not self._routes:  # a call before any discovery asked: derive them now
            self.providers()
        return self._routes

    def _current_virtual_routes(self) -> dict[str, VirtualRoute]:
        return self._virtual_routes

    async def _ask_containers(self, agent: str) -> None:
        if agent in self._asking:
            return
        self._asking.add(agent)
        try:
            rows = await self._virtual_calls.containers(agent)
        except SamespaceError as exc:  # an older sidecar knows no `containers`; a busy one answers next time
            log.debug("sidecar agent %s: no virtual containers read: %s", agent, type(exc).__name__)
            return
        finally:
            self._asking.discard(agent)
        if self.fleet.knows(agent):  # not replaced meanwhile
            self.virtual.record(agent, rows)

    async def _send_key(self, agent: str, key: SecretStr, containers: list[str] | None) -> None:
        box = self._outbox_of(agent, agent)
        timeout = self._settings.fleet.command_timeout_s
        await self.desk.request(agent, box, lambda i: key_config_frame(i, key, containers), timeout, agent, "config")

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` beside the caller (a discovery), holding the task until it ends."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _send(self, agent: str, provider: str, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        box = self._outbox_of(agent, provider)
        return await self.desk.send(agent, box, provider, action, payload, self._settings.fleet.command_timeout_s)

    def _fail_retired(self) -> None:
        """Commands held by agents replaced or evicted by a registration fail now."""
        for agent in self.fleet.drain_retired():
            failed = self.desk.fail_agent(agent, REPLACED)
            self.desk.fail_outbox(http_outbox(agent), REPLACED)
            self.virtual.forget(agent)
            log.info("sidecar agent %s replaced; %d commands failed over", agent, failed)

    def _outbox_of(self, agent: str, provider: str) -> str:
        """Where `agent` takes its frames: its live socket, else its HTTP polls."""
        if not self.fleet.reachable(agent):  # fail now: nobody would take it before the timeout
            raise UpstreamUnavailable(provider, "sidecar not connected (socket closed or no recent heartbeat)")
        connection = self.fleet.connection_of(agent)
        return socket_outbox(connection) if connection is not None else http_outbox(agent)

    async def _counted(self, provider: str, call: Coroutine[Any, Any, _T]) -> _T:
        served, failures, last_error = self._stats.get(provider, (0, 0, None))
        try:
            result = await call
        except SamespaceError as exc:
            self._stats[provider] = (served, failures + 1, str(exc)[:200])
            raise
        self._stats[provider] = (served + 1, failures, last_error)
        return result

    def _persist(self, records: dict[str, HostRecord]) -> None:
        """Durable registry changes only (new agent, hostname, capabilities): read-modify-write."""
        try:
            self._store.save_sidecars(records)
        except ConfigError as exc:
            log.warning("fleet registry not written: %s", exc)

    def _ensure_loop(self) -> None:
        if self._loop_task is None:
            self._loop_task = asyncio.get_running_loop().create_task(self.liveness_loop())
