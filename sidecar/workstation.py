"""What every master's session on this sidecar shares: the fronted local servers and the virtual containers.

One `Workstation` per sidecar process: one httpx client per fronted server (whichever master's command
uses it) and the virtual containers, which keep their keys and counters per master themselves.
"""

from __future__ import annotations

import asyncio
import logging

import httpx

from sidecar.settings import SidecarSettings
from sidecar.upstream import Upstream
from sidecar.virtual import VirtualContainers

__all__ = ["Workstation"]

logger = logging.getLogger("sidecar")


class Workstation:
    """The sidecar's servers: `upstreams` (local, by role) and `virtual` (OpenRouter, per master)."""

    def __init__(
        self,
        settings: SidecarSettings,
        *,
        upstream_transport: httpx.AsyncBaseTransport | None = None,
        openrouter_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.upstreams: dict[str, Upstream] = {
            spec.role: Upstream(
                spec,
                key=settings.upstream_key,
                timeout_s=settings.upstream_timeout_s,
                probe_timeout_s=settings.probe_timeout_s,
                transport=upstream_transport,
            )
            for spec in settings.serves
        }
        self.virtual = VirtualContainers(
            settings.virtual,
            hostname=settings.hostname,
            masters=[m.url for m in settings.masters],
            base_url=settings.openrouter_base_url,
            timeout_s=settings.upstream_timeout_s,
            transport=openrouter_transport,
        )
        # Commands in flight, from every master: the load on this machine that each heartbeat reports.
        self.active_requests = 0

    def __repr__(self) -> str:
        return f"Workstation(roles={sorted(self.upstreams)}, virtual={self.virtual!r})"

    def container_names(self) -> list[str]:
        """The local containers (`ss-<role>`): a virtual one is announced only by the `containers` command."""
        return [u.spec.container_name for u in self.upstreams.values()]

    async def probe_all(self) -> None:
        await asyncio.gather(*(u.probe() for u in self.upstreams.values()))

    def log_serving(self) -> None:
        for upstream in self.upstreams.values():
            logger.info("fronting %s at %s (%s)", upstream.role, upstream.endpoint, upstream.state.value)
        for role, spec in self.virtual.specs.items():
            pin = f"@{spec.upstream}" if spec.upstream else " (no upstream pinned)"
            logger.info("hosting %s: %s through OpenRouter, %s%s", self.virtual.names[role], role, spec.model, pin)

    async def aclose(self) -> None:
        await asyncio.gather(
            *(u.aclose() for u in self.upstreams.values()), self.virtual.aclose(), return_exceptions=True
        )
