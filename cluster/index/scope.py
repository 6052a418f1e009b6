"""Which indexes a tool reads: one by name, several by a glob ('api*'), a named group ('@backend',
configured in `index.groups`), or every index (None). Every pattern is checked against the `limits`
caps before any matching, and matched by `cluster.index.globs` (linear, no regex), so a hostile
`repo` argument costs at most names x `limits.max_glob_chars` steps.

Only the indexes the caller may read are in any scope (`readable`, `cluster.index.access`): a glob or a
group whose matches the caller may not read fails as one that matches nothing, and a name the caller
may not read fails as an unknown name, both listing only the names it may read."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from cluster.errors import IndexNotFound, LimitExceeded, SamespaceError
from cluster.index.globs import check_glob, compile_glob, is_glob
from cluster.settings import LimitsSettings, limit_name

__all__ = ["GROUP_PREFIX", "resolve_scope"]

GROUP_PREFIX = "@"


def resolve_scope(
    repo: str | None,
    list_names: Callable[[], Sequence[str]],
    groups: Mapping[str, Sequence[str]],
    limits: LimitsSettings,
    *,
    readable: Callable[[Sequence[str]], Sequence[str]],
) -> list[str]:
    """The index names `repo` stands for that `readable` keeps, in `list_names()` order. An exact name
    the reader may read is returned as it is, unlisted (an unknown one fails where it is read, naming
    the indexes); one it may not read fails here with the IndexNotFound an unknown name gets; a glob or
    group that matches nothing readable fails here. A scope over the caps fails with LimitExceeded,
    naming the setting, before anything is listed."""
    if repo is None:
        return list(readable(list_names()))
    check_glob(repo, limits)
    if repo.startswith(GROUP_PREFIX):
        group = repo[len(GROUP_PREFIX) :]
        if group not in groups:
            known = ", ".join(f"{GROUP_PREFIX}{g}" for g in sorted(groups)) or "none configured (index.groups)"
            raise SamespaceError(f"unknown group {repo!r}; groups: {known}")
        patterns = list(groups[group])
        if len(patterns) > limits.max_scope_patterns:
            raise LimitExceeded(
                f"names and globs in group {repo!r}",
                len(patterns),
                limits.max_scope_patterns,
                limit_name("max_scope_patterns"),
            )
    elif is_glob(repo):
        patterns = [repo]
    elif readable([repo]):
        return [repo]
    else:
        raise IndexNotFound(repo, list(readable(list_names())))
    globs = [compile_glob(pattern, limits) for pattern in patterns]
    names = readable(list_names())
    matched = [name for name in names if any(glob.matches(name) for glob in globs)]
    if not matched:
        raise IndexNotFound(repo, list(names))
    return matched
