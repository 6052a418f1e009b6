"""The sidecar fleet: the wire protocol, agent identity, the registry, the command desk, sidecar providers."""

from __future__ import annotations

from cluster.fleet.agent_registry import Fleet, HostRecord, HostView
from cluster.fleet.frames import AGENT_ID_HEADER, CREDENTIAL_HEADER, MAX_FRAME_BYTES, MAX_RESULT_BYTES, error_frame
from cluster.fleet.hub import CLOSE_SOCKET, Answer, FleetHub
from cluster.fleet.identity import credential_digest
from cluster.fleet.sidecar_providers import sidecar_providers

__all__ = [
    "AGENT_ID_HEADER",
    "CLOSE_SOCKET",
    "CREDENTIAL_HEADER",
    "MAX_FRAME_BYTES",
    "MAX_RESULT_BYTES",
    "Answer",
    "Fleet",
    "FleetHub",
    "HostRecord",
    "HostView",
    "credential_digest",
    "error_frame",
    "sidecar_providers",
]
