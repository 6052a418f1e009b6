"""The sidecar version (reported in heartbeats)."""

from __future__ import annotations

__version__ = "0.1.0"
