"""The Edge engine's own files: a private data folder and JSON written atomically; its errors as ours.

`EdgeStore` keeps its alias map, each collection's config and metadata as small JSON files beside
the shards. They hold names and source provenance, so the folder is private (0700, nothing of it
readable by group or others) and each file is replaced whole: readers see the old or the new.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cluster.config.atomic_file import write_bytes_atomic
from cluster.errors import StoreError

# The layout under the data folder (cluster/index/store/edge.py says what each holds).
COLLECTIONS_DIR = "collections"
ALIASES_FILE = "aliases.json"
CONFIG_FILE = "collection.json"
METADATA_FILE = "meta.json"
POOL_FILE = "pool.json"
SHARD_DIR = "shard"
TOMBSTONE_PREFIX = ".dropping-"

PRIVATE_DIR_MODE = 0o700
NOT_OWNER = 0o077  # group and other permission bits


def make_private(root: Path) -> None:
    """Create `root` 0700 (parents as the umask says) and take group/other access off its tree."""
    try:
        root.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        os.chmod(root, PRIVATE_DIR_MODE)
        for directory, dirnames, filenames in os.walk(root):  # symlinks are listed, never followed
            for name in (*dirnames, *filenames):
                path = os.path.join(directory, name)
                mode = os.lstat(path).st_mode
                if not stat.S_ISLNK(mode) and mode & NOT_OWNER:
                    os.chmod(path, stat.S_IMODE(mode) & ~NOT_OWNER)
    except OSError as exc:
        raise StoreError("open", f"cannot make {root} private: {exc}") from exc


def write_json_atomic(path: Path, value: Any, operation: str) -> None:
    """Write JSON to a temp file beside `path`, fsync it, rename over `path`, fsync the dir."""
    try:
        data = json.dumps(value, sort_keys=True, indent=1).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise StoreError(operation, f"not JSON-able: {exc}") from exc
    try:
        write_bytes_atomic(path, data)
    except OSError as exc:
        raise StoreError(operation, f"cannot write {path}: {exc}") from exc


@contextmanager
def engine_errors(operation: str) -> Iterator[None]:
    """Translate the bare Exceptions qdrant_edge raises into StoreError."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(operation, f"qdrant edge: {exc}") from exc


def read_json(path: Path) -> Any | None:
    """Parsed JSON, or None when the file is missing or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
