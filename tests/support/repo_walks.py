"""What the walker tests share: writing a file into a tree, the paths a walk yields, and a spy on the
paths os.open is asked for (the walker opens files only that way).

Secrets are assembled at run time so no file holds a literal credential.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from cluster.ingest.skips import SkipLog
from cluster.ingest.walker import WalkSettings, walk_repository

SECRET_TEXT = "canary" + "-" + "d41d8cd98f00b204e980"  # a marker that must never leave a denied file


def write(root: Path, rel: str, content: str | bytes = "x = 1\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def walked(root: Path, settings: WalkSettings | None = None) -> list[str]:
    return [f.path for f in walk_repository(root, settings or WalkSettings())]


def opened_path(path: Any, kwargs: dict[str, Any]) -> str:
    """The full path an os.open or os.scandir call names: a name below a folder handle (dir_fd), a
    folder handle itself, or a path."""
    if isinstance(path, int):
        return os.readlink(f"/proc/self/fd/{path}")
    dir_fd = kwargs.get("dir_fd")
    if dir_fd is None:
        return os.fspath(path)
    return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), os.fspath(path))


def spy_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every full path os.open is asked for while the test runs (the walker opens files only this way)."""
    opened: list[str] = []
    real_open = os.open

    def spy(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        opened.append(opened_path(path, kwargs))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    return opened


def walked_with(root: Path, settings: WalkSettings, skips: SkipLog) -> list[str]:
    return [f.path for f in walk_repository(root, settings, skips)]
