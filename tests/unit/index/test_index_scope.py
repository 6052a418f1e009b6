"""Which indexes a tool reads: a name, a glob, a named group, or all of them; a scope over the `limits`
caps is refused, naming the setting, before any index is listed or matched."""

from __future__ import annotations

import pytest

from cluster.errors import IndexNotFound, LimitExceeded, SamespaceError
from cluster.index import resolve_scope
from cluster.settings import LimitsSettings

NAMES = ["api", "api.feature-x", "billing", "web"]
GROUPS = {"backend": ["api", "billing*"], "empty": ["nothing*"]}
LIMITS = LimitsSettings()


def names() -> list[str]:
    return NAMES


def test_a_scope_is_a_name_a_glob_a_group_or_everything() -> None:
    assert resolve_scope(None, names, GROUPS, LIMITS) == NAMES
    assert resolve_scope("web", names, GROUPS, LIMITS) == ["web"]
    assert resolve_scope("missing", names, GROUPS, LIMITS) == ["missing"]  # fails where it is read, naming the indexes
    assert resolve_scope("api*", names, GROUPS, LIMITS) == ["api", "api.feature-x"]
    assert resolve_scope("@backend", names, GROUPS, LIMITS) == ["api", "billing"]
    with pytest.raises(SamespaceError, match="unknown group '@frontend'; groups: @backend, @empty"):
        resolve_scope("@frontend", names, GROUPS, LIMITS)
    with pytest.raises(SamespaceError, match=r"none configured \(index.groups\)"):
        resolve_scope("@backend", names, {}, LIMITS)
    with pytest.raises(IndexNotFound, match="unknown repo 'zzz\\*'"):
        resolve_scope("zzz*", names, GROUPS, LIMITS)
    with pytest.raises(IndexNotFound):
        resolve_scope("@empty", names, GROUPS, LIMITS)


class CountingNames:
    def __init__(self) -> None:
        self.listed = 0

    def __call__(self) -> list[str]:
        self.listed += 1
        return NAMES


@pytest.mark.parametrize(
    ("repo", "groups", "setting"),
    [
        ("api" + "*" * 400_000, GROUPS, "max_glob_chars"),  # 400 KB: 0.6 s in fnmatch, in the index actor's one thread
        ("*a" * 17, GROUPS, "max_glob_wildcards"),
        ("@many", {"many": [f"n{i}" for i in range(65)]}, "max_scope_patterns"),
        ("@hostile", {"hostile": ["*a" * 17]}, "max_glob_wildcards"),  # a group's own globs meet the caps too
    ],
)
def test_a_scope_over_a_cap_is_refused_naming_the_setting_before_anything_is_listed(
    repo: str, groups: dict[str, list[str]], setting: str
) -> None:
    names = CountingNames()
    with pytest.raises(LimitExceeded, match=rf"limits\.{setting} \(SAMESPACE_LIMITS__{setting.upper()}\)"):
        resolve_scope(repo, names, groups, LIMITS)
    assert names.listed == 0


def test_the_caps_are_the_configured_ones() -> None:
    tight = LimitsSettings(max_glob_chars=4, max_glob_wildcards=1, max_scope_patterns=1)
    assert resolve_scope("ap*", names, GROUPS, tight) == ["api", "api.feature-x"]
    for repo in ("a**", "web.x", "@backend"):
        with pytest.raises(LimitExceeded):
            resolve_scope(repo, names, GROUPS, tight)
