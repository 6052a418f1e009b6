"""What a transport needs of the agent: the frames to send and where to hand what comes back.

`ws_transport` and `http_transport` carry frames for an `AgentLink`; `agent.Agent` is one. The
transports depend on this protocol, the agent on the transports: no circle between them.
"""

from __future__ import annotations

from typing import Any, Protocol

from sidecar.settings import MasterSpec, SidecarSettings

__all__ = ["AgentLink"]


class AgentLink(Protocol):
    settings: SidecarSettings
    master: MasterSpec  # the master this link dials (its URL and fleet token)

    def register_frame(self) -> dict[str, Any]:
        """The register frame (with the id and credential of an earlier registration, if any)."""
        ...

    def agent_headers(self) -> dict[str, str]:
        """The HTTP fallback's proof that a call comes from this agent (empty before registering)."""
        ...

    async def heartbeat_frame(self) -> dict[str, Any]:
        """Checks every fronted server, then reports them."""
        ...

    def on_registered(self, via: str, answer: dict[str, Any]) -> None:
        """The master accepted the register frame (`via`: the transport's name)."""
        ...

    async def handle_frame(self, frame: dict[str, Any]) -> dict[str, Any] | None:
        """One master frame → the frame to send back, or None."""
        ...
