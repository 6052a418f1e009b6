"""Which paths a walk takes: rules 1-4 of cluster.ingest.walker's docstring (junk folders, the
operator's re-includes, ignore files, the secret deny-list), decided for one entry at a time.

Ignore files apply as git applies them, from the repository's top folder down: a walk of
``<repo>/sub`` honours ``.git/info/exclude`` and the ``.gitignore`` (and ``.samespaceignore``)
files of ``<repo>`` and of every folder down to ``sub``, each pattern anchored at its own folder;
when a folder on the way (or ``sub`` itself) is ignored, everything below it is. Ignore files
inside the root are read relative to the root's handle, no symlink followed on any component.
"""

from __future__ import annotations

import stat
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from pathspec import GitIgnoreSpec

from cluster.ingest.git_dir import Repository
from cluster.ingest.git_files import excludes_file, info_exclude, read_small_text, read_small_text_below
from cluster.ingest.secret_files import DenyList

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


class Decision(Enum):
    WALK = "walk"
    JUNK = "junk"  # ALWAYS_SKIPPED_DIRS
    IGNORED = "ignored"  # an ignore file or extra_ignores; not recorded
    DENIED = "denied"  # the secret deny-list; recorded as SECRET_FILE


@dataclass(frozen=True)
class _IgnoreRules:
    """The patterns of one ignore file, which apply below its folder (``base``: repository-relative,
    '' or 'a/b/')."""

    base: str
    spec: GitIgnoreSpec

    def check(self, repo_path: str) -> bool | None:
        """True: ignored, False: re-included, None: no pattern of this file matches."""
        return self.spec.check_file(repo_path[len(self.base) :]).include


@dataclass(frozen=True)
class _FolderRules:
    git: tuple[_IgnoreRules, ...]  # excludesFile, info/exclude, then .gitignore files top first
    own: tuple[_IgnoreRules, ...]  # .samespaceignore files, top first


class WalkPolicy:
    """Every rule of one walk; the rules of each folder are loaded once, when first needed.

    Paths given to it are relative to the walked root; ignore files are matched against paths
    relative to the repository's top folder (the root's `prefix` in front)."""

    def __init__(
        self,
        real_root: Path,
        root_fd: int,
        repository: Repository | None,
        *,
        deny: DenyList,
        extra_ignores: Sequence[str],
        home: Path | None,
        xdg_config_home: Path | None,
    ) -> None:
        prefix = "" if repository is None else repository.prefix(real_root)
        self._root = real_root
        self._root_fd = root_fd
        self._top = real_root if repository is None else repository.work_tree
        self._prefix = prefix
        self._deny = deny
        self._extra = GitIgnoreSpec.from_lines(extra_ignores)
        top = (
            _load_rules(read_small_text(path, follow_symlinks=True), "") if path is not None else None
            for path in (excludes_file(repository, home, xdg_config_home), info_exclude(repository))
        )
        self._folders: dict[str, _FolderRules] = {}
        self._outer = _FolderRules(git=tuple(rules for rules in top if rules is not None), own=())
        self._root_ignored = self._outer_folder_ignored()

    def decide(self, name: str, rel: str, is_dir: bool, folder_rel: str, folder_fd: int | None = None) -> Decision:
        """Rules 1-4 of the walker's docstring for one entry of the folder ``folder_rel`` (whose ignore
        files are read through ``folder_fd`` when the walk holds its handle, else from the root's)."""
        if name in ALWAYS_SKIPPED_DIRS:
            return Decision.JUNK
        path = rel + "/" if is_dir else rel
        if self._deny.reincluded(path):
            return Decision.WALK
        if self._root_ignored or self._ignored(path, self._rules_at(self._prefix + folder_rel, folder_fd)):
            return Decision.IGNORED
        if self._deny.denies(path):
            return Decision.DENIED
        return Decision.WALK

    def decide_path(self, rel: str) -> Decision:
        """The decision for a file anywhere in the tree: each folder above it must be walked too."""
        parts = rel.split("/")
        folder_rel = ""
        for part in parts[:-1]:
            decision = self.decide(part, folder_rel + part, True, folder_rel)
            if decision is not Decision.WALK:
                return decision
            folder_rel += part + "/"
        return self.decide(parts[-1], rel, False, folder_rel)

    def symlink_target(self, rel: str) -> str | None:
        """Where the symlinked file `rel` leads (root-relative), when it is a regular file the walk
        would index; else None."""
        try:
            target = (self._root / rel).resolve(strict=True)
        except (OSError, RuntimeError):  # dangling, a loop, or unreadable on the way
            return None
        if target == self._root or not target.is_relative_to(self._root):
            return None
        target_rel = target.relative_to(self._root).as_posix()
        if self.decide_path(target_rel) is not Decision.WALK:
            return None
        try:
            return target_rel if stat.S_ISREG(target.lstat().st_mode) else None
        except OSError:
            return None

    def _ignored(self, path: str, rules: _FolderRules) -> bool:
        return self._git_ignored(self._prefix + path, rules) or bool(self._extra.match_file(path))

    @staticmethod
    def _git_ignored(repo_path: str, rules: _FolderRules) -> bool:
        verdict = False
        for layer in (rules.git, rules.own):
            for rule in layer:
                result = rule.check(repo_path)
                if result is not None:
                    verdict = result
        return verdict

    def _outer_folder_ignored(self) -> bool:
        """Whether a folder from the repository's top down to the root (the root too) is ignored."""
        parts = self._prefix.rstrip("/").split("/") if self._prefix else []
        for i in range(len(parts)):
            parent = "".join(part + "/" for part in parts[:i])
            if self._git_ignored(parent + parts[i] + "/", self._rules_at(parent)):
                return True
        return False

    def _rules_at(self, repo_folder: str, folder_fd: int | None = None) -> _FolderRules:
        """The rules in force in a folder ('' for the repository's top, else 'a/b/'; `folder_fd`: its handle)."""
        missing: list[str] = []  # the folder and its ancestors not loaded yet, deepest first
        key: str | None = repo_folder
        while key is not None and key not in self._folders:
            missing.append(key)
            key = None if not key else key[: key.rstrip("/").rfind("/") + 1]
        rules = self._outer if key is None else self._folders[key]
        for folder in reversed(missing):  # top-down, no recursion: trees can be deep
            rules = self._with_own_files(rules, folder, folder_fd if folder == repo_folder else None)
            self._folders[folder] = rules
        return rules

    def _with_own_files(self, parent: _FolderRules, repo_folder: str, folder_fd: int | None = None) -> _FolderRules:
        if folder_fd is not None:
            read = [read_small_text_below(folder_fd, name) for name in (GITIGNORE_NAME, SAMESPACEIGNORE_NAME)]
        else:
            read = [self._read_in_tree(repo_folder + name) for name in (GITIGNORE_NAME, SAMESPACEIGNORE_NAME)]
        gitignore, own = (_load_rules(text, repo_folder) for text in read)
        return _FolderRules(
            git=parent.git if gitignore is None else (*parent.git, gitignore),
            own=parent.own if own is None else (*parent.own, own),
        )

    def _read_in_tree(self, repo_path: str) -> str | None:
        """An in-tree ignore file, never through a symlink: below the root by its handle, above it by path."""
        if repo_path.startswith(self._prefix):
            return read_small_text_below(self._root_fd, repo_path[len(self._prefix) :])
        return read_small_text(self._top / repo_path, follow_symlinks=False)


def _load_rules(text: str | None, base: str) -> _IgnoreRules | None:
    return None if text is None else _IgnoreRules(base=base, spec=GitIgnoreSpec.from_lines(text.splitlines()))
