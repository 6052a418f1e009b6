"""Samespace reference sidecar: a small process on a workstation that fronts its OpenAI-compatible
servers (embedding, reranker, chat) for the master, over a WebSocket or the HTTP long-poll fallback.

One sidecar may serve several masters (one `Agent` session each, run by `Sidecar`), and may host
virtual containers: roles it serves through OpenRouter with the key each master pushes to it.
Self-contained: httpx, websockets, pydantic and the standard library only (no torch, ray or cluster/).
Run it with `python -m sidecar --help`.

The names below load on first use, so that importing `sidecar.wire` (the protocol the master
shares, pydantic only) does not start the agent and its httpx and websockets imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sidecar._version import __version__

if TYPE_CHECKING:
    from sidecar.agent import Agent
    from sidecar.backoff import Backoff
    from sidecar.errors import (
        AuthRejected,
        ConnectionLost,
        MasterRejected,
        OpenRouterError,
        SettingsError,
        SidecarError,
        UpstreamError,
    )
    from sidecar.host import Sidecar
    from sidecar.openrouter import OpenRouterClient
    from sidecar.settings import MasterSpec, ServeSpec, SidecarSettings, TransportMode, VirtualServeSpec, parse_serve
    from sidecar.upstream import ContainerState, Upstream
    from sidecar.virtual import VirtualContainers
    from sidecar.workstation import Workstation

__all__ = [
    "Agent",
    "AuthRejected",
    "Backoff",
    "ConnectionLost",
    "ContainerState",
    "MasterRejected",
    "MasterSpec",
    "OpenRouterClient",
    "OpenRouterError",
    "ServeSpec",
    "SettingsError",
    "Sidecar",
    "SidecarError",
    "SidecarSettings",
    "TransportMode",
    "Upstream",
    "UpstreamError",
    "VirtualContainers",
    "VirtualServeSpec",
    "Workstation",
    "__version__",
    "parse_serve",
]

# Each exported name → the module that defines it.
_EXPORTS = {
    "Agent": "sidecar.agent",
    "Backoff": "sidecar.backoff",
    "AuthRejected": "sidecar.errors",
    "ConnectionLost": "sidecar.errors",
    "MasterRejected": "sidecar.errors",
    "SettingsError": "sidecar.errors",
    "SidecarError": "sidecar.errors",
    "UpstreamError": "sidecar.errors",
    "OpenRouterError": "sidecar.errors",
    "Sidecar": "sidecar.host",
    "OpenRouterClient": "sidecar.openrouter",
    "MasterSpec": "sidecar.settings",
    "VirtualServeSpec": "sidecar.settings",
    "VirtualContainers": "sidecar.virtual",
    "Workstation": "sidecar.workstation",
    "ServeSpec": "sidecar.settings",
    "SidecarSettings": "sidecar.settings",
    "TransportMode": "sidecar.settings",
    "parse_serve": "sidecar.settings",
    "ContainerState": "sidecar.upstream",
    "Upstream": "sidecar.upstream",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sidecar' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
