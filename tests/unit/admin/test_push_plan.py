"""What an admin push changes and where it is sent (DESIGN §8), decided without Ray or files;
and what a status route says of a role whose actor did not answer."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from cluster.admin.push_plan import (
    NO_CONTAINERS,
    ModelPush,
    OpenRouterPush,
    key_check_needed,
    merged,
    plan_push,
    plan_repush,
)
from cluster.admin.role_status import CallFailure, RoleStatus, role_answer, role_status
from cluster.config.store import PersistedConfig, PersistedRole
from cluster.roles import Policy, Role
from cluster.settings import SamespaceSettings

KEY = "sk-or-v1-" + "5e" * 24
FIXTURE_URL = "http://127.0.0.1:9/api/v1"
PUSHED_URL = "http://127.0.0.1:10/api/v1"
CONTAINERS = [("pc-OR-CodeEmbedding", Role.CODE_EMBEDDING), ("pc-OR-Reranker", Role.RERANKER)]


def settings() -> SamespaceSettings:
    return SamespaceSettings(
        cloud={
            "enabled": True,
            "base_url": FIXTURE_URL,
            "routes": {
                "code-embedding": {"model": "qwen/qwen3-embedding-4b", "upstream": "exact"},
                "reranker": {"model": "qwen/qwen3-reranker-8b"},
            },
        },
    )


def push(**fields: object) -> OpenRouterPush:
    return OpenRouterPush.model_validate(fields)


# --- refusing for want of a key --------------------------------------------------------------------


def test_a_push_without_a_key_before_any_was_pushed_needs_the_key_check() -> None:
    assert key_check_needed(push(policies={"code-embedding": "cloud"}), PersistedConfig())


def test_a_push_carrying_the_key_needs_no_key_check() -> None:
    assert not key_check_needed(push(api_key=KEY, policies={"code-embedding": "cloud"}), PersistedConfig())


def test_a_push_after_a_key_was_pushed_needs_no_key_check() -> None:
    assert not key_check_needed(push(policies={"code-embedding": "cloud"}), PersistedConfig(key_pushed=True))


def test_local_policies_alone_are_the_way_out_and_need_no_key_check() -> None:
    way_out = push(policies={"code-embedding": "local", "rlm": "local"})
    assert way_out.only_local_policies and not key_check_needed(way_out, PersistedConfig())
    assert key_check_needed(push(policies={"code-embedding": "local", "rlm": "cloud"}), PersistedConfig())
    assert key_check_needed(push(policies={"code-embedding": "local"}, base_url=PUSHED_URL), PersistedConfig())


# --- what is persisted ---------------------------------------------------------------------------------


def test_a_merged_push_keeps_what_it_does_not_name_and_never_the_key() -> None:
    stored = PersistedConfig(
        roles={Role.RERANKER: PersistedRole(model="old/reranker")},
        policies={Role.RLM: Policy.LOCAL},
        base_url=PUSHED_URL,
    )
    body = push(
        api_key=KEY,
        models={"code-embedding": {"model": "m", "provider": "pin", "dims": 8}},
        policies={"code-embedding": "backup"},
    )
    config = merged(stored, body, now=1234.5)
    assert config.roles == {
        Role.RERANKER: PersistedRole(model="old/reranker"),
        Role.CODE_EMBEDDING: PersistedRole(model="m", upstream="pin", dims=8),
    }
    assert config.policies == {Role.RLM: Policy.LOCAL, Role.CODE_EMBEDDING: Policy.BACKUP}
    assert config.base_url == PUSHED_URL
    assert (config.key_pushed, config.last_pushed_at) == (True, 1234.5)
    assert KEY not in config.model_dump_json()


def test_a_merged_push_without_a_key_keeps_the_time_of_the_last_one() -> None:
    stored = PersistedConfig(key_pushed=True, last_pushed_at=10.0)
    config = merged(stored, push(base_url=PUSHED_URL), now=99.0)
    assert (config.key_pushed, config.last_pushed_at, config.base_url) == (True, 10.0, PUSHED_URL)


def test_an_unpinned_embedding_model_is_refused_naming_the_field_without_echoing_the_key() -> None:
    with pytest.raises(ValidationError) as refused:
        push(api_key=KEY, models={"code-embedding": {"model": "m"}})
    assert "models.code-embedding.provider" in str(refused.value) and KEY not in str(refused.value)
    assert ModelPush(model="r").provider is None  # a reranker needs no pin


# --- what is sent where ---------------------------------------------------------------------------------


def test_a_policy_push_goes_to_its_role_only() -> None:
    body = push(policies={"code-embedding": "backup"})
    plan = plan_push(settings(), merged(PersistedConfig(), body, now=0.0), body)
    assert plan.policies == {Role.CODE_EMBEDDING: Policy.BACKUP}
    assert (plan.routes, plan.base_url, plan.sends_key, plan.needs_containers) == ({}, None, False, False)
    assert plan.pushed_to(CONTAINERS) == ["pc-OR-CodeEmbedding"]
    assert plan.missing_containers(0) == []  # a policy lands on the dispatchers without any container


def test_a_model_push_sends_the_route_in_force_and_needs_containers() -> None:
    body = push(models={"code-embedding": {"model": "new/model", "provider": "pin-b"}})
    plan = plan_push(settings(), merged(PersistedConfig(), body, now=0.0), body)
    route = plan.routes[Role.CODE_EMBEDDING]
    assert list(plan.routes) == [Role.CODE_EMBEDDING] and (route.model, route.upstream) == ("new/model", "pin-b")
    assert plan.policies == {} and plan.pushed_to(CONTAINERS) == ["pc-OR-CodeEmbedding"]
    assert plan.missing_containers(0) == [NO_CONTAINERS] and plan.missing_containers(2) == []


def test_a_key_or_a_base_url_goes_to_every_container() -> None:
    for body in (push(api_key=KEY), push(base_url=PUSHED_URL)):
        plan = plan_push(settings(), merged(PersistedConfig(), body, now=0.0), body)
        assert plan.pushed_to(CONTAINERS) == ["pc-OR-CodeEmbedding", "pc-OR-Reranker"]
        assert plan.needs_containers
    keyed = push(api_key=KEY)
    assert plan_push(settings(), merged(PersistedConfig(), keyed, now=0.0), keyed).sends_key
    url = push(base_url=PUSHED_URL)
    assert plan_push(settings(), merged(PersistedConfig(), url, now=0.0), url).base_url == PUSHED_URL


def test_the_plan_sends_the_policy_in_force_and_checks_against_the_store_over_the_settings() -> None:
    stored = PersistedConfig(policies={Role.RERANKER: Policy.CLOUD}, base_url=PUSHED_URL)
    body = push(policies={"reranker": "cloud"})
    plan = plan_push(settings(), stored, body)
    assert plan.policies == {Role.RERANKER: Policy.CLOUD}
    assert plan.effective.cloud.base_url == PUSHED_URL and plan.effective.policy(Role.RERANKER) is Policy.CLOUD
    assert plan.base_url is None  # the push did not name a base URL: the containers keep theirs


def test_a_repush_sends_every_role_and_the_base_url_but_never_a_key() -> None:
    plan = plan_repush(settings(), PersistedConfig(base_url=PUSHED_URL))
    assert set(plan.policies) == set(Role) and set(plan.routes) == {Role.CODE_EMBEDDING, Role.RERANKER}
    assert plan.base_url == PUSHED_URL and not plan.sends_key and not plan.needs_containers
    assert plan.pushed_to(CONTAINERS) == ["pc-OR-CodeEmbedding", "pc-OR-Reranker"]
    assert plan.missing_containers(0) == []


def test_the_plan_never_holds_the_key() -> None:
    body = push(api_key=SecretStr(KEY).get_secret_value())
    plan = plan_push(settings(), merged(PersistedConfig(), body, now=0.0), body)
    assert KEY not in repr(plan)


# --- a role whose actor did not answer -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "state", "restartable", "expected"),
    [
        (None, None, True, RoleStatus.OK),
        (None, "ALIVE", False, RoleStatus.OK),
        (CallFailure.UNREACHABLE, "RESTARTING", True, RoleStatus.RESTARTING),
        (CallFailure.DIED, "RESTARTING", True, RoleStatus.RESTARTING),
        (CallFailure.TIMED_OUT, "RESTARTING", True, RoleStatus.RESTARTING),  # its calls wait for the restart
        (CallFailure.TIMED_OUT, "PENDING_CREATION", True, RoleStatus.RESTARTING),  # started afresh
        (CallFailure.DIED, "DEAD", True, RoleStatus.UNAVAILABLE),  # killed for good
        (CallFailure.UNREACHABLE, "DEAD", True, RoleStatus.UNAVAILABLE),
        (CallFailure.DIED, "ALIVE", True, RoleStatus.RESTARTING),  # died, and is back already
        (CallFailure.TIMED_OUT, "ALIVE", True, RoleStatus.UNAVAILABLE),  # alive, not answering
        (CallFailure.UNREACHABLE, None, False, RoleStatus.RESTARTING),  # Ray: it may come back
        (CallFailure.DIED, None, True, RoleStatus.RESTARTING),  # max_restarts lets Ray restart it
        (CallFailure.DIED, None, False, RoleStatus.UNAVAILABLE),
        (CallFailure.TIMED_OUT, None, True, RoleStatus.UNAVAILABLE),
    ],
)
def test_a_call_outcome_and_the_actor_state_decide_the_role_status(
    failure: CallFailure | None, state: str | None, restartable: bool, expected: RoleStatus
) -> None:
    assert role_status(failure, state, restartable=restartable) is expected


def test_the_answer_names_the_actor_the_error_type_and_the_state() -> None:
    answer = role_answer(
        "samespace-dispatch-rlm", CallFailure.UNREACHABLE, "RESTARTING", error="ActorUnavailableError", restartable=True
    )
    assert answer.status is RoleStatus.RESTARTING
    assert answer.detail == (
        "samespace-dispatch-rlm did not answer (unreachable, ActorUnavailableError, state RESTARTING)"
    )
    assert role_answer("x", None, "ALIVE", error=None, restartable=True).detail is None
    unknown = role_answer("x", CallFailure.TIMED_OUT, None, error=None, restartable=True)
    assert (unknown.status, unknown.detail) == (RoleStatus.UNAVAILABLE, "x did not answer (timed-out)")
