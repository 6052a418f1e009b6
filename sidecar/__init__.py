"""Samespace reference sidecar: a small process on a workstation that fronts its OpenAI-compatible
servers (embedding, reranker, chat) for the master, over a WebSocket or the HTTP long-poll fallback.

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
    from sidecar.errors import AuthRejected, ConnectionLost, MasterRejected, SettingsError, SidecarError, UpstreamError
    from sidecar.settings import ServeSpec, SidecarSettings, TransportMode, parse_serve
    from sidecar.upstream import ContainerState, Upstream

__all__ = [
    "Agent",
    "AuthRejected",
    "Backoff",
    "ConnectionLost",
    "ContainerState",
    "MasterRejected",
    "ServeSpec",
    "SettingsError",
    "SidecarError",
    "SidecarSettings",
    "TransportMode",
    "Upstream",
    "UpstreamError",
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
