"""Which repository a folder belongs to, found as git finds it but trusted only when it is its own.

git follows pointers a folder's content can plant: a `.git` *file* (`gitdir: /elsewhere/.git`, which
is how linked worktrees and submodules are made), a `.git` symlink, a `commondir` file, object
alternates (`objects/info/alternates`, `objects/info/http-alternates`), and any symlink inside the
git folder (`objects/`, a pack, a ref). Any of them would let indexing a folder read a repository
elsewhere, so a folder is a git source only when the nearest `.git` walking up (not across a mount
point, as git stops there) is a real folder holding none of them; otherwise PathRefused, which says
why. Every git command then names that folder and its work tree explicitly
(cluster.ingest.git_state), so git does no discovery of its own.

A folder that is, or lies inside, a git folder (`.git`, or a bare repository) is never a source:
`.git/config` may hold a CI token.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cluster.errors import PathRefused
from cluster.ingest.secret_files import GIT_DIR_NAME

GIT_DIR_RULE = "the git folder rule: only a repository's own .git folder is read, never one it points to"
MAX_GIT_DIR_ENTRIES = 2_000_000  # entries of a git folder checked for symlinks, at most
BORROWED_OBJECTS = ("objects/info/alternates", "objects/info/http-alternates")


@dataclass(frozen=True)
class Repository:
    """A checked repository: its work tree's top folder and its `.git` folder, both real paths."""

    work_tree: Path
    git_dir: Path

    def prefix(self, folder: Path) -> str:
        """`folder` relative to the work tree, as git spells a prefix: '' at the top, else 'a/b/'."""
        relative = folder.relative_to(self.work_tree).as_posix()
        return "" if relative == "." else relative + "/"


def git_folder_of(folder: Path) -> Path | None:
    """The `.git` folder or bare repository that the real path `folder` is or lies inside, if any."""
    for candidate in (folder, *folder.parents):
        if candidate.name.lower() == GIT_DIR_NAME or _is_bare_repository(candidate):
            return candidate
    return None


def find_repository(folder: Path) -> Repository | None:
    """The checked repository whose work tree holds the real folder `folder`; None when there is none.

    PathRefused when the folder lies inside a git folder, or its repository's `.git` is not a real
    folder of its own (module docstring)."""
    inside = git_folder_of(folder)
    if inside is not None:
        raise PathRefused(str(folder), f"it is or lies inside a git folder ({inside})", GIT_DIR_RULE)
    top = repository_top(folder)
    if top is None:
        return None
    dot_git = top / GIT_DIR_NAME
    mode = os.lstat(dot_git).st_mode
    if stat.S_ISLNK(mode):
        raise PathRefused(str(folder), f"its repository's {dot_git} is a symlink", GIT_DIR_RULE)
    if not stat.S_ISDIR(mode):
        raise PathRefused(
            str(folder),
            f"its repository's {dot_git} is a file pointing to a git folder elsewhere (a worktree made "
            "by `git worktree add`, or a submodule): index the main checkout instead",
            GIT_DIR_RULE,
        )
    check_git_dir(dot_git, folder)
    return Repository(work_tree=top, git_dir=dot_git)


def repository_top(folder: Path) -> Path | None:
    """The nearest folder at or above the real folder `folder` that holds a `.git` entry of any kind,
    looked for as git looks: not across a mount point. None when there is none."""
    try:
        device = os.lstat(folder).st_dev
    except OSError:
        return None  # gone: a plain (empty) folder, as git would find no repository either
    for top in (folder, *folder.parents):
        try:
            if os.lstat(top).st_dev != device:
                return None  # a mount point: git does not look further up either
            os.lstat(top / GIT_DIR_NAME)
        except (FileNotFoundError, NotADirectoryError):
            continue
        return top
    return None


def check_git_dir(git_dir: Path, folder: Path) -> None:
    """PathRefused when the git folder points elsewhere: a commondir, borrowed objects, a symlink."""
    if _exists(git_dir / "commondir"):
        raise PathRefused(str(folder), f"{git_dir}/commondir points to another repository's git folder", GIT_DIR_RULE)
    for borrowed in BORROWED_OBJECTS:
        if _exists(git_dir / borrowed):
            raise PathRefused(
                str(folder),
                f"{git_dir} borrows objects from another repository ({borrowed}): run `git repack -a -d` "
                "and remove that file",
                GIT_DIR_RULE,
            )
    link = _first_symlink(git_dir, folder)
    if link is not None:
        raise PathRefused(str(folder), f"{link} is a symlink inside the git folder {git_dir}", GIT_DIR_RULE)


def _first_symlink(git_dir: Path, folder: Path) -> Path | None:
    """The first symlink found anywhere inside `git_dir` (never followed), or None."""
    stack, seen = [str(git_dir)], 0
    while stack:
        try:
            listing = os.scandir(stack.pop())
        except OSError as exc:
            raise PathRefused(str(folder), f"{git_dir} cannot be checked ({exc.strerror})", GIT_DIR_RULE) from None
        with listing as entries:
            for entry in entries:
                seen += 1
                if seen > MAX_GIT_DIR_ENTRIES:
                    raise PathRefused(
                        str(folder),
                        f"{git_dir} holds over {MAX_GIT_DIR_ENTRIES} entries to check: pack it (`git gc`)",
                        GIT_DIR_RULE,
                    )
                if entry.is_symlink():
                    return Path(entry.path)
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return None


def _exists(path: Path) -> bool:
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    return True


def _is_bare_repository(path: Path) -> bool:
    """git's own test of a git folder: a HEAD file, an objects folder and a refs folder."""
    try:
        return (
            stat.S_ISREG(os.lstat(path / "HEAD").st_mode)
            and stat.S_ISDIR(os.lstat(path / "objects").st_mode)
            and stat.S_ISDIR(os.lstat(path / "refs").st_mode)
        )
    except OSError:
        return False
