"""A virtual container a sidecar hosts is a cloud provider like any other to the gate: an unpinned one
is refused `no-provider-pin` and never called, a pinned one is probed and then spot-checked on its own
batches; under `cloud` an in-cluster virtual container anchors the space before any a sidecar hosts."""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest

from cluster.errors import GateRefused
from cluster.gate.admission import Gatekeeper, reference_candidates, spot_checked
from cluster.gate.ledger import GateLedger
from cluster.providers import ProviderInfo, ProviderKind, select_providers
from cluster.roles import Policy, Role

WIDTH = 8
BASIS = np.random.default_rng(3).normal(size=(64, WIDTH)).astype(np.float32)


class Embed:
    """The reference's space (or, with `noise`, off it); counts calls."""

    def __init__(self, noise: float = 0.0) -> None:
        self.noise = noise
        self.calls: list[list[str]] = []

    async def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = np.stack([BASIS[sum(map(ord, t)) % len(BASIS)] for t in texts])
        rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        if self.noise:
            rows = rows + np.random.default_rng(1).normal(scale=self.noise, size=rows.shape)
        return rows.astype(np.float32)


def provider(name: str, kind: ProviderKind, hosted: str = "ray", upstream: str | None = None) -> ProviderInfo:
    return ProviderInfo.model_validate(
        {
            "name": name,
            "kind": kind,
            "hosted": hosted,
            "roles": [Role.CODE_EMBEDDING],
            "node_id": "",
            "host": "h",
            "model": "m",
            "upstream": upstream,
            "eligible": True,
        }
    )


LOCAL = provider("gpu0", ProviderKind.LOCAL)
IN_CLUSTER = provider("zz-OR-CodeEmbedding", ProviderKind.CLOUD, upstream="deepinfra")
ON_SIDECAR = provider("aa-OR-CodeEmbedding", ProviderKind.CLOUD, "sidecar", upstream="deepinfra")
UNPINNED = provider("ab-OR-CodeEmbedding", ProviderKind.CLOUD, "sidecar")


def keeper() -> Gatekeeper:
    return Gatekeeper(
        GateLedger(lambda: 0.0),
        expected_width=WIDTH,
        preferred_reference=None,
        clock=lambda: 0.0,
        probe_timeout_s=5.0,
        rng=random.Random(0),
    )


def test_under_cloud_an_in_cluster_container_anchors_before_a_sidecar_s_whatever_the_names() -> None:
    selection = select_providers(Role.CODE_EMBEDDING, Policy.CLOUD, [ON_SIDECAR, IN_CLUSTER, LOCAL])
    assert [p.name for p in reference_candidates(selection, None)] == [IN_CLUSTER.name, ON_SIDECAR.name]
    alone = select_providers(Role.CODE_EMBEDDING, Policy.CLOUD, [ON_SIDECAR, LOCAL])
    assert [p.name for p in reference_candidates(alone, None)] == [ON_SIDECAR.name]


def test_an_unpinned_sidecar_container_is_refused_no_provider_pin_and_a_pinned_one_is_spot_checked() -> None:
    gk = keeper()
    unpinned, pinned, reference = Embed(), Embed(), Embed()
    selection = select_providers(Role.CODE_EMBEDDING, Policy.AGGREGATE, [LOCAL, ON_SIDECAR, UNPINNED])
    admitted = asyncio.run(
        gk.admit(selection, {LOCAL.name: reference, ON_SIDECAR.name: pinned, UNPINNED.name: unpinned})
    )
    assert admitted.reference.name == LOCAL.name
    assert admitted.selection.excluded[UNPINNED.name].startswith("gate: no-provider-pin")
    assert unpinned.calls == []  # never even probed
    assert ON_SIDECAR.name in [p.name for p in admitted.selection.primary + admitted.selection.reserve]
    assert spot_checked(ON_SIDECAR, LOCAL)
    checker = Embed()
    guarded = gk.guard(ON_SIDECAR, pinned, admitted.regime, LOCAL, checker)
    assert asyncio.run(guarded(["def f(): pass"])).shape == (1, WIDTH)
    assert checker.calls == [["def f(): pass"]]  # its own batch re-embedded by the reference
    pinned.noise = 0.4  # the stack behind the sidecar's pin changed
    with pytest.raises(GateRefused, match="vector-incompatible"):
        asyncio.run(guarded(["def g(): pass"]))
