"""Fake providers and a discovery world for the per-role dispatcher's unit tests, on virtual time.

Every fake provider writes rows `[tag, index, 0, 0]`: the tag says who wrote a row, the index
(parsed from the text `t<index>`) says where it belongs. Calls take len(texts)/rate seconds on
an event loop whose clock jumps to the next timer, so runs are deterministic and instant.
Discovery is an async function over a list the test may change between calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cluster.errors import UpstreamUnavailable
from cluster.providers import ProviderInfo, ProviderKind
from cluster.roles import Policy, Role
from cluster.routing.dispatch import Dispatcher, Provider
from cluster.settings import FanoutSettings
from cluster.space import EncoderIdentity
from tests.support.fakes.virtual_time import VirtualClock, run_virtual

WIDTH = 4
N = 200

LOCAL_ID = EncoderIdentity(model="local/code-model", weights_sha256="a" * 64, width=WIDTH, max_seq_length=512)
CLOUD_ID = EncoderIdentity(model="cloud/code-model", weights_sha256="b" * 64, width=WIDTH, max_seq_length=512)
OTHER_CLOUD_ID = EncoderIdentity(model="cloud/other-model", weights_sha256="c" * 64, width=WIDTH, max_seq_length=512)


# -- fake providers -------------------------------------------------------------------------------


def texts_of(n: int) -> list[str]:
    return [f"t{i}" for i in range(n)]


def index_of(text: str) -> int:
    return int(text[1:]) if text.startswith("t") and text[1:].isdigit() else -1


@dataclass
class Fake:
    """One provider. `fail(call_number)` says whether that embed / rerank call raises."""

    name: str
    kind: ProviderKind
    tag: float
    identity: EncoderIdentity | None = None
    role: Role = Role.CODE_EMBEDDING
    rate: float = 100.0
    eligible: bool = True
    reason: str | None = None
    fail: Callable[[int], bool] = lambda number: False
    error: Callable[[], Exception] = lambda: UpstreamUnavailable("fake", "down", 503)
    score_count: Callable[[int], int] = lambda documents: documents
    calls: list[list[str]] = field(default_factory=list)  # every embed call's texts
    returned: list[int] = field(default_factory=list)  # indices of rows it did return
    rerank_calls: list[tuple[str, list[str]]] = field(default_factory=list)

    async def embed(self, texts: list[str]) -> np.ndarray:
        number = len(self.calls)
        self.calls.append(list(texts))
        await asyncio.sleep(len(texts) / self.rate)
        if self.fail(number):
            raise self.error()
        rows = np.zeros((len(texts), WIDTH), dtype=np.float32)
        rows[:, 0] = self.tag
        rows[:, 1] = [index_of(t) for t in texts]
        self.returned.extend(index_of(t) for t in texts)
        return rows

    async def rerank(self, query: str, documents: list[str]) -> list[float]:
        number = len(self.rerank_calls)
        self.rerank_calls.append((query, list(documents)))
        await asyncio.sleep(0.01)
        if self.fail(number):
            raise self.error()
        return [self.tag + i / 100 for i in range(self.score_count(len(documents)))]

    @property
    def texts_served(self) -> int:
        return len(self.returned)

    def provider(self) -> Provider:
        info = ProviderInfo(
            name=self.name,
            kind=self.kind,
            roles=[self.role],
            node_id=f"node-{self.name}",
            host=f"{self.name}.lan",
            model=(self.identity.model if self.identity else "reranker-model"),
            identity=self.identity,
            eligible=self.eligible,
            reason=self.reason,
        )
        if self.role.fans_out:
            return Provider(info=info, embed=self.embed)
        return Provider(info=info, rerank=self.rerank)


def local(name: str = "gpu-a", tag: float = 1.0, **kw: Any) -> Fake:
    kw.setdefault("identity", LOCAL_ID)
    return Fake(name, ProviderKind.LOCAL, tag, **kw)


def cloud(name: str = "pc1-OR-CodeEmbedding", tag: float = 2.0, **kw: Any) -> Fake:
    kw.setdefault("identity", CLOUD_ID)
    return Fake(name, ProviderKind.CLOUD, tag, **kw)


def always(number: int) -> bool:
    return True


class World:
    """The providers discovery reports right now, and how often it was asked."""

    def __init__(self, *fakes: Fake) -> None:
        self.fakes = list(fakes)
        self.discovered = 0

    async def discover(self) -> list[Provider]:
        self.discovered += 1
        return [f.provider() for f in self.fakes]

    def dispatcher(self, clock: VirtualClock, policy: Policy, role: Role = Role.CODE_EMBEDDING) -> Dispatcher:
        return Dispatcher(
            role,
            policy=lambda: policy,
            discover=self.discover,
            fanout=FanoutSettings(),
            width=WIDTH if role.fans_out else None,
            clock=clock,
            sleep=clock.sleep,
        )


def embed_all(world: World, policy: Policy, n: int = N, on_batch: Any = None) -> Any:
    async def main(clock: VirtualClock) -> Any:
        return await world.dispatcher(clock, policy).embed(texts_of(n), on_batch=on_batch)

    return run_virtual(main)


def assert_complete_in_order(outcome: Any, n: int, tags: dict[str, float]) -> None:
    assert outcome.vectors.shape == (n, WIDTH) and outcome.vectors.dtype == np.float32
    np.testing.assert_array_equal(outcome.vectors[:, 1], np.arange(n, dtype=np.float32))
    assert len(outcome.served_by) == n and "" not in outcome.served_by
    expected_tags = np.array([tags[name] for name in outcome.served_by], dtype=np.float32)
    np.testing.assert_array_equal(outcome.vectors[:, 0], expected_tags)  # served_by names the writer
