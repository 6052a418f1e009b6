"""Which indexes a tool reads: one by name, several by a glob ('api*'), a named group ('@backend',
configured in `index.groups`), or every index (None)."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping, Sequence

from cluster.errors import IndexNotFound, SamespaceError

__all__ = ["GROUP_PREFIX", "resolve_scope"]

GROUP_PREFIX = "@"
GLOB_CHARS = frozenset("*?[")


def resolve_scope(
    repo: str | None, list_names: Callable[[], Sequence[str]], groups: Mapping[str, Sequence[str]]
) -> list[str]:
    """The index names `repo` stands for, in `list_names()` order (listed only for a glob, a group or
    None: a search by name lists nothing). An exact name is returned as it is (an unknown one fails
    where it is read, naming the indexes); a glob or group that matches nothing fails here."""
    if repo is None:
        return list(list_names())
    if repo.startswith(GROUP_PREFIX):
        group = repo[len(GROUP_PREFIX) :]
        if group not in groups:
            known = ", ".join(f"{GROUP_PREFIX}{g}" for g in sorted(groups)) or "none configured (index.groups)"
            raise SamespaceError(f"unknown group {repo!r}; groups: {known}")
        patterns = list(groups[group])
    elif GLOB_CHARS & set(repo):
        patterns = [repo]
    else:
        return [repo]
    names = list_names()
    matched = [name for name in names if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)]
    if not matched:
        raise IndexNotFound(repo, list(names))
    return matched
