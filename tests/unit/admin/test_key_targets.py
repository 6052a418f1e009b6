"""Where a pushed key goes (DESIGN §8): every virtual container, in the cluster and on the sidecars that
host them, or those the push's `targets` name (a container's name, a sidecar's agent URL or hostname);
a target matching nothing refuses the push naming the field, never the value; a key a sidecar's
container holds counts for the no-key check."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from cluster.admin import KeyTargets, any_key_held, key_targets
from cluster.admin.push_plan import OpenRouterPush, plan_push
from cluster.cloud.state import ContainerState
from cluster.config.store import PersistedConfig
from cluster.errors import ConfigError
from cluster.fleet import VirtualContainerView, VirtualHost
from cluster.roles import Policy, Role
from cluster.settings import RoleRoute, SamespaceSettings

KEY = "sk-or-v1-" + "7a" * 24
IN_CLUSTER = ["head-OR-CodeEmbedding", "head-OR-Reranker"]


def host(agent: str, url: str, hostname: str | None, *views: tuple[str, str, bool]) -> VirtualHost:
    containers = [
        VirtualContainerView(name=name, own_name=own, role=Role.CODE_EMBEDDING, key_held=held)
        for name, own, held in views
    ]
    return VirtualHost(agent_id=agent, agent_url=url, hostname=hostname, containers=containers)


WS7 = host("a7", "http://ws-7:8098", "ws-7.local", ("ws-7-OR-CodeEmbedding", "ws-7-OR-CodeEmbedding", False))
WS8 = host(
    "a8",
    "http://ws-8:8098",
    "ws-8",
    ("ws-8-OR-CodeEmbedding", "ws8-or-code", False),
    ("ws-8-OR-Reranker", "ws-8-OR-Reranker", False),
)


def test_without_targets_the_key_goes_to_every_container_and_every_sidecar_whole() -> None:
    everything = key_targets(None, IN_CLUSTER, [WS7, WS8])
    assert everything == KeyTargets(in_cluster=None, sidecars={"a7": None, "a8": None})
    assert everything.takes("head-OR-Reranker")


@pytest.mark.parametrize(
    ("targets", "in_cluster", "sidecars"),
    [
        (["head-OR-Reranker"], {"head-OR-Reranker"}, {}),
        (["ws-8-OR-CodeEmbedding"], set(), {"a8": ["ws8-or-code"]}),  # the master's name → the sidecar's own
        (["ws8-or-code", "ws-8-OR-Reranker"], set(), {"a8": ["ws-8-OR-Reranker", "ws8-or-code"]}),
        (["HTTP://WS-7:8098/"], set(), {"a7": None}),  # an agent URL in any spelling: all its containers
        (["ws-7"], set(), {"a7": None}),  # its hostname, without `.local`
        (
            ["WS-7.local", "ws-8-OR-Reranker", "head-OR-CodeEmbedding"],
            {"head-OR-CodeEmbedding"},
            {
                "a7": None,
                "a8": ["ws-8-OR-Reranker"],
            },
        ),
    ],
)
def test_targets_narrow_both_the_cluster_and_the_sidecars(
    targets: list[str], in_cluster: set[str], sidecars: dict[str, list[str] | None]
) -> None:
    chosen = key_targets(targets, IN_CLUSTER, [WS7, WS8])
    assert chosen.in_cluster == frozenset(in_cluster) and chosen.sidecars == sidecars
    assert [name for name in IN_CLUSTER if chosen.takes(name)] == sorted(in_cluster)


def test_a_target_matching_nothing_names_the_field_and_its_position_never_its_value() -> None:
    with pytest.raises(ConfigError) as refused:
        key_targets(["ws-7", KEY], IN_CLUSTER, [WS7, WS8])
    assert refused.value.field == "targets" and "targets[1]" in str(refused.value)
    assert KEY not in str(refused.value)
    with pytest.raises(ConfigError, match=r"targets\[0\]"):  # a sidecar hosting no virtual container is no target
        key_targets(["ws-9"], IN_CLUSTER, [WS7, host("a9", "http://ws-9:1", "ws-9")])


def test_the_push_body_takes_targets_only_with_a_key_and_never_echoes_either() -> None:
    body = OpenRouterPush.model_validate({"api_key": KEY, "targets": ["ws-7"]})
    assert body.targets == ["ws-7"] and KEY not in repr(body)
    for bad in ({"targets": ["ws-7"]}, {"api_key": KEY, "targets": []}, {"api_key": KEY, "targets": [""]}):
        with pytest.raises(ValidationError) as refused:
            OpenRouterPush.model_validate(bad)
        assert KEY not in str(refused.value)
    assert OpenRouterPush.model_validate({"api_key": KEY}).targets is None


def test_a_key_held_by_a_sidecar_container_counts_for_the_no_key_check() -> None:
    state = ContainerState(
        name="head-OR-CodeEmbedding",
        role=Role.CODE_EMBEDDING,
        route=RoleRoute(model="m", upstream="u"),
        policy=Policy.AGGREGATE,
        base_url="http://127.0.0.1:9/api/v1",
        key_held=False,
    )
    assert not any_key_held([state], [WS7, WS8])
    keyed = host("a7", "http://ws-7:8098", "ws-7", ("ws-7-OR-CodeEmbedding", "ws-7-OR-CodeEmbedding", True))
    assert any_key_held([state], [keyed, WS8])
    assert any_key_held([state.model_copy(update={"key_held": True})], [])


def test_a_narrowed_key_push_is_pushed_only_to_the_targeted_containers() -> None:
    push = OpenRouterPush(api_key=SecretStr(KEY), targets=["head-OR-Reranker"])
    plan = plan_push(SamespaceSettings(), PersistedConfig(), push)
    containers = [("head-OR-CodeEmbedding", Role.CODE_EMBEDDING), ("head-OR-Reranker", Role.RERANKER)]
    assert plan.pushed_to(containers, key_targets(push.targets, IN_CLUSTER, []).takes) == ["head-OR-Reranker"]
    assert plan.pushed_to(containers) == ["head-OR-CodeEmbedding", "head-OR-Reranker"]
