"""Every (role, policy) pair's effective behaviour, table-driven (DESIGN §3)."""

from __future__ import annotations

import pytest

from cluster.naming import (
    chat_endpoint_name,
    dispatcher_actor_name,
    embedder_actor_name,
    is_provider_name,
    is_virtual_container_name,
    pc_name,
    virtual_container_name,
)
from cluster.roles import DEFAULT_POLICY, Behaviour, Policy, Role, effective_behaviour, fill_policies

A, B, L, C = Policy.AGGREGATE, Policy.BACKUP, Policy.LOCAL, Policy.CLOUD
#            joins_fan_out, allows_fallback, local_serves, cloud_may_serve
EXPECTED = {
    (Role.CODE_EMBEDDING, A): (True, False, True, True),
    (Role.CODE_EMBEDDING, B): (False, True, True, True),
    (Role.CODE_EMBEDDING, L): (False, False, True, False),
    (Role.CODE_EMBEDDING, C): (True, False, False, True),
    (Role.EMBEDDING, A): (True, False, True, True),
    (Role.EMBEDDING, B): (False, True, True, True),
    (Role.EMBEDDING, L): (False, False, True, False),
    (Role.EMBEDDING, C): (True, False, False, True),
    # single-call roles: aggregate acts as backup
    (Role.RERANKER, A): (False, True, True, True),
    (Role.RERANKER, B): (False, True, True, True),
    (Role.RERANKER, L): (False, False, True, False),
    (Role.RERANKER, C): (True, False, False, True),
    (Role.CODE_ASSISTANT, A): (False, True, True, True),
    (Role.CODE_ASSISTANT, B): (False, True, True, True),
    (Role.CODE_ASSISTANT, L): (False, False, True, False),
    (Role.CODE_ASSISTANT, C): (True, False, False, True),
    (Role.RLM, A): (False, True, True, True),
    (Role.RLM, B): (False, True, True, True),
    (Role.RLM, L): (False, False, True, False),
    (Role.RLM, C): (True, False, False, True),
}


def test_the_table_covers_every_role_and_policy_pair() -> None:
    assert set(EXPECTED) == {(role, policy) for role in Role for policy in Policy}


@pytest.mark.parametrize(("role", "policy"), sorted(EXPECTED, key=str))
def test_effective_behaviour_matches_the_spec(role: Role, policy: Policy) -> None:
    fan_out, fallback, local, cloud = EXPECTED[(role, policy)]
    got = effective_behaviour(role, policy)
    assert got == Behaviour(joins_fan_out=fan_out, allows_fallback=fallback, local_serves=local)
    assert got.cloud_may_serve is cloud


def test_a_missing_role_means_aggregate_never_off_or_local() -> None:
    filled = fill_policies({Role.RLM: Policy.LOCAL})
    assert set(filled) == set(Role) and filled[Role.RLM] is Policy.LOCAL
    assert all(filled[r] is DEFAULT_POLICY is Policy.AGGREGATE for r in Role if r is not Role.RLM)
    assert fill_policies(None) == dict.fromkeys(Role, Policy.AGGREGATE)


def test_only_the_embedding_roles_write_the_index_and_fan_out() -> None:
    assert (
        {r for r in Role if r.writes_index} == {r for r in Role if r.fans_out} == {Role.CODE_EMBEDDING, Role.EMBEDDING}
    )


@pytest.mark.parametrize(
    ("host", "role", "name"),
    [
        ("BASWS35.local", Role.CODE_EMBEDDING, "BASWS35-OR-CodeEmbedding"),
        ("gpu-node-1.LOCAL", Role.EMBEDDING, "gpu-node-1-OR-Embedding"),
        ("ws", Role.RERANKER, "ws-OR-Reranker"),
        ("ws.example.com", Role.CODE_ASSISTANT, "ws.example.com-OR-CodeAssistant"),
        ("ws", Role.RLM, "ws-OR-Rlm"),
    ],
)
def test_virtual_container_names_follow_pcname_or_role(host: str, role: Role, name: str) -> None:
    assert virtual_container_name(host, role) == name
    assert pc_name(host) + "-OR-" + role.label == name


def test_discovery_asks_every_provider_actor_and_no_other_named_actor() -> None:
    providers = [
        embedder_actor_name("0123456789", 0, "gpu"),
        embedder_actor_name(None, 0, "cpu"),
        embedder_actor_name(None, 0, "cpu", prefix="samespace-reranker"),
        chat_endpoint_name(Role.RLM, 0),
        virtual_container_name("ws.local", Role.CODE_EMBEDDING),
    ]
    assert all(is_provider_name(name) for name in providers)
    others = ["samespace-index", "samespace-budget", "samespace-fleet", dispatcher_actor_name(Role.RLM)]
    assert not any(is_provider_name(name) for name in others)
    assert [is_virtual_container_name(name) for name in providers] == [False, False, False, False, True]
