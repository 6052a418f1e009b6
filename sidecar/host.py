"""The sidecar: one `Workstation` (the servers it fronts and hosts) and one `Agent` per master, run together.

Each master's agent has its own identity, credential, backoff and session, and reconnects on its own:
a master that is slow, refuses us or goes away never stalls the others' commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import random as _random
from collections.abc import Awaitable, Callable

import httpx

from sidecar.agent import Agent
from sidecar.backoff import BACKOFF_JITTER
from sidecar.settings import SidecarSettings
from sidecar.upstream import Upstream
from sidecar.virtual import VirtualContainers
from sidecar.workstation import Workstation

__all__ = ["Sidecar"]


class Sidecar:
    """Every master's session over the servers they share. `run` until cancelled; then everything is closed."""

    def __init__(
        self,
        settings: SidecarSettings,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        random: Callable[[], float] = _random.random,
        jitter: float = BACKOFF_JITTER,
        upstream_transport: httpx.AsyncBaseTransport | None = None,
        openrouter_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.workstation = Workstation(
            settings, upstream_transport=upstream_transport, openrouter_transport=openrouter_transport
        )
        self.agents: list[Agent] = [
            Agent(self.workstation, master, sleep=sleep, random=random, jitter=jitter) for master in settings.masters
        ]

    def __repr__(self) -> str:
        return f"Sidecar(agent_url={self.settings.agent_url!r}, masters={[a.master.url for a in self.agents]})"

    @property
    def upstreams(self) -> dict[str, Upstream]:
        return self.workstation.upstreams

    @property
    def virtual(self) -> VirtualContainers:
        return self.workstation.virtual

    def agent_for(self, master_url: str) -> Agent:
        """The session with the master at `master_url` (as given, without a trailing slash)."""
        url = master_url.rstrip("/")
        return next(a for a in self.agents if a.master.url == url)

    async def run(self) -> None:
        """Probe the local servers, then run one session per master until cancelled; close the clients."""
        tasks: list[asyncio.Task[None]] = []
        try:
            await self.workstation.probe_all()
            self.workstation.log_serving()
            tasks = [asyncio.ensure_future(agent.run()) for agent in self.agents]
            await asyncio.gather(*tasks)  # each runs until cancelled: it logs and reconnects on failure
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(BaseException):
                    await task
            await self.workstation.aclose()
