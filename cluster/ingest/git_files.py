"""git's own files a walk honours: ``.git/info/exclude`` and ``core.excludesFile`` of a checked
repository (cluster.ingest.git_dir), and the small bounded file reads they (and the ignore files)
need. A tolerant git-config reader: no `git` subprocess, a garbled or missing file is simply absent.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cluster.ingest.git_dir import Repository
from cluster.ingest.nofollow import open_file, open_file_below, read_up_to

MAX_IGNORE_FILE_BYTES = 1_000_000  # an ignore file or git config is read up to this size
_FOLLOW_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def read_small_text(path: Path, *, follow_symlinks: bool) -> str | None:
    """A small config or ignore file as text, or None when it is missing, unreadable or not a file.
    Not following symlinks means none on any component of the path (cluster.ingest.nofollow)."""
    try:
        fd = (
            os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            if follow_symlinks
            else open_file(path)
        )
    except OSError:
        return None
    return _small_text(fd)


def read_small_text_below(dir_fd: int, relative: str) -> str | None:
    """`read_small_text` of the file `relative` below the folder handle `dir_fd`, no symlink followed."""
    try:
        fd = open_file_below(dir_fd, relative)
    except OSError:
        return None
    return _small_text(fd)


def _small_text(fd: int) -> str | None:
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = read_up_to(fd, MAX_IGNORE_FILE_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")


def info_exclude(repository: Repository | None) -> Path | None:
    return None if repository is None else repository.git_dir / "info" / "exclude"


def excludes_file(repository: Repository | None, home: Path | None, xdg_config_home: Path | None) -> Path | None:
    """core.excludesFile from the repository config, else ~/.gitconfig, else $XDG_CONFIG_HOME/git/config;
    git's default ($XDG_CONFIG_HOME/git/ignore, or ~/.config/git/ignore) when none sets it.

    The system config and ``[include]`` directives are not read.
    """
    xdg = xdg_config_home or (home / ".config" if home else None)
    configs: list[Path] = []
    if repository is not None:
        configs.append(repository.git_dir / "config")
    if home is not None:
        configs.append(home / ".gitconfig")
    if xdg is not None:
        configs.append(xdg / "git" / "config")
    for config in configs:
        text = read_small_text(config, follow_symlinks=True)
        value = None if text is None else git_config_value(text, "core", "excludesfile")
        if value is not None:
            return _expand_git_path(value, repository, home)
    return None if xdg is None else xdg / "git" / "ignore"


def _expand_git_path(value: str, repository: Repository | None, home: Path | None) -> Path | None:
    if not value:
        return None  # an empty value turns the file off
    if value == "~" or value.startswith("~/"):
        return None if home is None else home / value[2:]
    if value.startswith("~"):
        return None  # ~user/ is not resolved
    path = Path(value)
    if path.is_absolute():
        return path
    return None if repository is None else repository.work_tree / path  # git runs at the work tree's top


def git_config_value(text: str, section: str, key: str) -> str | None:
    """The last value of ``section.key`` (no subsection) in git-config text, or None.

    Tolerant: a line it cannot parse is skipped. Handles ``[section]`` headers (also followed by a
    key on the same line), case-insensitive names, quoted values, backslash escapes, ``#`` and
    ``;`` comments and continuation lines.
    """
    want_section, want_key = section.lower(), key.lower()
    current: str | None = None
    found: str | None = None
    lines = iter(text.splitlines())
    for raw in lines:
        line = raw.strip()
        if line.startswith("["):
            close = line.find("]")
            if close < 0:
                current = None
                continue
            header = line[1:close].strip()
            current = header.lower() if header.replace("-", "").replace(".", "").isalnum() else None
            line = line[close + 1 :].strip()
        if not line or line[0] in "#;" or current != want_section:
            continue
        name, eq, rest = line.partition("=")
        if name.strip().lower() != want_key:
            continue
        if not eq:
            found = "true"  # a bare key is a boolean true
            continue
        while _continues(rest):
            rest = rest[:-1] + next(lines, "")
        found = _config_value(rest)
    return found


def _continues(value: str) -> bool:
    """A line ending in an odd number of backslashes continues on the next line."""
    trailing = len(value) - len(value.rstrip("\\"))
    return trailing % 2 == 1


_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", "\\": "\\", '"': '"'}


def _config_value(raw: str) -> str:
    out: list[str] = []
    quoted = False
    pending_space = ""
    i = 0
    raw = raw.strip()
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw):
            out.append(pending_space + _ESCAPES.get(raw[i + 1], raw[i + 1]))
            pending_space = ""
            i += 2
            continue
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in "#;":
            break
        elif not quoted and ch in " \t":
            pending_space += ch  # kept only when more value follows
        else:
            out.append(pending_space + ch)
            pending_space = ""
        i += 1
    return "".join(out)
