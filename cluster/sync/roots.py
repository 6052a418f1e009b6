"""Which folders may be indexed: never the file system's root, a home folder as a whole, or a folder
of credentials or system state; from an MCP client, only inside the configured roots.

Paths are compared after resolving every symlink and `..` (`Path.resolve(strict=True)`), so a link
inside a root that points out of it, or `root/../elsewhere`, is outside; a root that is itself a
symlink counts as the folder it points to. Refusals name the setting that decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cluster.errors import PathRefused
from cluster.settings import ALLOWED_ROOTS_ENV

__all__ = ["NEVER_INDEXED", "confine", "indexable_folder"]

SYSTEM_FOLDERS = ("/proc", "/sys", "/dev", "/etc", "/boot", "/run", "/var/run", "/var/lib")
HOME_CREDENTIALS = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config/gcloud", ".password-store")
NEVER_INDEXED = "folders of credentials or system state are never indexed"


def indexable_folder(path: str, home: Path) -> Path:
    """The resolved folder `path` names, if anything may index it at all; PathRefused otherwise."""
    if not path or "\0" in path or not Path(path).is_absolute():
        raise PathRefused(path, "not an absolute path", "the path argument")
    try:
        real = Path(path).resolve(strict=True)
    except (OSError, RuntimeError):
        raise PathRefused(path, "it does not exist (or a link in it is broken or loops)", "the path argument") from None
    if not real.is_dir():
        raise PathRefused(path, "not a folder", "the path argument")
    if real == Path(real.anchor):
        raise PathRefused(path, "the file system's root", NEVER_INDEXED)
    if real == home.resolve():
        raise PathRefused(path, "a home folder as a whole (it holds credentials)", NEVER_INDEXED)
    for sensitive in _sensitive(home):
        if real == sensitive or real.is_relative_to(sensitive) or sensitive.is_relative_to(real):
            raise PathRefused(path, f"it is or holds {sensitive}", NEVER_INDEXED)
    return real


def confine(path: str, roots: Sequence[Path], home: Path) -> Path:
    """The resolved folder, if an MCP client may index it: inside one of `roots` and indexable."""
    if not roots:
        raise PathRefused(path, "indexing from an MCP client is off: no allowed roots are set", ALLOWED_ROOTS_ENV)
    real = indexable_folder(path, home)
    resolved_roots = [root.resolve() for root in roots]
    if not any(real == root or real.is_relative_to(root) for root in resolved_roots):
        allowed = ", ".join(str(root) for root in resolved_roots)
        raise PathRefused(path, f"{real} is outside the allowed roots ({allowed})", ALLOWED_ROOTS_ENV)
    return real


def _sensitive(home: Path) -> list[Path]:
    folders = [Path(folder) for folder in SYSTEM_FOLDERS]
    folders += [home / name for name in HOME_CREDENTIALS]
    return [folder.resolve() for folder in folders]
