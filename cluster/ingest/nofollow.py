"""Opening paths without following a symlink on any component, and bounded reads of what was opened.

`O_NOFOLLOW` alone guards only a path's last component: a folder on the way that was swapped for a
symlink after the path was checked would still be followed. Here every component is opened on its
own, relative to the handle of the folder above it, with `O_NOFOLLOW` (and `O_DIRECTORY` for
folders), so a swapped component fails the open (ENOTDIR or ELOOP) instead of leading elsewhere. A
walk that holds a folder's handle opens its entries relative to it, one component each.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC  # a folder to list
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC  # never blocks on a FIFO
# A folder passed through on the way: O_PATH needs no read permission on it (search is enough).
_STEP_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC


class NotRegularFile(Exception):
    """What was opened is not a regular file (a FIFO, a socket, a device, a folder)."""


class FileTooLarge(Exception):
    """The file holds more bytes than the read allows."""


def components(relative: str) -> list[str]:
    """The components of a relative POSIX path; OSError(EINVAL) for '', '.', '..' or an absolute path."""
    parts = relative.split("/")
    if relative.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise OSError(errno.EINVAL, "not a plain relative path", relative)
    return parts


def open_folder(path: Path) -> int:
    """A listable handle of the absolute folder `path`, no symlink followed from the file system's root."""
    if not path.is_absolute():
        raise OSError(errno.EINVAL, "not an absolute path", str(path))
    top = os.open(path.anchor, _STEP_FLAGS)
    try:
        parts = path.parts[1:]
        return open_folder_below(top, "/".join(parts)) if parts else os.open(".", FOLDER_FLAGS, dir_fd=top)
    finally:
        os.close(top)


def open_folder_below(dir_fd: int, relative: str) -> int:
    """A listable handle of the folder `relative` below the folder handle `dir_fd`, no symlink followed."""
    *steps, last = components(relative)
    parent = _step_down(dir_fd, steps)
    try:
        return os.open(last, FOLDER_FLAGS, dir_fd=parent)
    finally:
        if parent != dir_fd:
            os.close(parent)


def open_file_below(dir_fd: int, relative: str) -> int:
    """A read handle of the file `relative` below the folder handle `dir_fd`, no symlink followed."""
    *steps, last = components(relative)
    parent = _step_down(dir_fd, steps)
    try:
        return os.open(last, FILE_FLAGS, dir_fd=parent)
    finally:
        if parent != dir_fd:
            os.close(parent)


def open_file(path: Path) -> int:
    """A read handle of the absolute file `path`, no symlink followed from the file system's root."""
    if not path.is_absolute() or len(path.parts) < 2:
        raise OSError(errno.EINVAL, "not an absolute file path", str(path))
    top = os.open(path.anchor, _STEP_FLAGS)
    try:
        return open_file_below(top, "/".join(path.parts[1:]))
    finally:
        os.close(top)


def _step_down(dir_fd: int, steps: list[str]) -> int:
    """A handle of the folder `steps` lead to below `dir_fd` (dir_fd itself when there are none)."""
    current = dir_fd
    try:
        for step in steps:
            following = os.open(step, _STEP_FLAGS, dir_fd=current)
            if current != dir_fd:
                os.close(current)
            current = following
    except BaseException:
        if current != dir_fd:
            os.close(current)
        raise
    return current


def identity(fd: int) -> tuple[int, int]:
    """(device, inode) of an open handle: the same folder or file, whatever path now leads to it."""
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def read_up_to(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = os.read(fd, left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_regular(fd: int, limit: int) -> bytes:
    """The bytes of the regular file open as `fd`, at most `limit`: NotRegularFile, FileTooLarge."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise NotRegularFile()
    if info.st_size > limit:
        raise FileTooLarge()
    data = read_up_to(fd, limit + 1)
    if len(data) > limit:  # grew since fstat
        raise FileTooLarge()
    return data
