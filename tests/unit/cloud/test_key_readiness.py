"""A lost key, said once and clearly: which roles need it, and the one paragraph."""

from __future__ import annotations

import pytest

from cluster.cloud.key_readiness import NO_KEY_REASON, missing_key_message, role_keys, roles_missing_key, wait_for_key
from cluster.providers import NOT_ANSWERING, ProviderInfo, ProviderKind, ProviderView, provider_views
from cluster.roles import Policy, Role


def info(
    name: str, kind: ProviderKind, role: Role, *, eligible: bool = True, reason: str | None = None
) -> ProviderInfo:
    return ProviderInfo(
        name=name, kind=kind, roles=[role], node_id="n", host="h", model="m", eligible=eligible, reason=reason
    )


def local(role: Role, *, eligible: bool = True, reason: str | None = None) -> ProviderInfo:
    return info(f"samespace-embedder-{role.value}", ProviderKind.LOCAL, role, eligible=eligible, reason=reason)


def keyless(role: Role) -> ProviderInfo:
    return info(f"pc-OR-{role.label}", ProviderKind.CLOUD, role, eligible=False, reason=NO_KEY_REASON)


def keyed(role: Role) -> ProviderInfo:
    return info(f"pc-OR-{role.label}", ProviderKind.CLOUD, role)


def views(role: Role, policy: Policy, *providers: ProviderInfo) -> list[ProviderView]:
    return provider_views(role, policy, list(providers))


def test_a_cloud_policy_with_only_keyless_containers_names_the_role_and_both_ways_out() -> None:
    message = missing_key_message(
        {
            Role.CODE_EMBEDDING: views(
                Role.CODE_EMBEDDING, Policy.CLOUD, local(Role.CODE_EMBEDDING), keyless(Role.CODE_EMBEDDING)
            )
        }
    )
    assert message is not None
    assert "code-embedding (policy cloud) needs one" in message
    assert "`make push-key < key.txt`" in message
    assert "`make set-policy ROLE=code-embedding POLICY=local`" in message
    assert "\n" not in message and "Traceback" not in message  # one paragraph


def test_a_key_held_by_any_container_or_a_local_policy_means_nothing_is_missing() -> None:
    role = Role.CODE_EMBEDDING
    other_pc = info("other-OR-CodeEmbedding", ProviderKind.CLOUD, role, eligible=False, reason=NO_KEY_REASON)
    assert missing_key_message({role: views(role, Policy.CLOUD, keyed(role), other_pc)}) is None
    assert missing_key_message({role: views(role, Policy.LOCAL, keyless(role))}) is None


@pytest.mark.parametrize("policy", [Policy.AGGREGATE, Policy.BACKUP])
def test_aggregate_or_backup_need_the_key_only_when_no_local_provider_exists(policy: Policy) -> None:
    role = Role.RERANKER
    assert missing_key_message({role: views(role, policy, local(role), keyless(role))}) is None
    message = missing_key_message({role: views(role, policy, keyless(role))})
    assert message is not None and f"reranker (policy {policy.value}, no local provider) needs one" in message


def test_a_local_provider_still_loading_its_model_counts_as_local() -> None:
    role = Role.CODE_EMBEDDING
    loading = local(role, eligible=False, reason=f"{NOT_ANSWERING}: GetTimeoutError")
    assert missing_key_message({role: views(role, Policy.AGGREGATE, loading, keyless(role))}) is None


def test_a_container_that_did_not_answer_says_nothing_about_the_key() -> None:
    role = Role.CODE_EMBEDDING
    silent = info("pc-OR-CodeEmbedding", ProviderKind.CLOUD, role, eligible=False, reason=f"{NOT_ANSWERING}: X")
    state = role_keys(role, views(role, Policy.CLOUD, silent))
    assert state is not None and (state.keyed, state.keyless) == (0, 0)
    assert missing_key_message({role: views(role, Policy.CLOUD, silent)}) is None


def test_a_role_without_any_container_or_provider_is_not_a_key_problem() -> None:
    assert missing_key_message({Role.EMBEDDING: []}) is None
    assert missing_key_message({Role.EMBEDDING: views(Role.EMBEDDING, Policy.CLOUD, local(Role.EMBEDDING))}) is None


def test_several_roles_share_one_paragraph_in_role_order() -> None:
    message = missing_key_message(
        {
            Role.RERANKER: views(Role.RERANKER, Policy.AGGREGATE, keyless(Role.RERANKER)),
            Role.CODE_EMBEDDING: views(Role.CODE_EMBEDDING, Policy.CLOUD, keyless(Role.CODE_EMBEDDING)),
        }
    )
    assert message is not None
    assert "code-embedding (policy cloud) and reranker (policy aggregate, no local provider) need one" in message
    assert (
        "`make set-policy ROLE=code-embedding POLICY=local` and `make set-policy ROLE=reranker POLICY=local`"
    ) in message
    assert message.count("make push-key") == 1


def test_a_key_pushed_before_a_restart_is_said_to_be_forgotten_not_missing() -> None:
    role = Role.CODE_EMBEDDING
    before = missing_key_message({role: views(role, Policy.CLOUD, keyless(role))}, key_pushed_before=True)
    never = missing_key_message({role: views(role, Policy.CLOUD, keyless(role))})
    assert before is not None and "a restart forgets it" in before
    assert never is not None and "restart" not in never


def test_the_rlm_under_local_only_fallback_needs_the_key_only_under_the_cloud_policy() -> None:
    role = Role.RLM
    aggregate = {role: views(role, Policy.AGGREGATE, keyless(role))}
    assert missing_key_message(aggregate, local_only={role}) is None
    assert missing_key_message(aggregate) is not None
    assert missing_key_message({role: views(role, Policy.CLOUD, keyless(role))}, local_only={role}) is not None


def test_roles_missing_key_says_why_each_role_needs_it() -> None:
    states = [
        role_keys(Role.CODE_EMBEDDING, views(Role.CODE_EMBEDDING, Policy.CLOUD, keyless(Role.CODE_EMBEDDING))),
        role_keys(Role.RERANKER, views(Role.RERANKER, Policy.BACKUP, keyless(Role.RERANKER))),
    ]
    needs = roles_missing_key([s for s in states if s is not None])
    assert [(n.role, n.why) for n in needs] == [(Role.CODE_EMBEDDING, "cloud"), (Role.RERANKER, "no-local")]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_wait_for_key_without_a_wait_checks_once_and_returns_the_paragraph() -> None:
    clock, lines, checks = FakeClock(), [], []

    def check() -> str | None:
        checks.append(clock.now)
        return "missing"

    assert wait_for_key(check, wait_s=0, clock=clock, sleep=clock.sleep, emit=lines.append) == "missing"
    assert checks == [0.0] and clock.sleeps == [] and lines == []


def test_wait_for_key_says_it_waits_once_and_returns_none_when_the_key_arrives() -> None:
    clock, lines = FakeClock(), []

    def check() -> str | None:
        return None if clock.now >= 5 else "missing"

    assert wait_for_key(check, wait_s=30, clock=clock, sleep=clock.sleep, emit=lines.append, poll_s=2) is None
    assert clock.now == 6 and clock.sleeps == [2, 2, 2]
    assert len(lines) == 2 and "waiting up to 30 s" in lines[0] and "make push-key" in lines[0]


def test_wait_for_key_gives_up_at_the_deadline_with_the_last_paragraph() -> None:
    clock, lines = FakeClock(), []
    result = wait_for_key(
        lambda: "still missing", wait_s=5, clock=clock, sleep=clock.sleep, emit=lines.append, poll_s=2
    )
    assert result == "still missing"
    assert clock.now == 5 and clock.sleeps == [2, 2, 1]  # never past the deadline
    assert len(lines) == 1  # the paragraph itself is the caller's to print, once


def test_nothing_missing_means_no_wait_and_no_line() -> None:
    clock, lines = FakeClock(), []
    assert wait_for_key(lambda: None, wait_s=60, clock=clock, sleep=clock.sleep, emit=lines.append) is None
    assert clock.sleeps == [] and lines == []


def test_only_the_rlm_under_local_only_fallback_never_uses_its_cloud_reserve() -> None:
    from cluster.cloud.key_readiness import local_only_roles
    from cluster.settings import SamespaceSettings

    assert local_only_roles(SamespaceSettings(rlm={"fallback_mode": "local-only"})) == {Role.RLM}
    assert local_only_roles(SamespaceSettings(rlm={"fallback_mode": "local-first"})) == set()
