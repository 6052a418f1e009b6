"""The sidecar version (reported in heartbeats)."""

__version__ = "0.1.0"
