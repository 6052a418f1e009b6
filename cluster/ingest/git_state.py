"""What git says about a repository folder, read without trusting the repository; a ref's tree
exported without touching the checkout.

A repository is content, not configuration: its `.git/config` may name programs that git would run
(`core.fsmonitor`, an external diff, hooks, the clean and smudge filters an in-tree `.gitattributes`
names). Every git call here turns those off on the command line (each filter driver the
repository's config defines is emptied, which makes git skip it), never takes the index lock
(`GIT_OPTIONAL_LOCKS=0`: `status` would otherwise refresh and rewrite the user's index), never
prompts, never fetches (`protocol.allow=never`), reads no `GIT_*` variable of the caller's, and
ignores submodules. A ref's tree is read object by object (`ls-tree` + `cat-file --batch`): blobs
as stored, no smudge filter, no attribute, no checkout, no worktree; symlinks and submodules are not
exported, nor a path that would leave the folder.

A repository is also a place: git follows pointers its content can plant (a `.git` file or
symlink, `commondir`, object alternates, symlinks in the git folder) to a repository elsewhere.
So git never discovers a repository itself: cluster.ingest.git_dir finds the folder's repository
and refuses one whose `.git` is not a real folder of its own, every command names that `.git` and
its work tree (`--git-dir`, `--work-tree`), a `.git` replaced since fails the command, and an
export whose git folder changed under it is deleted and refused.

A folder inside a checked work tree is a git source (a subfolder of a monorepo too: every path here
is relative to the folder, and every command is limited to it); anything else is a plain folder,
whose changes are seen through file modification times.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from cluster.errors import PathRefused, RefNotFound
from cluster.ingest.git_dir import GIT_DIR_RULE, check_git_dir, find_repository
from cluster.ingest.ignore_rules import ALWAYS_SKIPPED_DIRS
from cluster.types import Strict

GIT_TIMEOUT_S = 60.0
# Programs a repository's own config could make git run, and network access: all off.
GIT_SAFE_CONFIG = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.untrackedCache=false",
    "diff.external=",
    "protocol.allow=never",
)
REF_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./~^@{}+-]{0,199}$")
MAX_FOLDER_FILES = 200_000  # a plain folder's change signature stats at most this many files
EXPORT_BATCH_BYTES = 64 << 20  # blobs read per `cat-file --batch` call, at most


class SourceState(Strict):
    """Where a build's text came from: the commit, the branch, whether the tree had uncommitted changes."""

    vcs: Literal["git", "folder"] = Field(description="git: a folder inside a git work tree; folder: anything else.")
    commit: str | None = Field(default=None, description="The commit (HEAD, or the ref's commit for a ref build).")
    branch: str | None = Field(default=None, description="The branch checked out (or the ref, when it is a branch).")
    ref: str | None = Field(default=None, description="The ref a ref build was asked for; None: the working tree.")
    dirty: bool = Field(default=False, description="Uncommitted changes or untracked files in the folder then.")


class Staleness(Strict):
    """How far a build is behind its source now."""

    changed_files: int = Field(description="Files of the folder changed, added or deleted since the build.")
    commits_behind: int | None = Field(
        description="Commits on HEAD (or on the ref) since the build's commit; None for a plain folder."
    )
    commit_now: str | None = Field(description="The commit HEAD (or the ref) is at now.")


@dataclass(frozen=True)
class ExportSummary:
    files: int
    skipped: list[str]  # symlinks, submodules, unsafe paths, blobs over the size cap


def source_state(folder: Path, ref: str | None = None) -> SourceState:
    """The folder's source state now: HEAD, its branch and dirtiness, or the commit `ref` names."""
    git = SafeGit(folder)
    if not git.in_work_tree:
        if ref is not None:
            raise RefNotFound(str(folder), ref, "the folder is not inside a git work tree")
        return SourceState(vcs="folder")
    if ref is not None:
        commit = git.resolve(ref)
        is_branch = git.run("show-ref", "--verify", "-q", f"refs/heads/{ref}", check=False).returncode == 0
        return SourceState(vcs="git", commit=commit, branch=ref if is_branch else None, ref=ref)
    branch = git.text("symbolic-ref", "-q", "--short", "HEAD") or None
    head = git.text("rev-parse", "--verify", "-q", "HEAD^{commit}") or None
    return SourceState(vcs="git", commit=head, branch=branch, dirty=bool(git.status_entries()))


def remote_urls(folder: Path) -> list[str]:
    """The URLs of the folder's git remotes (none for a plain folder, nor for a repository whose `.git`
    points elsewhere: its remotes would be another repository's)."""
    try:
        git = SafeGit(folder)
    except PathRefused:
        return []
    if not git.in_work_tree:
        return []
    listed = git.run("config", "-z", "--get-regexp", r"^remote\..*\.url$", check=False)
    return [entry.split("\n", 1)[1] for entry in _text(listed).split("\0") if "\n" in entry]


def resolve_commit(folder: Path, ref: str) -> str:
    """The commit `ref` names (a branch, tag, commit or `main~2`); RefNotFound otherwise."""
    return SafeGit(folder).resolve(ref)


def change_signature(folder: Path) -> str:
    """A digest that changes whenever the folder's indexable content may have: for git, HEAD, the
    status entries and each listed file's size and mtime (editing a file that is already modified
    changes it too); for a plain folder, every file's path, size and mtime."""
    digest = hashlib.sha256()
    git = SafeGit(folder)
    if git.in_work_tree:
        digest.update(b"git\0" + git.text("rev-parse", "--verify", "-q", "HEAD").encode())
        assert git.repository is not None  # in a work tree
        top = git.repository.work_tree
        for entry in git.status_entries():
            digest.update(entry.encode(errors="surrogateescape") + b"\0" + _stat_line(top / entry[3:]))
    else:
        for relative, path in _folder_files(folder):
            digest.update(relative.encode(errors="surrogateescape") + b"\0" + _stat_line(path))
    return digest.hexdigest()


def staleness(folder: Path, built: SourceState, built_at: float) -> Staleness:
    """Files changed and commits made since a build of `folder` recorded `built` at `built_at`."""
    git = SafeGit(folder)
    if built.vcs != "git" or built.commit is None or not git.in_work_tree:
        changed = sum(1 for _, path in _folder_files(folder) if _mtime(path) > built_at)
        return Staleness(changed_files=changed, commits_behind=None, commit_now=None)
    if built.ref is not None:
        now_commit: str | None = git.resolve(built.ref)
    else:
        now_commit = git.text("rev-parse", "--verify", "-q", "HEAD^{commit}") or None
    behind = 0
    if now_commit is not None and now_commit != built.commit:
        counted = git.run("rev-list", "--count", f"{built.commit}..{now_commit}", check=False)
        behind = int(_text(counted) or 0) if counted.returncode == 0 else 0
    prefix = git.text("rev-parse", "--show-prefix")
    committed = set(_relative(git.names("diff", "--name-only", built.commit, now_commit or built.commit), prefix))
    if built.ref is not None:
        return Staleness(changed_files=len(committed), commits_behind=behind, commit_now=now_commit)
    working = set(_relative(git.names("diff", "--name-only", built.commit), prefix))
    working |= set(git.names("ls-files", "--others", "--exclude-standard"))
    if built.dirty:  # a file already dirty at the build counts only when it moved on since
        working = {path for path in working if path in committed or _mtime(folder / path) > built_at}
    return Staleness(changed_files=len(working | committed), commits_behind=behind, commit_now=now_commit)


def export_tree(folder: Path, commit: str, dest: Path, max_file_bytes: int) -> ExportSummary:
    """Write the files of `commit` under `folder` into the empty folder `dest`, from the object
    database alone. Symlinks, submodules, unsafe paths and blobs over `max_file_bytes` are skipped."""
    git = SafeGit(folder)
    listing = git.run("ls-tree", "-r", "-l", "-z", "--end-of-options", commit, timeout=GIT_TIMEOUT_S * 5)
    wanted: list[tuple[str, str, int]] = []  # (object id, relative path, size)
    skipped: list[str] = []
    for entry in listing.stdout.split(b"\0"):
        if not entry:
            continue
        meta, _, raw_path = entry.partition(b"\t")
        mode, kind, object_id, size = meta.split()
        path = raw_path.decode(errors="surrogateescape")
        if kind != b"blob" or mode not in (b"100644", b"100755") or not _safe_path(path) or int(size) > max_file_bytes:
            skipped.append(path)
        else:
            wanted.append((object_id.decode(), path, int(size)))
    written = 0
    for batch in _batches(wanted):
        for (_, path, _), data in zip(batch, git.blobs([object_id for object_id, _, _ in batch]), strict=True):
            target = dest.joinpath(*path.split("/"))
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "xb") as out:
                out.write(data)
            written += 1
    try:  # nothing in the git folder became a pointer elsewhere while it was read
        assert git.repository is not None  # git.run refused the folder otherwise
        check_git_dir(git.repository.git_dir, folder)
    except PathRefused:
        for exported in dest.iterdir():
            if exported.is_dir():
                shutil.rmtree(exported)
            else:
                exported.unlink()
        raise
    return ExportSummary(files=written, skipped=skipped)


# ---- git, hardened ---------------------------------------------------------------------------------


class SafeGit:
    """git in one folder of a checked repository (cluster.ingest.git_dir), with everything the
    repository could make it run turned off. Every command names the repository's own `.git` folder
    and work tree (`--git-dir`, `--work-tree`), so git never discovers, or follows a pointer to, a
    repository elsewhere; a `.git` replaced since it was checked fails the command. A folder in no
    repository runs no git at all. PathRefused (from find_repository) for a repository whose `.git`
    is not a real folder of its own."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._cwd = folder.resolve()
        self.repository = find_repository(self._cwd)
        self.in_work_tree = False
        if self.repository is None:
            return
        self._git_dir_identity = _identity(self.repository.git_dir)
        self._config = [f"--git-dir={self.repository.git_dir}", f"--work-tree={self.repository.work_tree}"]
        self._config += [arg for setting in GIT_SAFE_CONFIG for arg in ("-c", setting)]
        self._config += [arg for setting in self._filter_overrides() for arg in ("-c", setting)]
        done = self.run("rev-parse", "--is-inside-work-tree", check=False)
        self.in_work_tree = done.returncode == 0 and _text(done) == "true"

    def _filter_overrides(self) -> list[str]:
        """Every filter driver of the repository's config, emptied (git skips a driver with no command)."""
        keys = self.run("config", "--name-only", "-z", "--get-regexp", r"^filter\.", check=False)
        drivers = {key[len("filter.") : key.rfind(".")] for key in _text(keys).split("\0") if key.count(".") >= 2}
        return [
            f"filter.{driver}.{field}" + ("=false" if field == "required" else "=")
            for driver in sorted(drivers)
            for field in ("clean", "smudge", "process", "required")
        ]

    def run(
        self, *args: str, check: bool = True, stdin: bytes | None = None, timeout: float = GIT_TIMEOUT_S
    ) -> subprocess.CompletedProcess[bytes]:
        if self.repository is None:
            raise RefNotFound(str(self.folder), " ".join(args[:2]), "the folder is not inside a git work tree")
        self._same_git_dir()
        done = subprocess.run(
            ["git", *self._config, "-C", str(self._cwd), *args],
            input=stdin,
            capture_output=True,
            env=_git_env(),
            timeout=timeout,
            check=False,
        )
        self._same_git_dir()
        if check and done.returncode != 0:
            detail = done.stderr.decode(errors="replace").strip()[:300]
            raise RefNotFound(str(self.folder), " ".join(args[:2]), detail)
        return done

    def _same_git_dir(self) -> None:
        """PathRefused when the checked `.git` folder was replaced (by a symlink, say) since."""
        if self.repository is not None and _identity(self.repository.git_dir) != self._git_dir_identity:
            raise PathRefused(
                str(self.folder), f"{self.repository.git_dir} was replaced while git read it", GIT_DIR_RULE
            )

    def text(self, *args: str) -> str:
        return _text(self.run(*args, check=False))

    def resolve(self, ref: str) -> str:
        if not REF_PATTERN.fullmatch(ref) or ".." in ref:
            raise RefNotFound(
                str(self.folder), ref, "not a ref name (letters, digits and _ . / ~ ^ @ { } + -, no '..')"
            )
        done = self.run("rev-parse", "--verify", "-q", "--end-of-options", f"{ref}^{{commit}}", check=False)
        if done.returncode != 0 or not _text(done):
            raise RefNotFound(str(self.folder), ref, "git does not resolve it to a commit")
        return _text(done)

    def status_entries(self) -> list[str]:
        """`git status` entries of the folder ("XY path", root-relative), untracked files included."""
        done = self.run(
            "status",
            "--porcelain=v1",
            "-z",
            "--no-renames",
            "--untracked-files=all",
            "--ignore-submodules=all",
            "--",
            ".",
        )
        return [entry for entry in done.stdout.decode(errors="surrogateescape").split("\0") if entry]

    def names(self, *args: str) -> list[str]:
        """NUL-separated path output of a git command limited to the folder."""
        extra = ["--no-ext-diff", "--no-textconv", "--ignore-submodules=all"] if args[0] == "diff" else []
        done = self.run(args[0], "-z", *extra, *args[1:], "--", ".", check=False)
        return [name for name in done.stdout.decode(errors="surrogateescape").split("\0") if name]

    def blobs(self, object_ids: list[str]) -> list[bytes]:
        """The contents of blobs, in order, through one `cat-file --batch` call (no filter applied)."""
        done = self.run("cat-file", "--batch", stdin="".join(f"{oid}\n" for oid in object_ids).encode())
        out, at, blobs = done.stdout, 0, []
        for _ in object_ids:
            header_end = out.index(b"\n", at)
            size = int(out[at:header_end].split()[2])
            blobs.append(out[header_end + 1 : header_end + 1 + size])
            at = header_end + 1 + size + 1  # the content is followed by a newline
        return blobs


def _git_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(
        GIT_OPTIONAL_LOCKS="0",
        GIT_TERMINAL_PROMPT="0",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_NO_REPLACE_OBJECTS="1",
        LC_ALL="C",
    )
    return env


def _identity(path: Path) -> tuple[int, int, int] | None:
    """(device, inode, mode) of a path itself (a symlink is not followed); None when it is gone."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_mode


def _text(done: subprocess.CompletedProcess[bytes]) -> str:
    return done.stdout.decode(errors="replace").strip()


def _relative(paths: Sequence[str], prefix: str) -> list[str]:
    """Root-relative paths of git's output as paths relative to the folder (`prefix` is its own)."""
    return [path[len(prefix) :] for path in paths if path.startswith(prefix)]


def _batches(wanted: list[tuple[str, str, int]]) -> Iterator[list[tuple[str, str, int]]]:
    batch: list[tuple[str, str, int]] = []
    size = 0
    for item in wanted:
        if batch and size + item[2] > EXPORT_BATCH_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += item[2]
    if batch:
        yield batch


def _safe_path(path: str) -> bool:
    parts = path.split("/")
    return all(part not in ("", ".", "..") and part.lower() != ".git" for part in parts)


# ---- plain folders -------------------------------------------------------------------------------------


def _folder_files(folder: Path) -> Iterator[tuple[str, Path]]:
    """(relative path, path) of the folder's regular files, symlinks not followed, junk folders not
    entered, at most MAX_FOLDER_FILES."""
    count = 0
    for current, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in ALWAYS_SKIPPED_DIRS)
        for name in sorted(files):
            path = Path(current) / name
            yield os.path.relpath(path, folder), path
            count += 1
            if count >= MAX_FOLDER_FILES:
                return


def _stat_line(path: Path) -> bytes:
    try:
        info = path.lstat()
    except OSError:
        return b"gone"
    return f"{info.st_size}:{info.st_mtime_ns}".encode()


def _mtime(path: Path) -> float:
    try:
        return path.lstat().st_mtime
    except OSError:
        return float("inf")  # gone since: changed
