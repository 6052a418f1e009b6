"""Samespace reference sidecar: a small process on a workstation that fronts its OpenAI-compatible
servers (embedding, reranker, chat) for the master, over a WebSocket or the HTTP long-poll fallback.

Self-contained: httpx, websockets, pydantic and the standard library only (no torch, ray or cluster/).
Run it with `python -m sidecar --help`.
"""

from __future__ import annotations

from sidecar._version import __version__

from sidecar.agent import Agent  # noqa: E402
from sidecar.backoff import Backoff  # noqa: E402
from sidecar.errors import (  # noqa: E402
    AuthRejected,
    ConnectionLost,
    MasterRejected,
    SettingsError,
    SidecarError,
    UpstreamError,
)
from sidecar.settings import ServeSpec, SidecarSettings, TransportMode, parse_serve  # noqa: E402
from sidecar.upstream import ContainerState, Upstream  # noqa: E402

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
