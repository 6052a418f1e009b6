"""Which providers serve under each policy: the pool, the reserve, the excluded (DESIGN §3)."""

from __future__ import annotations

import pytest

from cluster.providers import NOT_ANSWERING, ProviderInfo, ProviderKind, not_answering, provider_views, select_providers
from cluster.roles import Policy, Role

EMBED = [Role.CODE_EMBEDDING, Role.EMBEDDING]


def provider(name: str, kind: ProviderKind, roles: list[Role], eligible: bool = True) -> ProviderInfo:
    return ProviderInfo(
        name=name,
        kind=kind,
        roles=roles,
        node_id="n",
        host="h",
        model="m",
        eligible=eligible,
        reason=None if eligible else "no key pushed",
    )


GPU = provider("gpu0", ProviderKind.LOCAL, [*EMBED, Role.RERANKER])
VC = provider("h-OR-CodeEmbedding", ProviderKind.CLOUD, [Role.CODE_EMBEDDING])
VC_RERANK = provider("h-OR-Reranker", ProviderKind.CLOUD, [Role.RERANKER])
KEYLESS = provider("k-OR-CodeEmbedding", ProviderKind.CLOUD, [Role.CODE_EMBEDDING], eligible=False)
ALL = [GPU, VC, VC_RERANK, KEYLESS]


@pytest.mark.parametrize(
    ("role", "policy", "primary", "reserve"),
    [
        (Role.CODE_EMBEDDING, Policy.AGGREGATE, ["gpu0", "h-OR-CodeEmbedding"], []),
        (Role.CODE_EMBEDDING, Policy.BACKUP, ["gpu0"], ["h-OR-CodeEmbedding"]),
        (Role.CODE_EMBEDDING, Policy.LOCAL, ["gpu0"], []),
        (Role.CODE_EMBEDDING, Policy.CLOUD, ["h-OR-CodeEmbedding"], []),
        (Role.RERANKER, Policy.AGGREGATE, ["gpu0"], ["h-OR-Reranker"]),  # single call: aggregate = backup
        (Role.RERANKER, Policy.BACKUP, ["gpu0"], ["h-OR-Reranker"]),
        (Role.RERANKER, Policy.LOCAL, ["gpu0"], []),
        (Role.RERANKER, Policy.CLOUD, ["h-OR-Reranker"], []),
        (Role.EMBEDDING, Policy.CLOUD, [], []),  # no cloud route for prose: nobody serves, never local
    ],
)
def test_selection_follows_the_policy(role: Role, policy: Policy, primary: list[str], reserve: list[str]) -> None:
    selection = select_providers(role, policy, ALL)
    assert [p.name for p in selection.primary] == primary
    assert [p.name for p in selection.reserve] == reserve


def test_an_ineligible_provider_never_serves_and_says_why() -> None:
    selection = select_providers(Role.CODE_EMBEDDING, Policy.AGGREGATE, ALL)
    assert selection.excluded == {"k-OR-CodeEmbedding": "ineligible: no key pushed"}


def test_cloud_policy_excludes_local_actors_even_the_query_encoder() -> None:
    selection = select_providers(Role.CODE_EMBEDDING, Policy.CLOUD, ALL)
    assert "gpu0" in selection.excluded and "local actors do not serve" in selection.excluded["gpu0"]


def test_views_show_policy_in_force_beside_policy_applied() -> None:
    drifted = VC.model_copy(update={"policy_applied": {Role.CODE_EMBEDDING: Policy.BACKUP}})
    views = provider_views(Role.CODE_EMBEDDING, Policy.AGGREGATE, [GPU, drifted])
    by_name = {v.provider.name: v for v in views}
    assert by_name["h-OR-CodeEmbedding"].policy_in_force is Policy.AGGREGATE
    assert by_name["h-OR-CodeEmbedding"].policy_applied is Policy.BACKUP
    assert by_name["gpu0"].serves == "pool"


def test_the_provider_listing_shows_eligibility_and_both_policies() -> None:
    from cluster.providers import format_views

    drifted = VC.model_copy(update={"policy_applied": {Role.CODE_EMBEDDING: Policy.BACKUP}})
    lines = format_views(
        Role.CODE_EMBEDDING, provider_views(Role.CODE_EMBEDDING, Policy.AGGREGATE, [GPU, drifted, KEYLESS])
    )
    text = "\n".join(lines)
    assert "policy aggregate/applied backup" in text and "INELIGIBLE (no key pushed)" in text


def test_an_actor_that_did_not_answer_is_listed_ineligible_for_every_role_with_why() -> None:
    silent = not_answering("h-OR-Rlm", ProviderKind.CLOUD, "GetTimeoutError")
    assert (silent.kind, silent.roles, silent.eligible) == (ProviderKind.CLOUD, list(Role), False)
    assert silent.reason == f"{NOT_ANSWERING}: GetTimeoutError"
    assert select_providers(Role.RLM, Policy.CLOUD, [silent]).primary == []


def test_a_providers_lane_kind_is_local_cloud_or_sidecar() -> None:
    assert (GPU.lane_kind, VC.lane_kind) == ("local", "cloud")
    assert GPU.model_copy(update={"hosted": "sidecar"}).lane_kind == "sidecar"
