"""The sidecar fleet: the wire protocol, agent identity, the registry, the command desk, sidecar providers
(local servers from heartbeats, virtual containers from the `containers` command)."""

from __future__ import annotations

from cluster.fleet.agent_registry import Fleet, HostRecord, HostView
from cluster.fleet.frames import (
    AGENT_ID_HEADER,
    CREDENTIAL_HEADER,
    MAX_FRAME_BYTES,
    MAX_RESULT_BYTES,
    VirtualUsage,
    error_frame,
)
from cluster.fleet.hub import CLOSE_SOCKET, Answer, FleetHub
from cluster.fleet.identity import credential_digest, normalise_agent_url
from cluster.fleet.sidecar_providers import sidecar_providers
from cluster.fleet.virtual_calls import charges_for
from cluster.fleet.virtual_providers import VirtualBook, VirtualContainerView, VirtualHost, virtual_providers

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
    "VirtualBook",
    "VirtualContainerView",
    "VirtualHost",
    "VirtualUsage",
    "charges_for",
    "credential_digest",
    "error_frame",
    "normalise_agent_url",
    "sidecar_providers",
    "virtual_providers",
]
