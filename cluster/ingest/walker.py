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
   last of all. An ignored path is skipped silently: ignoring is normal, it is not recorded.
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
(git does the same since 2.32).

Files. Over ``max_file_bytes``: TOO_LARGE. A NUL byte, or more than MAX_INVALID_UTF8_SHARE of the
bytes not UTF-8: BINARY. Fewer bad bytes are decoded with U+FFFD in their place. A file or folder
that cannot be listed or read: UNREADABLE. Empty files and special files (FIFOs, sockets) are
skipped silently. A root that is missing, not a folder or cannot be listed raises ScanError, so an
unmounted root never looks like an empty repository.

Only paths are recorded, never contents.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from pathspec import GitIgnoreSpec

from cluster.errors import ScanError
from cluster.ingest.git_files import excludes_file, info_exclude, read_small_text, read_up_to
from cluster.ingest.secret_files import SECRET_DENY, DenyList
from cluster.ingest.skips import SkipLog, SkipReason

if TYPE_CHECKING:
    from cluster.settings import SamespaceSettings

DEFAULT_MAX_FILE_BYTES = 1_000_000
MAX_INVALID_UTF8_SHARE = 0.02  # more undecodable bytes than this share of the file: binary
GITIGNORE_NAME = ".gitignore"
SAMESPACEIGNORE_NAME = ".samespaceignore"
ALWAYS_SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "node_modules",
        "__pycache__",
        ".samespace",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
    }
)


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

    Raises ScanError at once (before the first file) when the root is missing, not a folder, or
    cannot be listed.
    """
    try:
        real_root = root.resolve(strict=True)
    except OSError as exc:
        raise ScanError(str(root), exc.strerror or "no such folder") from exc
    except RuntimeError as exc:  # Python 3.11 reports a symlink loop this way
        raise ScanError(str(root), "a symlink loop") from exc
    if not real_root.is_dir():
        raise ScanError(str(root), "not a folder")
    try:
        entries = _list_folder(real_root)
    except OSError as exc:
        raise ScanError(str(root), f"cannot list it ({exc.strerror or type(exc).__name__})") from exc
    policy = _Policy(real_root, settings)
    return _walk(policy, entries, settings, SkipLog() if skips is None else skips)


# ---------------------------------------------------------------------------------------------
# the walk


class _Decision(Enum):
    WALK = "walk"
    JUNK = "junk"  # ALWAYS_SKIPPED_DIRS
    IGNORED = "ignored"  # an ignore file or extra_ignores; not recorded
    DENIED = "denied"  # the secret deny-list; recorded as SECRET_FILE


def _walk(
    policy: _Policy, root_entries: list[os.DirEntry[str]], settings: WalkSettings, skips: SkipLog
) -> Iterator[SourceFile]:
    # Depth-first with an explicit stack, so a deeply nested tree cannot exhaust the recursion limit.
    stack: list[tuple[str, Iterator[tuple[os.DirEntry[str], bool]]]] = [("", _sorted(root_entries))]
    while stack:
        folder_rel, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            continue
        entry, is_dir = child
        rel = folder_rel + entry.name
        decision = policy.decide(entry.name, rel, is_dir, folder_rel)
        if decision is _Decision.DENIED:
            skips.add(SkipReason.SECRET_FILE, rel + "/" if is_dir else rel)
        elif decision is not _Decision.WALK:
            continue
        elif is_dir:
            try:
                entries = _list_folder(entry.path)
            except OSError:
                skips.add(SkipReason.UNREADABLE, rel + "/")
                continue
            stack.append((rel + "/", _sorted(entries)))
        else:
            source = _read_entry(policy, entry, rel, settings, skips)
            if source is not None:
                yield source


def _list_folder(path: Path | str) -> list[os.DirEntry[str]]:
    with os.scandir(path) as it:
        return list(it)


def _sorted(entries: list[os.DirEntry[str]]) -> Iterator[tuple[os.DirEntry[str], bool]]:
    typed = [(entry, _is_real_dir(entry)) for entry in entries]
    # Sort "name/" for folders so the output is in plain sorted order of full paths.
    typed.sort(key=lambda pair: pair[0].name + "/" if pair[1] else pair[0].name)
    return iter(typed)


def _is_real_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _read_entry(
    policy: _Policy, entry: os.DirEntry[str], rel: str, settings: WalkSettings, skips: SkipLog
) -> SourceFile | None:
    try:
        is_link = entry.is_symlink()
    except OSError:
        skips.add(SkipReason.UNREADABLE, rel)
        return None
    target: Path | str = entry.path
    if is_link:
        resolved = policy.symlink_target(Path(entry.path))
        if resolved is None:
            skips.add(SkipReason.SYMLINK, rel)
            return None
        target = resolved
    try:
        data = _read_regular(target, settings.max_file_bytes)
    except _TooLarge:
        skips.add(SkipReason.TOO_LARGE, rel)
        return None
    except _NotRegular:
        return None
    except OSError:
        skips.add(SkipReason.UNREADABLE, rel)
        return None
    if not data:
        return None
    text = decode_source(data)
    if text is None:
        skips.add(SkipReason.BINARY, rel)
        return None
    return SourceFile(path=rel, abs_path=Path(entry.path), text=text, size=len(data))


class _TooLarge(Exception):
    pass


class _NotRegular(Exception):
    pass


def _read_regular(path: Path | str, limit: int) -> bytes:
    """The bytes of a regular file, opened without following a final symlink and without blocking
    on a FIFO that replaced it since it was listed."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _NotRegular()
        if info.st_size > limit:
            raise _TooLarge()
        data = read_up_to(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # grew since fstat
        raise _TooLarge()
    return data


# ---------------------------------------------------------------------------------------------
# the rules


@dataclass(frozen=True)
class _IgnoreRules:
    """The patterns of one ignore file, which apply below its folder (``base``, '' or 'a/b/')."""

    base: str
    spec: GitIgnoreSpec

    def check(self, rel_path: str) -> bool | None:
        """True: ignored, False: re-included, None: no pattern of this file matches."""
        return self.spec.check_file(rel_path[len(self.base) :]).include


@dataclass(frozen=True)
class _FolderRules:
    git: tuple[_IgnoreRules, ...]  # excludesFile, info/exclude, then .gitignore files root first
    own: tuple[_IgnoreRules, ...]  # .samespaceignore files, root first


class _Policy:
    """Every rule of one walk; the rules of each folder are loaded once, when first needed."""

    def __init__(self, real_root: Path, settings: WalkSettings) -> None:
        self._root = real_root
        self._deny = settings.deny_list()
        self._extra = GitIgnoreSpec.from_lines(settings.extra_ignores)
        top = tuple(
            rules
            for rules in (
                _load_rules(excludes_file(real_root, settings.home, settings.xdg_config_home), "", in_tree=False),
                _load_rules(info_exclude(real_root), "", in_tree=False),
            )
            if rules is not None
        )
        self._folders: dict[str, _FolderRules] = {}
        self._top = _FolderRules(git=top, own=())

    def folder(self, folder_rel: str) -> _FolderRules:
        """The rules in force in a folder ('' for the root, else 'a/b/')."""
        found = self._folders.get(folder_rel)
        if found is not None:
            return found
        # Build the missing ancestors top-down (no recursion: trees can be deep).
        parts = folder_rel.rstrip("/").split("/") if folder_rel else []
        rules = self._folders.get("")
        if rules is None:
            rules = self._with_own_files(self._top, "")
            self._folders[""] = rules
        for i in range(len(parts)):
            rel = "/".join(parts[: i + 1]) + "/"
            cached = self._folders.get(rel)
            if cached is None:
                cached = self._with_own_files(rules, rel)
                self._folders[rel] = cached
            rules = cached
        return rules

    def _with_own_files(self, parent: _FolderRules, folder_rel: str) -> _FolderRules:
        folder = self._root / folder_rel
        gitignore = _load_rules(folder / GITIGNORE_NAME, folder_rel, in_tree=True)
        own = _load_rules(folder / SAMESPACEIGNORE_NAME, folder_rel, in_tree=True)
        return _FolderRules(
            git=parent.git if gitignore is None else (*parent.git, gitignore),
            own=parent.own if own is None else (*parent.own, own),
        )

    def decide(self, name: str, rel: str, is_dir: bool, folder_rel: str) -> _Decision:
        """Rules 1-4 of the module docstring for one entry of the folder ``folder_rel``."""
        if name in ALWAYS_SKIPPED_DIRS:
            return _Decision.JUNK
        path = rel + "/" if is_dir else rel
        if self._deny.reincluded(path):
            return _Decision.WALK
        if self._ignored(path, self.folder(folder_rel)):
            return _Decision.IGNORED
        if self._deny.denies(path):
            return _Decision.DENIED
        return _Decision.WALK

    def _ignored(self, path: str, rules: _FolderRules) -> bool:
        verdict = False
        for layer in (rules.git, rules.own):
            for rule in layer:
                result = rule.check(path)
                if result is not None:
                    verdict = result
        return verdict or bool(self._extra.match_file(path))

    def decide_path(self, rel: str) -> _Decision:
        """The decision for a file anywhere in the tree: each folder above it must be walked too."""
        parts = rel.split("/")
        folder_rel = ""
        for part in parts[:-1]:
            decision = self.decide(part, folder_rel + part, True, folder_rel)
            if decision is not _Decision.WALK:
                return decision
            folder_rel += part + "/"
        return self.decide(parts[-1], rel, False, folder_rel)

    def symlink_target(self, link: Path) -> Path | None:
        """Where a symlinked file leads, when it is a regular file the walk would index; else None."""
        try:
            target = link.resolve(strict=True)
        except (OSError, RuntimeError):  # dangling, a loop, or unreadable on the way
            return None
        if target == self._root or not target.is_relative_to(self._root):
            return None
        if self.decide_path(target.relative_to(self._root).as_posix()) is not _Decision.WALK:
            return None
        try:
            return target if stat.S_ISREG(target.lstat().st_mode) else None
        except OSError:
            return None


def _load_rules(path: Path | None, base: str, *, in_tree: bool) -> _IgnoreRules | None:
    if path is None:
        return None
    text = read_small_text(path, follow_symlinks=not in_tree)
    if text is None:
        return None
    return _IgnoreRules(base=base, spec=GitIgnoreSpec.from_lines(text.splitlines()))
