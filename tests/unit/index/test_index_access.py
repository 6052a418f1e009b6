"""Who may read an index (`index.acl`, cluster/index/access.py): an exact name's entry wins, else the
most specific glob (most literal characters; a tie goes to the entry written first); an index no entry
matches is open to every reader; an unrestricted reader reads everything; an IndexNotFound raised for
a reader lists only what it may read."""

from __future__ import annotations

import pickle

import pytest

from cluster.auth import Principal, Reader, acting_as, current_reader
from cluster.errors import IndexNotFound, LimitExceeded
from cluster.index import ANONYMOUS_READER, UNRESTRICTED_READER, IndexAcl
from cluster.settings import LimitsSettings

LIMITS = LimitsSettings()


def reader(subject: str = "someone", *groups: str) -> Reader:
    return Reader(subject=subject, groups=frozenset(groups))


def test_an_exact_names_entry_wins_over_every_glob() -> None:
    acl = IndexAcl({"billing-api*": ["group:backend"], "billing-api": ["sub:alice"]}, LIMITS)
    assert acl.readers_of("billing-api") == {"sub:alice"}
    assert acl.may_read(reader("alice"), "billing-api")
    assert not acl.may_read(reader("bob", "backend"), "billing-api")
    assert acl.may_read(reader("bob", "backend"), "billing-api-v2")


@pytest.mark.parametrize(
    "acl",
    [
        {"*": ["group:all"], "bill*": ["group:finance"], "billing-*": ["group:payments"]},
        {"billing-*": ["group:payments"], "bill*": ["group:finance"], "*": ["group:all"]},
    ],
)
def test_the_glob_with_the_most_literal_characters_wins_whatever_the_order(acl: dict[str, list[str]]) -> None:
    rules = IndexAcl(acl, LIMITS)
    assert rules.readers_of("billing-eu") == {"group:payments"}
    assert rules.readers_of("billable") == {"group:finance"}
    assert rules.readers_of("web") == {"group:all"}
    assert rules.may_read(reader("x", "payments"), "billing-eu")
    assert not rules.may_read(reader("x", "finance"), "billing-eu")


def test_a_class_or_a_wildcard_is_not_a_literal_character() -> None:
    rules = IndexAcl({"[ab]pi*": ["group:classy"], "?pi-x": ["group:short"], "api*": ["group:api"]}, LIMITS)
    assert rules.readers_of("api-v1") == {"group:api"}  # 'api' (3) over 'pi' (2)
    assert rules.readers_of("api-x") == {"group:short"}  # 'pi-x' (4) over 'api' (3)
    assert rules.readers_of("bpi") == {"group:classy"}


@pytest.mark.parametrize(("first", "second"), [("a*", "*a"), ("*a", "a*")])
def test_a_tie_goes_to_the_entry_written_first(first: str, second: str) -> None:
    rules = IndexAcl({first: [f"sub:{first}"], second: [f"sub:{second}"]}, LIMITS)
    assert rules.readers_of("aa") == {f"sub:{first}"}


def test_an_index_no_entry_matches_is_open_to_every_reader() -> None:
    rules = IndexAcl({"billing*": ["group:payments"]}, LIMITS)
    assert rules.readers_of("web") is None
    assert rules.may_read(ANONYMOUS_READER, "web")
    assert not rules.may_read(ANONYMOUS_READER, "billing")
    empty = IndexAcl({}, LIMITS)
    assert empty.empty and not rules.empty
    assert empty.readable(ANONYMOUS_READER, ["b", "a"]) == ["b", "a"]


def test_a_reader_is_let_in_by_its_subject_or_any_of_its_groups_and_unrestricted_reads_everything() -> None:
    rules = IndexAcl({"billing": ["group:payments", "sub:alice"], "hr": []}, LIMITS)
    assert rules.may_read(reader("alice"), "billing")
    assert rules.may_read(reader("bob", "ops", "payments"), "billing")
    assert not rules.may_read(reader("bob", "ops"), "billing")
    assert not rules.may_read(reader("payments"), "billing")  # a subject is not a group
    assert not rules.may_read(reader("alice"), "hr")  # an entry with no reader: nobody but the unrestricted
    assert rules.may_read(UNRESTRICTED_READER, "hr")
    names = ["web", "billing", "hr", "api"]
    assert rules.readable(reader("bob", "payments"), names) == ["web", "billing", "api"]
    assert rules.filter_for(reader("bob"))(names) == ["web", "api"]


def test_the_request_caller_outside_any_request_reads_only_open_indexes() -> None:
    rules = IndexAcl({"billing": ["group:payments"]}, LIMITS)
    assert current_reader() == ANONYMOUS_READER
    assert rules.readable(current_reader(), ["billing", "web"]) == ["web"]
    payer = Principal(kind="oauth", subject="p", groups=frozenset({"payments"}), scopes=frozenset({"samespace:read"}))
    with acting_as(payer):
        assert rules.readable(current_reader(), ["billing", "web"]) == ["billing", "web"]
    admin = Principal(kind="oauth", subject="a", scopes=frozenset({"samespace:admin"}))
    with acting_as(admin):
        assert rules.may_read(current_reader(), "billing")


def test_hiding_lists_only_the_names_the_reader_may_read_and_lets_other_errors_through() -> None:
    rules = IndexAcl({"secret*": ["group:ops"]}, LIMITS)
    with pytest.raises(IndexNotFound) as hidden, rules.hiding(reader("bob")):
        raise IndexNotFound("nope", ["web", "secret-a", "api"])
    assert hidden.value.known == ["web", "api"]
    assert str(hidden.value) == "unknown repo 'nope'; indexed repos: api, web"
    assert pickle.loads(pickle.dumps(hidden.value)).known == ["web", "api"]  # it still crosses an actor
    with pytest.raises(IndexNotFound) as shown, rules.hiding(reader("ann", "ops")):
        raise IndexNotFound("nope", ["web", "secret-a"])
    assert shown.value.known == ["web", "secret-a"]
    with pytest.raises(ValueError, match="other"), rules.hiding(reader("bob")):
        raise ValueError("other")


def test_an_acl_glob_over_the_caps_is_refused_naming_the_setting() -> None:
    with pytest.raises(LimitExceeded, match=r"index\.acl pattern length.*limits\.max_glob_chars"):
        IndexAcl({"a" * 10 + "*": ["group:x"]}, LimitsSettings(max_glob_chars=8))
