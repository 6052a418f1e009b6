"""Durable configuration: atomic file writes and the config store that admin pushes and index
registrations persist to."""

from __future__ import annotations

from cluster.config.atomic_file import fsync_dir, write_bytes_atomic
from cluster.config.registrations import IndexOrigin, IndexOwner, IndexRegistration
from cluster.config.store import ConfigStore, PersistedConfig, PersistedRole, effective_settings, overlay

__all__ = [
    "ConfigStore",
    "IndexOrigin",
    "IndexOwner",
    "IndexRegistration",
    "PersistedConfig",
    "PersistedRole",
    "effective_settings",
    "fsync_dir",
    "overlay",
    "write_bytes_atomic",
]
