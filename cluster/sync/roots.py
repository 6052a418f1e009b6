"""Which folders may be indexed: never the file system's root, a home folder as a whole, a folder
of credentials or system state, or a git folder; from an MCP client, only inside the configured roots.

Paths are compared after resolving every symlink and `..` (`Path.resolve(strict=True)`), so a link
inside a root that points out of it, or `root/../elsewhere`, is outside; a root that is itself a
symlink counts as the folder it points to too. From an MCP client (`confine`) the path is first
compared with the roots lexically (`..` collapsed, nothing on disk touched), and a path outside the
roots gets the same refusal whether or not it exists, so a client cannot probe the file system
outside its roots. A folder that is or lies inside a git folder (`.git/config` may hold a CI token),
or whose repository's `.git` is not a real folder of its own (a `.git` file or symlink, alternates:
git would read a repository elsewhere), is refused whoever asks (cluster.ingest.find_repository).
Refusals name the setting that decides.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from cluster.errors import PathRefused
from cluster.ingest import find_repository
from cluster.settings import ALLOWED_ROOTS_ENV

__all__ = ["NEVER_INDEXED", "admit_folder", "confine", "indexable_folder"]

SYSTEM_FOLDERS = ("/proc", "/sys", "/dev", "/etc", "/boot", "/run", "/var/run", "/var/lib")
HOME_CREDENTIALS = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config/gcloud", ".password-store")
NEVER_INDEXED = "folders of credentials or system state are never indexed"
PATH_ARGUMENT = "the path argument"


def admit_folder(path: str, roots: Sequence[Path], home: Path, *, confined: bool) -> Path:
    """The resolved folder `path` names, if it may be indexed: `confine` for what an MCP client asked
    (again when its build starts, by the job's `--confined`), `indexable_folder` otherwise."""
    return confine(path, roots, home) if confined else indexable_folder(path, home)


def indexable_folder(path: str, home: Path) -> Path:
    """The resolved folder `path` names, if anything may index it at all; PathRefused otherwise."""
    _check_absolute(path)
    try:
        real = Path(path).resolve(strict=True)
    except (OSError, RuntimeError):
        raise PathRefused(path, "it does not exist (or a link in it is broken or loops)", PATH_ARGUMENT) from None
    return _indexable(path, real, home)


def confine(path: str, roots: Sequence[Path], home: Path) -> Path:
    """The resolved folder, if an MCP client may index it: inside one of `roots` and indexable."""
    if not roots:
        raise PathRefused(path, "indexing from an MCP client is off: no allowed roots are set", ALLOWED_ROOTS_ENV)
    _check_absolute(path)
    written = [Path(os.path.normpath(root)) for root in roots]
    resolved = [root.resolve() for root in roots]
    allowed = ", ".join(str(root) for root in written)
    # One refusal for outside and for missing: which of the two it is would tell what exists outside.
    outside = PathRefused(path, f"it is outside the allowed roots ({allowed}) or does not exist", ALLOWED_ROOTS_ENV)
    if not _within(Path(os.path.normpath(path)), [*written, *resolved]):
        raise outside
    try:
        real = Path(path).resolve(strict=True)
    except (OSError, RuntimeError):
        raise outside from None
    if not _within(real, resolved):
        raise outside
    return _indexable(path, real, home)


def _check_absolute(path: str) -> None:
    if not path or "\0" in path or not Path(path).is_absolute():
        raise PathRefused(path, "not an absolute path", PATH_ARGUMENT)


def _within(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _indexable(path: str, real: Path, home: Path) -> Path:
    if not real.is_dir():
        raise PathRefused(path, "not a folder", PATH_ARGUMENT)
    if real == Path(real.anchor):
        raise PathRefused(path, "the file system's root", NEVER_INDEXED)
    if real == home.resolve():
        raise PathRefused(path, "a home folder as a whole (it holds credentials)", NEVER_INDEXED)
    for sensitive in _sensitive(home):
        if real == sensitive or real.is_relative_to(sensitive) or sensitive.is_relative_to(real):
            raise PathRefused(path, f"it is or holds {sensitive}", NEVER_INDEXED)
    try:
        find_repository(real)
    except PathRefused as refused:
        raise PathRefused(path, refused.reason, refused.setting) from None
    return real


def _sensitive(home: Path) -> list[Path]:
    folders = [Path(folder) for folder in SYSTEM_FOLDERS]
    folders += [home / name for name in HOME_CREDENTIALS]
    return [folder.resolve() for folder in folders]
