"""Local reranker actor: a Ray shell around cluster.local.reranker.LocalReranker."""

from __future__ import annotations

import socket

import ray

from cluster.local.encoder import pick_device
from cluster.providers import ProviderInfo, ProviderKind
from cluster.roles import Role
from cluster.settings import RerankerSettings


@ray.remote(max_restarts=3)
class RerankerActor:
    def __init__(self, settings: RerankerSettings, name: str) -> None:
        from cluster.local.reranker import LocalReranker

        self._name = name
        self._node_id = ray.get_runtime_context().get_node_id()
        self._reranker = LocalReranker(settings, device=pick_device("auto", ray.get_gpu_ids()))
        self._served = 0

    def describe(self) -> ProviderInfo:
        return ProviderInfo(
            name=self._name,
            kind=ProviderKind.LOCAL,
            roles=[Role.RERANKER],
            node_id=self._node_id,
            host=socket.gethostname(),
            model=self._reranker.model,
            eligible=True,
            served=self._served,
        )

    def rerank(self, query: str, documents: list[str]) -> list[float]:
        self._served += 1
        return self._reranker.rerank(query, documents)
