"""Walk a repository: yield the text files an index may hold, and record what it refused and why.

Which paths are walked. The first rule that applies decides:

1. Junk folders (ALWAYS_SKIPPED_DIRS: ``.git``, ``.venv``, ``node_modules``, ...) are never entered,
   whatever any other rule says.
2. ``settings.ingest.reinclude`` (the operator's patterns, gitignore syntax, root-relative): a
   matching path is walked even when an ignore file or the secret deny-list excludes it. The
   content scan (cluster.secret_scan) still applies to what it brings in.
3. Ignore rules. First git's, lowest precedence first, as git applies them: the user's
   ``core.excludesFile``, then ``.git/info/exclude``, then every ``.gitignore`` (a deeper one
   overrides its parents). Then ``.samespaceignore`` files (same syntax, at the root and in
   subfolders), which have the last word over every git rule: a pattern keeps a path out of the
   index only, and ``!pattern`` re-includes a path git ignores. ``WalkSettings.extra_ignores`` come
   last of all. An ignored path is skipped silently: ignoring is normal, it is not recorded.
4. The secret deny-list (SECRET_DENY plus ``settings.ingest.extra_deny``): a matching file is never
   opened and a matching folder never entered; each is recorded as SkipReason.SECRET_FILE. A
   repository's own ``.samespaceignore`` cannot lift it (the repository is content, not
   configuration); only ``ingest.reinclude`` can.

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
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from pathspec import GitIgnoreSpec

from cluster.errors import ScanError
from cluster.skips import SkipLog, SkipReason

if TYPE_CHECKING:
    from cluster.settings import SamespaceSettings

DEFAULT_MAX_FILE_BYTES = 1_000_000
MAX_INVALID_UTF8_SHARE = 0.02  # more undecodable bytes than this share of the file: binary
MAX_IGNORE_FILE_BYTES = 1_000_000  # an ignore file or git config is read up to this size
GITIGNORE_NAME = ".gitignore"
SAMESPACEIGNORE_NAME = ".samespaceignore"
GIT_DIR_NAME = ".git"
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

# The secret deny-list: files and folders that hold credentials far more often than not. Gitignore
# syntax, matched against repository-relative paths (a pattern without "/" matches at any depth;
# "**/" anchors a two-part path anywhere). Extend it with settings.ingest.extra_deny; lift one entry
# for one path with settings.ingest.reinclude (for example ".env.example").
SECRET_DENY: tuple[str, ...] = (
    # environment files: .env, .env.local, .env.production, prod.env, direnv's .envrc
    ".env",
    ".env.*",
    "*.env",
    ".envrc",
    # SSH private keys (id_rsa, id_ed25519, id_work, deploy_rsa...), but not id_rsa.pub nor id_map.py
    "id_*",
    "!id_*.*",
    "*_rsa",
    "*_dsa",
    "*_ecdsa",
    "*_ed25519",
    # private keys, key stores and password databases
    "*.pem",
    "*.key",
    "*.p8",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.ppk",
    "*.keytab",
    "*.kdbx",
    # credential folders of common tools
    ".ssh/",
    ".aws/",
    ".gnupg/",
    ".azure/",
    "**/.config/gcloud/",
    "**/.docker/config.json",
    ".dockercfg",
    "**/.kube/config",
    # token and password files
    ".npmrc",
    ".pypirc",
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".htpasswd",
    ".pgpass",
    ".my.cnf",
    ".s3cfg",
    ".vault-token",
    "credentials.tfrc.json",
    # Terraform state holds every secret of the resources it manages
    "*.tfstate",
    "*.tfstate.*",
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


class DenyList:
    """The secret deny-list with its re-includes, for one repository-relative path at a time.

    A path is refused when it, or a folder above it, matches the deny-list and is not re-included,
    or when it lies in a ``.git`` folder. Used by the walker and, as defence in depth, by reads.
    """

    def __init__(self, deny: Sequence[str] = SECRET_DENY, reinclude: Sequence[str] = ()) -> None:
        self._deny = GitIgnoreSpec.from_lines(deny)
        self._could_deny = _any_positive(self._deny)
        self._reinclude = GitIgnoreSpec.from_lines(reinclude)
        self._has_reinclude = bool(reinclude)

    @staticmethod
    @cache
    def default() -> DenyList:
        return DenyList()

    def denies(self, rel_path: str) -> bool:
        """This one path ("a/b" for a file, "a/b/" for a folder) is denied and not re-included."""
        if self._could_deny is not None and not self._could_deny.match(rel_path):
            return False  # the common case, decided by one regex instead of one per pattern
        return bool(self._deny.match_file(rel_path)) and not self.reincluded(rel_path)

    def reincluded(self, rel_path: str) -> bool:
        return self._has_reinclude and bool(self._reinclude.match_file(rel_path))

    def refuses(self, rel_path: str) -> bool:
        """The file at ``rel_path`` lies in ``.git`` or is denied, itself or through a folder above it."""
        parts = rel_path.split("/")
        for i, part in enumerate(parts[:-1]):
            if part == GIT_DIR_NAME or self.denies("/".join(parts[: i + 1]) + "/"):
                return True
        return parts[-1] == GIT_DIR_NAME or self.denies(rel_path)


def _any_positive(spec: GitIgnoreSpec) -> re.Pattern[str] | None:
    """One regex matching whatever any non-negated pattern of ``spec`` matches: a fast pre-check.

    Built from pathspec's compiled patterns; None (no pre-check) if they cannot be combined.
    """
    anywhere = "^(?:.+/)?"  # how pathspec starts a pattern that matches at any depth
    floating: list[str] = []
    anchored: list[str] = []
    for pattern in spec.patterns:
        regex = getattr(pattern, "regex", None)
        if not getattr(pattern, "include", None) or regex is None:
            continue
        text = re.sub(r"\(\?P<[A-Za-z_][A-Za-z0-9_]*>", "(?:", regex.pattern)  # names repeat across patterns
        if text.startswith(anywhere):
            floating.append("(?:" + text[len(anywhere) :] + ")")
        else:
            anchored.append("(?:" + text + ")")
    if floating:
        anchored.append(anywhere + "(?:" + "|".join(floating) + ")")
    try:
        return re.compile("|".join(anchored)) if anchored else re.compile(r"(?!)")
    except (re.error, TypeError):
        return None


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
        data = _read_up_to(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # grew since fstat
        raise _TooLarge()
    return data


def _read_up_to(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = os.read(fd, left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


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
                _load_rules(_excludes_file(real_root, settings), "", in_tree=False),
                _load_rules(_info_exclude(real_root), "", in_tree=False),
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
    text = _read_small_text(path, follow_symlinks=not in_tree)
    if text is None:
        return None
    return _IgnoreRules(base=base, spec=GitIgnoreSpec.from_lines(text.splitlines()))


def _read_small_text(path: Path, *, follow_symlinks: bool) -> str | None:
    """A small config or ignore file as text, or None when it is missing, unreadable or not a file."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = _read_up_to(fd, MAX_IGNORE_FILE_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")


# ---------------------------------------------------------------------------------------------
# git's own files: .git/info/exclude and core.excludesFile


def _git_common_dir(real_root: Path) -> Path | None:
    """The repository's git folder holding info/ and config: .git itself, or where a .git file
    (a worktree or submodule) points, following its commondir."""
    dot_git = real_root / GIT_DIR_NAME
    if dot_git.is_dir():
        git_dir = dot_git
    else:
        text = _read_small_text(dot_git, follow_symlinks=False)
        if text is None or not text.startswith("gitdir:"):
            return None
        git_dir = (real_root / text[len("gitdir:") :].strip()).resolve()
    common = _read_small_text(git_dir / "commondir", follow_symlinks=False)
    if common is not None and common.strip():
        return (git_dir / common.strip()).resolve()
    return git_dir


def _info_exclude(real_root: Path) -> Path | None:
    common = _git_common_dir(real_root)
    return None if common is None else common / "info" / "exclude"


def _excludes_file(real_root: Path, settings: WalkSettings) -> Path | None:
    """core.excludesFile from the repository config, else ~/.gitconfig, else $XDG_CONFIG_HOME/git/config;
    git's default ($XDG_CONFIG_HOME/git/ignore, or ~/.config/git/ignore) when none sets it.

    The system config and ``[include]`` directives are not read.
    """
    xdg = settings.xdg_config_home or (settings.home / ".config" if settings.home else None)
    configs: list[Path] = []
    common = _git_common_dir(real_root)
    if common is not None:
        configs.append(common / "config")
    if settings.home is not None:
        configs.append(settings.home / ".gitconfig")
    if xdg is not None:
        configs.append(xdg / "git" / "config")
    for config in configs:
        text = _read_small_text(config, follow_symlinks=True)
        value = None if text is None else git_config_value(text, "core", "excludesfile")
        if value is not None:
            return _expand_git_path(value, real_root, settings.home)
    return None if xdg is None else xdg / "git" / "ignore"


def _expand_git_path(value: str, real_root: Path, home: Path | None) -> Path | None:
    if not value:
        return None  # an empty value turns the file off
    if value == "~" or value.startswith("~/"):
        return None if home is None else home / value[2:]
    if value.startswith("~"):
        return None  # ~user/ is not resolved
    path = Path(value)
    return path if path.is_absolute() else real_root / path


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
