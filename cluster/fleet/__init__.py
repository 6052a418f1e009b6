"""The sidecar fleet: the wire protocol, agent identity, the registry, the command desk, sidecar providers."""

from cluster.fleet.hub import Answer, CLOSE_SOCKET, FleetHub
from cluster.fleet.identity import credential_digest
from cluster.fleet.protocol import AGENT_ID_HEADER, CREDENTIAL_HEADER, MAX_FRAME_BYTES, MAX_RESULT_BYTES, error_frame
from cluster.fleet.providers import sidecar_providers
from cluster.fleet.registry import Fleet, HostRecord, HostView

__all__ = [
    "AGENT_ID_HEADER",
    "Answer",
    "CLOSE_SOCKET",
    "CREDENTIAL_HEADER",
    "Fleet",
    "FleetHub",
    "HostRecord",
    "HostView",
    "MAX_FRAME_BYTES",
    "MAX_RESULT_BYTES",
    "credential_digest",
    "error_frame",
    "sidecar_providers",
]
