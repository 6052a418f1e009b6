"""Who a caller is and what per-index access reads of them; the request's caller, fail closed outside one."""

from __future__ import annotations

import asyncio

from cluster.auth import (
    ANONYMOUS,
    AccessScope,
    Principal,
    acting_as,
    current_principal,
    current_reader,
    scope_for_tool,
)


def oauth(*scopes: AccessScope, groups: frozenset[str] = frozenset({"team-a"})) -> Principal:
    return Principal(kind="oauth", subject="alice", scopes=frozenset(s.value for s in scopes), groups=groups)


def test_only_the_shared_identities_and_admins_read_every_index() -> None:
    assert Principal.shared("local").reader().unrestricted
    assert Principal.shared("token").reader().unrestricted
    assert oauth(AccessScope.READ, AccessScope.ADMIN).reader().unrestricted
    reader = oauth(AccessScope.READ).reader()
    assert not reader.unrestricted and reader.subject == "alice" and reader.groups == {"team-a"}
    assert not ANONYMOUS.reader().unrestricted and not ANONYMOUS.scopes


def test_outside_a_request_the_caller_is_anonymous_and_restricted_even_when_set_explicitly() -> None:
    assert current_principal() is ANONYMOUS
    assert not current_reader().unrestricted
    with acting_as(ANONYMOUS):
        assert not current_reader().unrestricted


async def test_the_caller_reaches_the_tasks_a_request_starts_and_leaves_with_it() -> None:
    caller = oauth(AccessScope.READ)

    async def seen() -> str:
        return current_principal().subject

    with acting_as(caller):
        assert await asyncio.create_task(seen()) == "alice"
    assert await asyncio.create_task(seen()) == "anonymous"


def test_only_the_index_tools_need_the_index_scope() -> None:
    assert scope_for_tool("index_repository") is AccessScope.INDEX
    assert scope_for_tool("remove_index") is AccessScope.INDEX
    assert scope_for_tool("search_code") is AccessScope.READ
    assert scope_for_tool("no_such_tool") is AccessScope.READ
