"""Which indexes a tool reads: a name, a glob, a named group, or all of them."""

from __future__ import annotations

import pytest

from cluster.errors import IndexNotFound, SamespaceError
from cluster.index import resolve_scope

NAMES = ["api", "api.feature-x", "billing", "web"]
GROUPS = {"backend": ["api", "billing*"], "empty": ["nothing*"]}


def names() -> list[str]:
    return NAMES


def test_a_scope_is_a_name_a_glob_a_group_or_everything() -> None:
    assert resolve_scope(None, names, GROUPS) == NAMES
    assert resolve_scope("web", names, GROUPS) == ["web"]
    assert resolve_scope("missing", names, GROUPS) == ["missing"]  # fails where it is read, naming the indexes
    assert resolve_scope("api*", names, GROUPS) == ["api", "api.feature-x"]
    assert resolve_scope("@backend", names, GROUPS) == ["api", "billing"]
    with pytest.raises(SamespaceError, match="unknown group '@frontend'; groups: @backend, @empty"):
        resolve_scope("@frontend", names, GROUPS)
    with pytest.raises(SamespaceError, match=r"none configured \(index.groups\)"):
        resolve_scope("@backend", names, {})
    with pytest.raises(IndexNotFound, match="unknown repo 'zzz\\*'"):
        resolve_scope("zzz*", names, GROUPS)
    with pytest.raises(IndexNotFound):
        resolve_scope("@empty", names, GROUPS)
