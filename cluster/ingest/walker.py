"""Walk a repository: yield the text files an index may hold, and record what it refused and why.

Which paths are walked. The first rule that applies decides:

1. Junk folders (ALWAYS_SKIPPED_DIRS: ``.git``, ``.venv``, ``node_modules``, ...) are never entered,
   whatever any other rule says.
2. ``settings.ingest.reinclude`` (the operator's patterns, gitignore syntax, root-relative): a
   matching path is walked even when an ignore file or the secret deny-list excludes it. The
   content scan (cluster.ingest.secret_scan) still applies to what it brings in.
3. Ignore rules. First git's, lowest precedence first, as git applies them: the user's
   ``core.excludesFile``, then ``.git/info/exclude``, then every ``.gitignore`` (a deeper one
   overrides its parents). Then ``.samespaceignore`` files (same syntax, at the root and in
   subfolders), which have the last word over every git rule: a pattern keeps a path out of the
   index only, and ``!pattern`` re-includes a path git ignores. ``WalkSettings.extra_ignores`` come
   last of all. An ignored path is skipped silently: ignoring is normal, it is not recorded. A root
   below its repository's top folder is under the ignore files of every folder above it too, down
   from the top, each anchored at its own folder (cluster.ingest.ignore_rules).
4. The secret deny-list (cluster.ingest.secret_files.SECRET_DENY plus ``settings.ingest.extra_deny``): a
   matching file is never opened and a matching folder never entered; each is recorded as
   SkipReason.SECRET_FILE. A repository's own ``.samespaceignore`` cannot lift it (the repository
   is content, not configuration); only ``ingest.reinclude`` can.

As in git, nothing under an excluded folder can be re-included unless the folder itself is: to
re-include ``secrets/example.env``, re-include ``secrets/`` too.

Symlinks. A symlinked folder is never entered. A symlinked file is read only when its target is a
regular file inside the root whose own repository-relative path passes every rule above (so no
link reaches into any ``.git/`` folder, out of the root, or into an ignored or denied path); any
other link is recorded as SkipReason.SYMLINK. In-tree ignore files that are symlinks are not read
(git does the same since 2.32). Paths are never followed by name: every folder and file is opened
relative to its folder's handle with no symlink followed (cluster.ingest.nofollow), so a folder or
file replaced by a symlink after it was listed is recorded as SYMLINK, never read through.

Files. Over ``max_file_bytes``: TOO_LARGE. A NUL byte, or more than MAX_INVALID_UTF8_SHARE of the
bytes not UTF-8: BINARY. Fewer bad bytes are decoded with U+FFFD in their place. A file or folder
that cannot be listed or read: UNREADABLE. Empty files and special files (FIFOs, sockets) are
skipped silently. A root that is missing, not a folder or cannot be listed raises ScanError, so an
unmounted root never looks like an empty repository; so does a root that is or lies inside a git
folder, or whose repository's ``.git`` points elsewhere (cluster.ingest.git_dir).

Only paths are recorded, never contents.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from cluster.errors import PathRefused, ScanError
from cluster.ingest.git_dir import Repository, find_repository, git_folder_of, repository_top
from cluster.ingest.ignore_rules import ALWAYS_SKIPPED_DIRS, Decision, WalkPolicy
from cluster.ingest.nofollow import (
    FILE_FLAGS,
    FOLDER_FLAGS,
    FileTooLarge,
    NotRegularFile,
    identity,
    open_file_below,
    open_folder,
    open_folder_below,
    read_regular,
)
from cluster.ingest.secret_files import SECRET_DENY, DenyList
from cluster.ingest.skips import SkipLog, SkipReason

if TYPE_CHECKING:
    from cluster.settings import SamespaceSettings

DEFAULT_MAX_FILE_BYTES = 1_000_000
MAX_INVALID_UTF8_SHARE = 0.02  # more undecodable bytes than this share of the file: binary
MAX_HELD_FOLDERS = 64  # folder handles a walk keeps open; deeper ones are opened again on the way back

__all__ = [
    "ALWAYS_SKIPPED_DIRS",
    "DEFAULT_MAX_FILE_BYTES",
    "SourceFile",
    "WalkSettings",
    "decode_source",
    "walk_repository",
    "walk_settings",
]


@dataclass(frozen=True)
class WalkSettings:
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    extra_ignores: tuple[str, ...] = ()  # gitignore-style patterns, relative to the root, ignored last
    deny: tuple[str, ...] = SECRET_DENY  # the secret deny-list (module docstring, rule 4)
    reinclude: tuple[str, ...] = ()  # walked despite ignore files and the deny-list (rule 2)
    # Where the user's git files live (~/.gitconfig, $XDG_CONFIG_HOME/git/{config,ignore}); None reads
    # no user-level git file. walk_settings fills them from the environment.
    home: Path | None = None
    xdg_config_home: Path | None = None

    def deny_list(self) -> DenyList:
        return DenyList(self.deny, self.reinclude)


def walk_settings(settings: SamespaceSettings, environ: Mapping[str, str] | None = None) -> WalkSettings:
    """The walk a reindex does under ``settings``: size cap, deny-list, re-includes, the user's git files."""
    env = os.environ if environ is None else environ
    home = env.get("HOME") or None
    xdg = env.get("XDG_CONFIG_HOME") or None
    return WalkSettings(
        max_file_bytes=settings.chunking.max_file_bytes,
        deny=SECRET_DENY + tuple(settings.ingest.extra_deny),
        reinclude=tuple(settings.ingest.reinclude),
        home=Path(home) if home and os.path.isabs(home) else None,
        # XDG: a relative value is invalid and ignored
        xdg_config_home=Path(xdg) if xdg and os.path.isabs(xdg) else None,
    )


@dataclass(frozen=True)
class SourceFile:
    path: str  # repository-relative POSIX path
    abs_path: Path
    text: str
    size: int  # bytes on disk


def decode_source(data: bytes) -> str | None:
    """The text of a file's bytes, or None when they are binary.

    Binary: a NUL byte, or more than MAX_INVALID_UTF8_SHARE of the bytes undecodable. Below that,
    each undecodable byte sequence becomes U+FFFD (a stray Latin-1 byte in a comment).
    """
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    text = data.decode("utf-8", errors="replace")
    if text.count("\ufffd") > len(data) * MAX_INVALID_UTF8_SHARE:
        return None
    return text


def walk_repository(root: Path, settings: WalkSettings, skips: SkipLog | None = None) -> Iterator[SourceFile]:
    """Yield the repository's text files in sorted path order; record refusals in ``skips``.

    Raises ScanError at once (before the first file) when the root is missing, not a folder, cannot
    be listed, is or lies inside a git folder, or belongs to a repository whose ``.git`` points
    elsewhere (cluster.ingest.git_dir).
    """
    try:
        real_root = root.resolve(strict=True)
    except OSError as exc:
        raise ScanError(str(root), exc.strerror or "no such folder") from exc
    except RuntimeError as exc:  # Python 3.11 reports a symlink loop this way
        raise ScanError(str(root), "a symlink loop") from exc
    if not real_root.is_dir():
        raise ScanError(str(root), "not a folder")
    repository = _repository_of(root, real_root)
    try:
        fd = open_folder(real_root)
    except OSError as exc:
        raise ScanError(str(root), f"cannot list it ({exc.strerror or type(exc).__name__})") from exc
    try:
        root_identity = identity(fd)
        entries = _list_folder(fd)
    except OSError as exc:
        raise ScanError(str(root), f"cannot list it ({exc.strerror or type(exc).__name__})") from exc
    finally:
        os.close(fd)
    return _walk(real_root, (root_identity, entries), repository, settings, SkipLog() if skips is None else skips)


def _repository_of(root: Path, real_root: Path) -> Repository | None:
    """The repository whose ignore files apply to the walk (ScanError when it is refused). None for a
    root inside a junk folder of its repository (a package in node_modules/, the store's exported
    builds): the repository's own walk never goes there, so it is a folder of its own."""
    top = repository_top(real_root)
    in_junk = top is not None and any(part in ALWAYS_SKIPPED_DIRS for part in real_root.relative_to(top).parts)
    if in_junk and git_folder_of(real_root) is None:
        return None
    try:
        return find_repository(real_root)
    except PathRefused as refused:
        raise ScanError(str(root), refused.reason) from None


# ---------------------------------------------------------------------------------------------
# the walk: every folder and file opened relative to its folder's handle, no symlink followed


class _Kind(Enum):
    FOLDER = "folder"
    LINK = "link"
    FILE = "file"  # or anything else that is not a folder: the read decides


@dataclass
class _Frame:
    """A folder being walked: its path ('' or 'a/b/'), (device, inode), what is left of its listing,
    and its handle (None once released: the walk went deeper than MAX_HELD_FOLDERS)."""

    rel: str
    ident: tuple[int, int]
    children: Iterator[tuple[str, _Kind]]
    fd: int | None


def _walk(
    real_root: Path,
    listed: tuple[tuple[int, int], list[tuple[str, _Kind]]],
    repository: Repository | None,
    settings: WalkSettings,
    skips: SkipLog,
) -> Iterator[SourceFile]:
    """The walk from the root's listing (its identity and entries, taken when it was checked)."""
    try:
        root_fd = open_folder(real_root)
    except OSError as exc:
        raise ScanError(str(real_root), f"cannot list it ({exc.strerror or type(exc).__name__})") from exc
    stack = [_Frame("", listed[0], iter(listed[1]), root_fd)]
    try:
        if identity(root_fd) != listed[0]:
            raise ScanError(str(real_root), "the folder was replaced after it was checked")
        policy = WalkPolicy(
            real_root,
            root_fd,
            repository,
            deny=settings.deny_list(),
            extra_ignores=settings.extra_ignores,
            home=settings.home,
            xdg_config_home=settings.xdg_config_home,
        )
        yield from _walk_tree(policy, real_root, stack, settings, skips)
    finally:
        for frame in stack[1:]:
            if frame.fd is not None:
                os.close(frame.fd)
        os.close(root_fd)


def _walk_tree(
    policy: WalkPolicy, real_root: Path, stack: list[_Frame], settings: WalkSettings, skips: SkipLog
) -> Iterator[SourceFile]:
    # Depth-first with an explicit stack, so a deeply nested tree cannot exhaust the recursion limit.
    # The root's frame stays at the bottom (its handle is _walk's to close).
    root_fd = stack[0].fd
    assert root_fd is not None  # the root's handle is never released
    while stack:
        frame = stack[-1]
        child = next(frame.children, None)
        if child is None:
            if len(stack) == 1:
                return
            done = stack.pop()
            if done.fd is not None:
                if stack[-1].fd is None:  # released on the way down: its child's ".." is the way back
                    stack[-1].fd = _parent_of(done.fd, stack[-1].ident)
                os.close(done.fd)
            continue
        folder_fd = _held(frame, root_fd, skips)
        if folder_fd is None:
            continue
        name, kind = child
        rel = frame.rel + name
        decision = policy.decide(name, rel, kind is _Kind.FOLDER, frame.rel, folder_fd)
        if decision is Decision.DENIED:
            skips.add(SkipReason.SECRET_FILE, rel + "/" if kind is _Kind.FOLDER else rel)
            continue
        if decision is not Decision.WALK:
            continue
        if kind is _Kind.FOLDER:
            entered = _enter(folder_fd, name, rel, skips)
            if entered is not None:
                stack.append(entered)
                _release_far(stack)
        else:
            source = _read_entry(policy, (folder_fd, root_fd), name, rel, kind is _Kind.LINK, settings, skips)
            if source is not None:
                yield SourceFile(path=rel, abs_path=real_root / rel, text=source[0], size=source[1])


def _list_folder(fd: int) -> list[tuple[str, _Kind]]:
    """The folder's entries, typed while its handle is open, sorted as full paths sort ("name/" for
    folders, so the output is in plain sorted order of full paths)."""
    with os.scandir(fd) as it:
        listed = [(entry.name, _kind(entry)) for entry in it]
    listed.sort(key=lambda pair: pair[0] + "/" if pair[1] is _Kind.FOLDER else pair[0])
    return listed


def _kind(entry: os.DirEntry[str]) -> _Kind:
    try:
        if entry.is_symlink():
            return _Kind.LINK
        return _Kind.FOLDER if entry.is_dir(follow_symlinks=False) else _Kind.FILE
    except OSError:
        return _Kind.FILE


def _enter(parent_fd: int, name: str, rel: str, skips: SkipLog) -> _Frame | None:
    """The frame of a sub folder, opened relative to its parent's handle; None (recorded) when it
    cannot be, or is no longer a folder (replaced by a symlink since it was listed)."""
    try:
        fd = os.open(name, FOLDER_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        swapped = exc.errno in (errno.ELOOP, errno.ENOTDIR)
        skips.add(SkipReason.SYMLINK if swapped else SkipReason.UNREADABLE, rel + "/")
        return None
    try:
        return _Frame(rel + "/", identity(fd), iter(_list_folder(fd)), fd)
    except OSError:
        os.close(fd)
        skips.add(SkipReason.UNREADABLE, rel + "/")
        return None


def _release_far(stack: list[_Frame]) -> None:
    """Close the handle of the frame MAX_HELD_FOLDERS below the top (never the root's)."""
    far = len(stack) - 1 - MAX_HELD_FOLDERS
    if far < 1:
        return
    frame = stack[far]
    if frame.fd is not None:
        os.close(frame.fd)
        frame.fd = None


def _parent_of(fd: int, expected: tuple[int, int]) -> int | None:
    """The handle of the folder above the handle `fd`, if it is still the folder `expected` names."""
    try:
        parent = os.open("..", FOLDER_FLAGS, dir_fd=fd)
    except OSError:
        return None
    if identity(parent) != expected:  # the folder was moved since: the frame is opened from the root
        os.close(parent)
        return None
    return parent


def _held(frame: _Frame, root_fd: int, skips: SkipLog) -> int | None:
    """The frame's handle, opened again from the root (no symlink followed, the same folder as
    listed) when it was released; None (recorded, the rest of the folder dropped) when it cannot be."""
    if frame.fd is not None:
        return frame.fd
    try:
        fd = open_folder_below(root_fd, frame.rel.rstrip("/"))
    except OSError:
        fd = None
    if fd is not None and identity(fd) != frame.ident:
        os.close(fd)
        fd = None
    if fd is None:
        skips.add(SkipReason.UNREADABLE, frame.rel)
        frame.children = iter(())
    frame.fd = fd
    return fd


def _read_entry(
    policy: WalkPolicy,
    handles: tuple[int, int],
    name: str,
    rel: str,
    is_link: bool,
    settings: WalkSettings,
    skips: SkipLog,
) -> tuple[str, int] | None:
    """The text and size of one file of the folder whose handle is ``handles[0]`` (``handles[1]``:
    the root's), or None (recorded when it is a refusal). A symlink is read as the file it leads to
    inside the root, opened from the root's handle; anything else relative to its folder's handle."""
    folder_fd, root_fd = handles
    target = None
    if is_link:
        target = policy.symlink_target(rel)
        if target is None:
            skips.add(SkipReason.SYMLINK, rel)
            return None
    try:
        fd = open_file_below(root_fd, target) if target is not None else os.open(name, FILE_FLAGS, dir_fd=folder_fd)
        try:
            data = read_regular(fd, settings.max_file_bytes)
        finally:
            os.close(fd)
    except FileTooLarge:
        skips.add(SkipReason.TOO_LARGE, rel)
        return None
    except NotRegularFile:
        return None
    except OSError as exc:  # ELOOP: a symlink in its place (or on the way) since it was listed
        skips.add(SkipReason.SYMLINK if exc.errno == errno.ELOOP else SkipReason.UNREADABLE, rel)
        return None
    if not data:
        return None
    text = decode_source(data)
    if text is None:
        skips.add(SkipReason.BINARY, rel)
        return None
    return text, len(data)
