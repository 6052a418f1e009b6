"""The agent: one master's session on this sidecar: what it says to that master, how it answers its
frames, and its reconnect loop.

Transport-free: `handle_frame` turns one master frame into its reply; `ws_transport` and
`http_transport` carry frames; `run` picks the transport (auto: WebSocket, else the HTTP fallback)
and reconnects with backoff. Each master has its own agent (identity, credential, backoff, session),
over the one `Workstation` they share, so that a master going away never stalls another's.
`sleep` (backoff waits only) and `random` (jitter) are injectable.
"""

from __future__ import annotations

import asyncio
import logging
import random as _random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from sidecar._version import __version__
from sidecar.backoff import BACKOFF_JITTER, Backoff
from sidecar.errors import AuthRejected, ConnectionLost, MasterRejected, UpstreamError
from sidecar.http_transport import HttpSession
from sidecar.settings import MasterSpec, TransportMode
from sidecar.upstream import Upstream
from sidecar.virtual import VIRTUAL_ACTIONS
from sidecar.wire import (
    AGENT_ID_HEADER,
    CREDENTIAL_HEADER,
    ChatCommand,
    EmbedCommand,
    FrameType,
    ModelsCommand,
    RerankCommand,
    describe_invalid,
    error_result,
    pong_frame,
    result_frame,
)
from sidecar.workstation import Workstation
from sidecar.ws_transport import WsSession

__all__ = ["Agent"]

logger = logging.getLogger("sidecar")

_Action = Callable[[Upstream, dict[str, Any]], Awaitable[dict[str, Any]]]


async def _embed(upstream: Upstream, frame: dict[str, Any]) -> dict[str, Any]:
    command = EmbedCommand.model_validate(frame)
    return await upstream.embed(command.model, command.texts)


async def _rerank(upstream: Upstream, frame: dict[str, Any]) -> dict[str, Any]:
    command = RerankCommand.model_validate(frame)
    return await upstream.rerank(command.model, command.query, command.documents)


async def _chat(upstream: Upstream, frame: dict[str, Any]) -> dict[str, Any]:
    command = ChatCommand.model_validate(frame)
    return await upstream.chat(command.model, command.request)


async def _models(upstream: Upstream, frame: dict[str, Any]) -> dict[str, Any]:
    ModelsCommand.model_validate(frame)
    return await upstream.list_models()


ACTIONS: dict[str, _Action] = {"embed": _embed, "rerank": _rerank, "chat": _chat, "models": _models}


class Agent:
    """One master's session: its identity there (agent id, credential), backoff and link, over the
    servers every master shares (`workstation`)."""

    def __init__(
        self,
        workstation: Workstation,
        master: MasterSpec,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        random: Callable[[], float] = _random.random,
        jitter: float = BACKOFF_JITTER,
    ) -> None:
        self.workstation = workstation
        self.settings = workstation.settings
        self.master = master
        self.backoff = Backoff(jitter=jitter, random=random)
        self.registrations = 0
        # Issued by the master at registration and presented when we register again,
        # so that a reconnect supersedes our own older registration. Never logged.
        self.agent_id: str | None = None
        self._credential: str | None = None
        self._sleep = sleep

    def __repr__(self) -> str:
        roles = sorted(self.upstreams)
        return f"Agent(agent_url={self.settings.agent_url!r}, master={self.master.url!r}, roles={roles})"

    @property
    def upstreams(self) -> dict[str, Upstream]:
        return self.workstation.upstreams

    # --- outbound frames ---

    def register_frame(self) -> dict[str, Any]:
        s = self.settings
        frame: dict[str, Any] = {
            "type": FrameType.REGISTER.value,
            "agentUrl": s.agent_url,
            "hostname": s.hostname,
            "containers": self.workstation.container_names(),
        }
        if self.agent_id is not None and self._credential is not None:
            frame.update(agentId=self.agent_id, credential=self._credential)
        return frame

    def agent_headers(self) -> dict[str, str]:
        """The HTTP fallback's proof that a call comes from this agent (empty before registering)."""
        if self.agent_id is None or self._credential is None:
            return {}
        return {AGENT_ID_HEADER: self.agent_id, CREDENTIAL_HEADER: self._credential}

    async def heartbeat_frame(self) -> dict[str, Any]:
        """Checks every fronted server (GET /models), then reports them: the local ones only (a virtual
        container is announced by the `containers` command, and its key never leaves the sidecar)."""
        await self.workstation.probe_all()
        s = self.settings
        return {
            "type": FrameType.HEARTBEAT.value,
            "agentUrl": s.agent_url,
            "containers": self.workstation.container_names(),
            "activeRequests": self.workstation.active_requests,
            "statusData": {
                "agentUrl": s.agent_url,
                "hostname": s.hostname,
                "version": __version__,
                "containers": {role: u.status_entry() for role, u in self.upstreams.items()},
            },
        }

    def on_registered(self, via: str, answer: dict[str, Any]) -> None:
        """The master accepted our register frame: keep the id and credential it issued (a new
        credential each time), and the backoff starts over."""
        agent_id, credential = answer.get("agentId"), answer.get("credential")
        if isinstance(agent_id, str) and isinstance(credential, str) and agent_id and credential:
            self.agent_id, self._credential = agent_id, credential
        self.registrations += 1
        self.backoff.reset()
        logger.info(
            "registered with the master %s as %s (agent %s) over %s",
            self.master.url,
            self.settings.agent_url,
            self.agent_id,
            via,
        )
        self.workstation.virtual.log_waiting(self.master.url)

    # --- inbound frames ---

    async def handle_frame(self, frame: dict[str, Any]) -> dict[str, Any] | None:
        """One master frame → the frame to send back, or None. Commands are awaited here; a transport
        runs each `command` frame in its own task so that they proceed concurrently."""
        kind = frame.get("type")
        if kind == FrameType.PING:
            return pong_frame()
        if kind == FrameType.COMMAND:
            return await self.execute(frame)
        if kind == FrameType.CONFIG:
            return self.configure(frame)
        if kind == FrameType.ERROR:
            logger.warning("master reports an error: %s", str(frame.get("message"))[:500])
            return None
        if kind == FrameType.REGISTERED:
            return None
        logger.debug("ignoring a frame of type %r", str(kind)[:40])
        return None

    def configure(self, frame: dict[str, Any]) -> dict[str, Any]:
        """A `config` frame: its top-level keys are logged (never a value); `openrouter` sets this
        master's key for the virtual containers."""
        config_id, payload = frame.get("id"), frame.get("payload")
        if not isinstance(payload, dict):
            return error_result(config_id, "bad config: payload: expected a JSON object")
        keys = ", ".join(str(k)[:40] for k in sorted(payload)) or "(none)"
        logger.info("config from the master %s: keys %s", self.master.url, keys)
        return self.workstation.virtual.apply_config(self.master.url, config_id, payload)

    async def execute(self, frame: dict[str, Any]) -> dict[str, Any] | None:
        """Run one command against the fronted server its `role` names → its result frame."""
        command_id = frame.get("id")
        if not isinstance(command_id, str | int) or isinstance(command_id, bool):
            logger.warning("dropping a command without an id")
            return None
        action = str(frame.get("action"))
        role = str(frame.get("role"))
        started = time.monotonic()
        self.workstation.active_requests += 1
        try:
            reply = await self._dispatch(command_id, action, role, frame)
        finally:
            self.workstation.active_requests -= 1
        logger.debug(
            "command %s action=%s role=%s → %s in %.0f ms",
            command_id,
            action[:40],
            role[:40],
            reply.get("error", "ok"),
            (time.monotonic() - started) * 1000,
        )
        return reply

    async def _dispatch(self, command_id: str | int, action: str, role: str, frame: dict[str, Any]) -> dict[str, Any]:
        if action in VIRTUAL_ACTIONS:  # a virtual container's (its refusals and failures are results too)
            try:
                return await self.workstation.virtual.execute(self.master.url, command_id, action, frame)
            except Exception:
                logger.exception("command %s (%s) failed inside the sidecar", command_id, action)
                return error_result(command_id, "sidecar internal error")
        run_action = ACTIONS.get(action)
        if run_action is None:
            known = ", ".join([*ACTIONS, *sorted(VIRTUAL_ACTIONS)])
            return error_result(command_id, f"unknown action {action[:40]!r}; expected one of {known}")
        upstream = self.upstreams.get(role)
        if upstream is None:
            serves = ", ".join(self.upstreams) or "no local server"
            return error_result(command_id, f"unknown role {role[:40]!r}; this sidecar serves {serves}")
        try:
            return result_frame(command_id, await run_action(upstream, frame))
        except ValidationError as exc:
            return error_result(command_id, describe_invalid(exc))
        except UpstreamError as exc:
            return error_result(command_id, exc.message)
        except Exception:
            logger.exception("command %s (%s) failed inside the sidecar", command_id, action)
            return error_result(command_id, "sidecar internal error")

    # --- the link ---

    async def run(self) -> None:
        """Connect to this master, serve and reconnect until cancelled (the workstation is closed by its owner)."""
        while True:
            try:
                await self.run_session()
                continue  # auto mode ended an HTTP session to retry WebSocket: no backoff
            except AuthRejected as exc:
                logger.error("%s: %s", self.master.url, exc)
            except MasterRejected as exc:
                logger.warning("%s: %s", self.master.url, exc)
            except ConnectionLost as exc:
                logger.warning("disconnected from %s: %s", self.master.url, exc)
            except Exception:  # a bug must not end the sidecar: log it and reconnect
                logger.exception("session with %s failed unexpectedly", self.master.url)
            delay = self.backoff.next_delay()
            logger.info("backoff: reconnecting to %s in %.2f s", self.master.url, delay)
            await self._sleep(delay)

    async def run_session(self) -> None:
        """One connection. Raises why it ended; returns only when auto mode leaves HTTP to retry WebSocket."""
        mode = self.settings.transport
        if mode is TransportMode.HTTP:
            await HttpSession(self).run()
            return
        try:
            await WsSession(self).run()
        except AuthRejected:
            raise
        except MasterRejected as exc:
            if mode is not TransportMode.AUTO:
                raise
            logger.warning(
                "WebSocket refused (HTTP %d); using the HTTP fallback, retrying WebSocket every %.0f s",
                exc.status,
                self.settings.ws_retry_s,
            )
        await HttpSession(self).run(until_s=self.settings.ws_retry_s)
