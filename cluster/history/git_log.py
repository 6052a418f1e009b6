"""A folder's first-parent history as git tells it: commits, their files and their hunks.

Everything goes through the hardened git of `cluster.ingest.git_state.SafeGit` (no hooks, filters,
external diff or textconv; no lock taken; the checked `.git` only). The repository is content, not
configuration, so nothing here trusts what it could set: the diff's prefixes, colour, renames and
context are given on the command line; each commit's header in the patch stream is a line made with
a random nonce no commit can contain; commit objects are read raw (`cat-file --batch`), their sizes
framing them, so a message cannot forge another commit. Paths are relative to the folder (a subfolder
of a monorepo sees only its own commits and files). A merge counts on its first parent.
"""

from __future__ import annotations

import codecs
import re
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from cluster.ingest import SafeGit

__all__ = [
    "CommitDiff",
    "FileDiff",
    "Hunk",
    "RawCommit",
    "commit_diffs",
    "diff_between",
    "on_line",
    "read_blobs",
    "read_commits",
]

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_AUTHOR = re.compile(rb"^(.*?) <([^>]*)> (\d+) ([+-]\d{4})$")
LOG_TIMEOUT_S = 600.0  # one `git log -p` over a first build's commits
# What a patch looks like is set here, whatever the repository's config says (prefixes, colour, renames).
_PATCH_OPTIONS = (
    "-U0",
    "-M",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--relative",
    "--ignore-submodules=all",
)


@dataclass(frozen=True)
class Hunk:
    """One changed region: `old_count` lines at `old_start` became `new_count` lines at `new_start`.
    A count of 0 is an insertion (deletion) after line `old_start` (`new_start`)."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int


@dataclass
class FileDiff:
    """One file of a commit's diff against its first parent. `status`: A added, D deleted, M modified,
    R renamed (or moved; `previous_path` its path in the parent)."""

    path: str
    previous_path: str | None
    status: str
    hunks: list[Hunk] = field(default_factory=list)
    binary: bool = False
    texts: list[list[str]] = field(default_factory=list)  # each hunk's -/+ lines, when asked for (diff_between)


@dataclass(frozen=True)
class CommitDiff:
    sha: str
    files: tuple[FileDiff, ...]


@dataclass(frozen=True)
class RawCommit:
    """A commit object's header and message (decoded; undecodable bytes replaced)."""

    sha: str
    parents: tuple[str, ...]
    author: str
    email: str
    authored_at: int
    committed_at: int
    message: str


def commit_diffs(git: SafeGit, head: str, stop: str | None = None, limit: int | None = None) -> list[CommitDiff]:
    """The first-parent commits of `head` that touch the folder, newest first, down to (not including)
    `stop` and at most `limit` of them, each with its files and hunks against its first parent."""
    nonce = b"samespace-commit-" + secrets.token_hex(16).encode() + b" "
    args = ["log", "--first-parent", "--diff-merges=first-parent", "-p", *_PATCH_OPTIONS]
    args.append(f"--format=format:{nonce.decode()}%H")
    if limit is not None:
        args.append(f"--max-count={limit}")
    args += ["--end-of-options", head]
    if stop is not None:
        args.append(f"^{stop}")
    done = git.run(*args, "--", ".", timeout=LOG_TIMEOUT_S)
    return list(_parse_log(done.stdout, nonce))


def diff_between(git: SafeGit, base: str, head: str) -> list[FileDiff]:
    """The files that differ from `base` to `head` in the folder, each with its hunks and their lines."""
    done = git.run("diff", *_PATCH_OPTIONS, "--end-of-options", base, head, "--", ".", timeout=LOG_TIMEOUT_S)
    nonce = b"samespace-compare-" + secrets.token_hex(16).encode() + b" "
    parsed = list(_parse_log(nonce + head.encode() + b"\n" + done.stdout, nonce, keep_text=True))
    return list(parsed[0].files) if parsed else []


def on_line(git: SafeGit, commit: str, head: str) -> bool:
    """True when `commit` is an ancestor of `head` (or is it): a history mined down from it still holds."""
    done = git.run("merge-base", "--is-ancestor", "--end-of-options", commit, head, check=False)
    return done.returncode == 0


def read_commits(git: SafeGit, shas: Sequence[str]) -> dict[str, RawCommit]:
    """The commit objects `shas`, read raw (`cat-file --batch`)."""
    out: dict[str, RawCommit] = {}
    for sha, data in zip(shas, read_blobs(git, shas), strict=True):
        if data is not None:
            out[sha] = _parse_commit(sha, data)
    return out


def read_blobs(git: SafeGit, names: Sequence[str], batch: int = 2000) -> list[bytes | None]:
    """Objects by name (`sha`, `commit:path`) through `cat-file --batch`, in order; None for a name
    git does not find, or one that cannot be asked for (a newline in it)."""
    found: list[bytes | None] = []
    for start in range(0, len(names), batch):
        part = names[start : start + batch]
        asked = [name for name in part if "\n" not in name]
        done = git.run("cat-file", "--batch", stdin="".join(f"{name}\n" for name in asked).encode())
        read = iter(_batch_objects(done.stdout, len(asked)))
        found.extend(None if "\n" in name else next(read) for name in part)
    return found


# ---- parsing ------------------------------------------------------------------------------------


def _batch_objects(out: bytes, count: int) -> Iterator[bytes | None]:
    at = 0
    for _ in range(count):
        header_end = out.index(b"\n", at)
        header = out[at:header_end].split()
        if len(header) != 3:  # "<name> missing" / "ambiguous"
            at = header_end + 1
            yield None
            continue
        size = int(header[2])
        yield out[header_end + 1 : header_end + 1 + size]
        at = header_end + 1 + size + 1


def _parse_commit(sha: str, data: bytes) -> RawCommit:
    head, _, message = data.partition(b"\n\n")
    parents: list[str] = []
    author, email, authored, committed = "", "", 0, 0
    for line in head.split(b"\n"):
        key, _, value = line.partition(b" ")
        if key == b"parent":
            parents.append(value.decode("ascii", errors="replace"))
        elif key in (b"author", b"committer"):
            matched = _AUTHOR.match(value)
            if matched is None:
                continue
            when = int(matched.group(3))
            if key == b"author":
                author = matched.group(1).decode(errors="replace")
                email = matched.group(2).decode(errors="replace")
                authored = when
            else:
                committed = when
    return RawCommit(
        sha, tuple(parents), author, email, authored, committed or authored, message.decode(errors="replace")
    )


def _parse_log(out: bytes, nonce: bytes, *, keep_text: bool = False) -> Iterator[CommitDiff]:
    sha: str | None = None
    files: list[FileDiff] = []
    draft: _Draft | None = None
    old_left = new_left = 0
    for line in out.split(b"\n"):
        if old_left or new_left:  # a hunk's own lines: never read as headers
            if line.startswith(b"-") and old_left:
                old_left -= 1
            elif line.startswith(b"+") and new_left:
                new_left -= 1
            else:
                continue
            if keep_text and draft is not None:
                draft.texts[-1].append(line.decode(errors="replace"))
            continue
        if line.startswith(nonce):
            if draft is not None:
                files.append(draft.done())
                draft = None
            if sha is not None:
                yield CommitDiff(sha, tuple(files))
            sha, files = line[len(nonce) :].decode("ascii", errors="replace").strip(), []
        elif line.startswith(b"diff --git "):
            if draft is not None:
                files.append(draft.done())
            draft = _Draft(line[len(b"diff --git ") :])
        elif draft is None:
            continue
        elif line.startswith(b"@@ "):
            matched = _HUNK.match(line)
            if matched is not None:
                hunk = Hunk(
                    int(matched.group(1)),
                    _count(matched.group(2)),
                    int(matched.group(3)),
                    _count(matched.group(4)),
                )
                draft.hunks.append(hunk)
                draft.texts.append([])
                old_left, new_left = hunk.old_count, hunk.new_count
        else:
            draft.header(line)
    if draft is not None:
        files.append(draft.done())
    if sha is not None:
        yield CommitDiff(sha, tuple(files))


def _count(group: bytes | None) -> int:
    return 1 if group is None else int(group)


class _Draft:
    """A file section of a patch being read: its header lines, then its hunks."""

    def __init__(self, git_line: bytes) -> None:
        self.git_line = git_line
        self.old: str | None = None
        self.new: str | None = None
        self.status = "M"
        self.hunks: list[Hunk] = []
        self.texts: list[list[str]] = []
        self.binary = False
        self.seen_paths = False

    def header(self, line: bytes) -> None:
        if line.startswith(b"new file mode"):
            self.status = "A"
        elif line.startswith(b"deleted file mode"):
            self.status = "D"
        elif line.startswith(b"rename from "):
            self.status, self.old = "R", _unquote(line[len(b"rename from ") :])
        elif line.startswith(b"rename to "):
            self.new = _unquote(line[len(b"rename to ") :])
        elif line.startswith(b"--- "):
            self.old = _side(line[4:], "a/") or self.old
            self.seen_paths = True
        elif line.startswith(b"+++ "):
            self.new = _side(line[4:], "b/") or self.new
            self.seen_paths = True
        elif line.startswith(b"Binary files "):
            self.binary = True

    def done(self) -> FileDiff:
        old, new = self.old, self.new
        if old is None and new is None:  # a binary or mode-only change: the paths are on the git line
            old = new = _same_path(self.git_line)
        path = new if self.status != "D" else old
        previous = old if self.status in ("R", "M", "D") else None
        return FileDiff(path or "", previous, self.status, self.hunks, self.binary, self.texts)


def _side(raw: bytes, prefix: str) -> str | None:
    if raw.rstrip(b"\t") == b"/dev/null":
        return None
    path = _unquote(raw.rstrip(b"\t"))
    return path.removeprefix(prefix)


def _unquote(raw: bytes) -> str:
    """A path as git prints it: C-quoted ("a\\tb", octal escapes for other bytes) when it has to be."""
    if len(raw) >= 2 and raw.startswith(b'"') and raw.endswith(b'"'):
        raw = codecs.escape_decode(raw[1:-1])[0]
    return raw.decode(errors="surrogateescape")


def _same_path(git_line: bytes) -> str | None:
    """`a/X b/X` -> X (a path with both sides the same; anything else is not guessed)."""
    if len(git_line) < 6 or (len(git_line) - 5) % 2:
        return None
    half = (len(git_line) - 5) // 2
    old, new = git_line[2 : 2 + half], git_line[5 + half :]
    return old.decode(errors="surrogateescape") if old == new and git_line.startswith(b"a/") else None
