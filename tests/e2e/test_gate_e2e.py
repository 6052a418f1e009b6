"""The compatibility gate and the drift sentinel on real actors and the OpenRouter fake (DESIGN §5, §12).

The fake embeds with the same real model as the local actor; per pinned upstream it serves the
same vectors, perturbed ones (the peer's Q4-vs-full-precision case measured min cosine 0.976),
another model's, the wrong width, or exact vectors for the gate's probe texts only.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from pydantic import SecretStr

from tests.support.ray_cluster import RayCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.ray, pytest.mark.slow]

CANARY_KEY = "sk-or-v1-" + "0badc0de" * 6
NAMESPACE = "gate"
MODEL = "qwen/qwen3-embedding-4b"
UPSTREAMS = {
    "exact": {"vectors": "same"},
    "quantised": {"vectors": "perturbed", "sigma": 0.0105},
    "wide": {"vectors": "wrong-width"},
    "other": {"vectors": "other-model"},
    "probe-exact": {"vectors": "probe-exact"},
}
TEXTS = [f"def op_{i}(a, b):\n    return combine(a, b, {i})" for i in range(120)]


def configure(fake: Any, **overrides: dict[str, Any]) -> None:
    fake.configure(keys={CANARY_KEY: {"label": "gate"}}, upstreams={**UPSTREAMS, **overrides})


@pytest.fixture(scope="module")
def gate(ray_cluster: RayCluster, fake_openrouter: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from cluster.settings import SamespaceSettings

    configure(fake_openrouter)
    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": tmp_path_factory.mktemp("gate-data")},
        gate={"sentinel_period_s": 1.0},
        cloud={
            "enabled": True,
            "base_url": fake_openrouter.base_url,
            "routes": {"code-embedding": {"model": MODEL, "upstream": "exact"}},
        },
    )
    from actors import ensure_embedders

    # A cold embedder loads its model before it answers discovery; wait here, not in the first test
    # (the dispatcher is not asked yet: it would probe the container before its key is pushed).
    ray.get([h.describe.remote() for h in ensure_embedders(settings)], timeout=settings.embedding.startup_timeout_s)
    yield settings
    for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
        ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


def container(settings: Any, name: str | None = None) -> Any:
    """This PC's code-embedding container, or another PC's (a second container by name)."""
    from actors.handles import get_or_start
    from actors.virtual_container import VirtualContainerActor
    from cluster.roles import Role

    name = name or f"{socket.gethostname()}-OR-CodeEmbedding"
    handle = get_or_start(
        VirtualContainerActor,
        settings,
        name,
        name,
        Role.CODE_EMBEDDING,
        settings.cloud.routes[Role.CODE_EMBEDDING],
        settings,
        settings.policy(Role.CODE_EMBEDDING),
    )
    ray.get(handle.set_key.remote(SecretStr(CANARY_KEY)))
    return handle


def route(settings: Any, handle: Any, upstream: str | None, policy: str) -> None:
    from cluster.settings import RoleRoute

    ray.get(handle.apply.remote(RoleRoute(model=MODEL, upstream=upstream), policy))


def use(settings: Any, policy: str, **containers: str | None) -> Any:
    """Put `policy` in force and point the named containers at upstreams; return the dispatcher."""
    from actors.config_push import push_policy
    from actors.dispatcher import get_dispatcher
    from cluster.roles import Role

    push_policy(settings, Role.CODE_EMBEDDING, policy)
    for name, upstream in containers.items():
        route(settings, container(settings, name), upstream, policy)
    return get_dispatcher(settings, Role.CODE_EMBEDDING)


def report_of(dispatcher: Any, provider: str, upstream: str | None) -> Any:
    reports = ray.get(dispatcher.gate_reports.remote())
    return next(r for r in reports if r.key.provider == provider and r.key.upstream == upstream)


def requests_to(fake: Any, upstream: str) -> int:
    return int(fake.stats().total("requests", path="/embeddings", upstream=upstream))


HOST = f"{socket.gethostname()}-OR-CodeEmbedding"


@pytest.fixture(autouse=True)
def fresh_gate(gate: Any) -> None:
    """Every test meets a gate without verdicts, whatever ran before: the dispatcher (it holds the
    gate's ledger) starts afresh, and no other PC's container is left from a test that stopped early."""
    from cluster.naming import dispatcher_actor_name
    from cluster.roles import Role

    def stale() -> list[str]:
        return [
            e["name"]
            for e in ray.util.list_named_actors(all_namespaces=True)
            if e["namespace"] == NAMESPACE
            and (
                e["name"] == dispatcher_actor_name(Role.CODE_EMBEDDING)
                or (e["name"].endswith("-OR-CodeEmbedding") and e["name"] != HOST)
            )
        ]

    for name in stale():
        ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
    wait_until(lambda: not stale(), what="the previous test's dispatcher gone")


@pytest.mark.parametrize(
    ("upstream", "verdict"),
    [
        ("exact", "verified"),
        ("quantised", "vector-incompatible"),
        ("wide", "dimension-mismatch"),
        ("other", "vector-incompatible"),
    ],
)
def test_under_aggregate_a_cloud_upstream_is_verified_against_the_local_reference(
    gate: Any, fake_openrouter: Any, upstream: str, verdict: str
) -> None:
    dispatcher = use(gate, "aggregate", **{HOST: upstream})
    before = requests_to(fake_openrouter, upstream)
    outcome = ray.get(dispatcher.embed.remote(TEXTS))
    ray.get(dispatcher.encode_query.remote("combine two values"))
    report = report_of(dispatcher, HOST, upstream)
    assert report.verdict == verdict and report.key.regime == "local-ref"
    assert report.reference == "samespace-embedder-cpu0"
    cloud_rows = [p for p in outcome.served_by if "-OR-" in p]
    if verdict == "verified":
        assert report.min_cosine >= 0.999 and report.coverage == "cosine"
        assert cloud_rows  # a verified upstream serves
    else:
        assert cloud_rows == []  # a refused upstream never serves a single text ...
        assert requests_to(fake_openrouter, upstream) - before <= 1  # ... it saw the probe, nothing else
    if upstream == "quantised":
        assert 0.97 <= report.min_cosine <= 0.985, report.min_cosine  # the peer's 0.976 case, refused


def test_an_upstream_exact_on_the_probe_texts_only_is_caught_in_service_and_writes_no_row(
    gate: Any, fake_openrouter: Any, tmp_path: Path
) -> None:
    from collections import Counter

    from actors import get_index_actor
    from actors.build_ports import run_reindex

    repo = tmp_path / "gamed"
    repo.mkdir()
    for f in range(8):
        (repo / f"m{f}.py").write_text("\n\n".join(f"def fn_{f}_{g}(x):\n    return x * {g} + {f}" for g in range(16)))
    dispatcher = use(gate, "aggregate", **{HOST: "probe-exact"})
    before = requests_to(fake_openrouter, "probe-exact")
    lines: list[str] = []
    record = run_reindex(gate, repo, "gamed", emit=lines.append)

    report = report_of(dispatcher, HOST, "probe-exact")
    assert report.verdict == "vector-incompatible" and report.detail.startswith("spot check"), report.detail
    assert report.min_cosine is not None and report.min_cosine < 0.5  # junk, though it passed the probe texts
    assert (
        requests_to(fake_openrouter, "probe-exact") - before >= 2
    )  # the probe and at least one batch: caught in service
    assert record.providers == ["samespace-embedder-cpu0"]

    index = get_index_actor(gate)
    writers: Counter[str] = Counter()
    offset = None
    while True:
        rows, offset = ray.get(index.reusable_vectors.remote(record.build, offset, 256))
        writers.update(rows.writers[rows.writer_of[i]][0] for i in range(len(rows.embed_hashes)))
        if offset is None:
            break
    assert record.chunks >= 8 * 16 and writers == Counter({"samespace-embedder-cpu0": record.chunks}), writers
    spot = ray.get(dispatcher.spot_checks.remote())
    assert spot.mismatches >= 1 and spot.texts_reembedded >= 1


def test_an_embedding_route_without_a_pin_is_refused_without_a_request(gate: Any, fake_openrouter: Any) -> None:
    embeds_before = fake_openrouter.stats().total("requests", path="/embeddings")
    dispatcher = use(gate, "aggregate", **{HOST: None})
    outcome = ray.get(dispatcher.embed.remote(TEXTS[:20]))
    report = report_of(dispatcher, HOST, None)
    assert report.verdict == "no-provider-pin" and report.min_cosine is None
    assert len(outcome.served_by) == 20 and all("-OR-" not in p for p in outcome.served_by)
    assert fake_openrouter.stats().total("requests", path="/embeddings") == embeds_before  # not one sent


def test_under_cloud_one_provider_is_checked_on_width_and_pin_only_two_use_an_anchor(gate: Any) -> None:
    dispatcher = use(gate, "cloud", **{HOST: "exact"})
    ray.get(dispatcher.embed.remote(TEXTS[:20]))
    alone = report_of(dispatcher, HOST, "exact")
    assert alone.key.regime == "cloud-ref" and alone.verdict == "verified"
    assert alone.coverage == "width-and-pin-only" and alone.min_cosine is None  # no fake 1.0

    other_pc = "aaa-otherpc-OR-CodeEmbedding"  # sorts first: becomes the anchor
    use(gate, "cloud", **{other_pc: "exact"})
    outcome = ray.get(dispatcher.embed.remote(TEXTS))
    anchor = report_of(dispatcher, other_pc, "exact")
    checked = report_of(dispatcher, HOST, "exact")
    assert anchor.coverage == "width-and-pin-only" and anchor.min_cosine is None
    assert checked.coverage == "cosine" and checked.reference == other_pc and checked.min_cosine >= 0.999
    assert len(outcome.served_by) == len(TEXTS) and all("-OR-" in p for p in outcome.served_by)  # no local actor
    ray.kill(ray.get_actor(other_pc, namespace=NAMESPACE))


def test_a_pinned_upstream_that_drifts_is_evicted_and_never_written(
    gate: Any, fake_openrouter: Any, tmp_path: Path
) -> None:
    from actors import get_index_actor
    from actors.build_ports import run_reindex

    repo = tmp_path / "drift"
    repo.mkdir()
    for f in range(4):
        (repo / f"m{f}.py").write_text("\n\n".join(f"def fn_{f}_{g}(x):\n    return x + {g}" for g in range(10)))
    use(gate, "cloud", **{HOST: "exact"})
    first = run_reindex(gate, repo, "drift", emit=lambda line: None)
    assert first.providers == [HOST] and first.probe_vectors is not None

    # The upstream changes its serving stack behind the same pin.
    configure(fake_openrouter, exact={"vectors": "perturbed", "sigma": 0.0105})
    try:
        from actors.dispatcher import get_dispatcher
        from cluster.errors import NoProviderLeft
        from cluster.roles import Role

        dispatcher = get_dispatcher(gate, Role.CODE_EMBEDDING)
        # The sentinel re-probes every second; wait for its verdict, not for a guessed number of rounds.
        wait_until(
            lambda: report_of(dispatcher, HOST, "exact").verdict != "verified",
            interval_s=0.25,
            what="the sentinel's verdict on the drifted upstream",
        )
        evicted = report_of(dispatcher, HOST, "exact")
        assert evicted.verdict == "vector-incompatible" and "sentinel" in evicted.detail

        with pytest.raises(NoProviderLeft, match="no provider left"):  # the lone provider is out
            run_reindex(gate, repo, "drift", emit=lambda line: None)
        index = get_index_actor(gate)
        assert ray.get(index.record.remote("drift")).build == first.build  # the old index serves on
    finally:
        configure(fake_openrouter)
