"""Which indexes a tool reads: a name, a glob, a named group, or all of them; a scope over the `limits`
caps is refused, naming the setting, before any index is listed or matched. Only the indexes the
reader may read are in any scope; one it may not read is answered as an unknown one."""

from __future__ import annotations

import pytest

from cluster.auth import Reader
from cluster.errors import IndexNotFound, LimitExceeded, SamespaceError
from cluster.index import IndexAcl, resolve_scope
from cluster.settings import LimitsSettings

NAMES = ["api", "api.feature-x", "billing", "web"]
GROUPS = {"backend": ["api", "billing*"], "empty": ["nothing*"]}
LIMITS = LimitsSettings()


def names() -> list[str]:
    return NAMES


def test_a_scope_is_a_name_a_glob_a_group_or_everything() -> None:
    assert resolve_scope(None, names, GROUPS, LIMITS, readable=list) == NAMES
    assert resolve_scope("web", names, GROUPS, LIMITS, readable=list) == ["web"]
    assert resolve_scope("missing", names, GROUPS, LIMITS, readable=list) == [
        "missing"
    ]  # fails where it is read, naming the indexes
    assert resolve_scope("api*", names, GROUPS, LIMITS, readable=list) == ["api", "api.feature-x"]
    assert resolve_scope("@backend", names, GROUPS, LIMITS, readable=list) == ["api", "billing"]
    with pytest.raises(SamespaceError, match="unknown group '@frontend'; groups: @backend, @empty"):
        resolve_scope("@frontend", names, GROUPS, LIMITS, readable=list)
    with pytest.raises(SamespaceError, match=r"none configured \(index.groups\)"):
        resolve_scope("@backend", names, {}, LIMITS, readable=list)
    with pytest.raises(IndexNotFound, match="unknown repo 'zzz\\*'"):
        resolve_scope("zzz*", names, GROUPS, LIMITS, readable=list)
    with pytest.raises(IndexNotFound):
        resolve_scope("@empty", names, GROUPS, LIMITS, readable=list)


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
        resolve_scope(repo, names, groups, LIMITS, readable=list)
    assert names.listed == 0


def test_the_caps_are_the_configured_ones() -> None:
    tight = LimitsSettings(max_glob_chars=4, max_glob_wildcards=1, max_scope_patterns=1)
    assert resolve_scope("ap*", names, GROUPS, tight, readable=list) == ["api", "api.feature-x"]
    for repo in ("a**", "web.x", "@backend"):
        with pytest.raises(LimitExceeded):
            resolve_scope(repo, names, GROUPS, tight, readable=list)


# Per-index access: the reader of group 'web' may read 'web' and the indexes no entry names; not 'billing'
# nor the 'api*' ones.
ACL = IndexAcl({"api*": ["group:backend"], "billing": ["sub:carol"], "web": ["group:web"]}, LIMITS)
WEB_READER = Reader(subject="dave", groups=frozenset({"web"}))
OPEN = ["api", "api.feature-x", "billing", "web", "notes"]


def open_names() -> list[str]:
    return OPEN


def scope_for(repo: str | None, reader: Reader, groups: dict[str, list[str]] = GROUPS) -> list[str]:
    return resolve_scope(repo, open_names, groups, LIMITS, readable=ACL.filter_for(reader))


def refusal(repo: str, reader: Reader, groups: dict[str, list[str]] = GROUPS) -> str:
    with pytest.raises(IndexNotFound) as raised:
        scope_for(repo, reader, groups)
    return str(raised.value)


def test_every_index_glob_and_group_hold_only_what_the_reader_may_read() -> None:
    assert scope_for(None, WEB_READER) == ["web", "notes"]
    assert scope_for("*", WEB_READER) == ["web", "notes"]
    assert scope_for("@mixed", WEB_READER, {"mixed": ["billing", "web"]}) == ["web"]
    everyone = Reader(subject="root", unrestricted=True)
    assert scope_for(None, everyone) == OPEN and scope_for("api*", everyone) == ["api", "api.feature-x"]


def test_a_glob_or_group_matching_only_unreadable_indexes_fails_as_one_matching_nothing() -> None:
    readable = "indexed repos: notes, web"
    assert refusal("api*", WEB_READER) == f"unknown repo 'api*'; {readable}"
    assert refusal("api*", WEB_READER).replace("api*", "zzz*") == refusal("zzz*", WEB_READER)
    assert refusal("@backend", WEB_READER) == refusal("@empty", WEB_READER).replace("@empty", "@backend")
    assert "billing" not in refusal("@backend", WEB_READER)


def test_a_name_the_reader_may_not_read_is_answered_as_an_unknown_name() -> None:
    assert refusal("billing", WEB_READER) == "unknown repo 'billing'; indexed repos: notes, web"
    # what an unknown name gets where it is read: the catalogue's IndexNotFound, hidden for the reader
    with pytest.raises(IndexNotFound) as unknown, ACL.hiding(WEB_READER):
        raise IndexNotFound("missing", OPEN)
    assert str(unknown.value).replace("missing", "billing") == refusal("billing", WEB_READER)
    carol = Reader(subject="carol")
    assert scope_for("billing", carol) == ["billing"]


def test_a_readable_name_is_not_listed() -> None:
    counted = CountingNames()
    assert resolve_scope("web", counted, GROUPS, LIMITS, readable=ACL.filter_for(WEB_READER)) == ["web"]
    assert resolve_scope("missing", counted, GROUPS, LIMITS, readable=ACL.filter_for(WEB_READER)) == ["missing"]
    assert counted.listed == 0
