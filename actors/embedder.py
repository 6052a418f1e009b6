"""Local embedder actor: a Ray shell around cluster.encoder.LocalEncoder.

Two concurrency groups keep interactive queries from queueing behind bulk reindex batches:
`batch` (one at a time, callers pipeline) and `query` (one at a time, never behind a batch).
"""

from __future__ import annotations

import socket

import numpy as np
import ray

from cluster.encoder import LocalEncoder, pick_device
from cluster.providers import ProviderInfo, ProviderKind
from cluster.roles import EMBEDDING_ROLES
from cluster.settings import EmbeddingSettings
from cluster.space import EncoderIdentity


@ray.remote(concurrency_groups={"batch": 1, "query": 1}, max_restarts=3)
class EmbedderActor:
    def __init__(self, settings: EmbeddingSettings, name: str) -> None:
        device = pick_device(settings.device, ray.get_gpu_ids())
        context = ray.get_runtime_context()
        self._name = name
        self._node_id = context.get_node_id()
        self._encoder = LocalEncoder(settings, device=device)
        self._served = 0

    @ray.method(concurrency_group="query")
    def identity(self) -> EncoderIdentity:
        return self._encoder.identity

    @ray.method(concurrency_group="query")
    def describe(self) -> ProviderInfo:
        return ProviderInfo(
            name=self._name,
            kind=ProviderKind.LOCAL,
            roles=sorted(EMBEDDING_ROLES),
            node_id=self._node_id,
            host=socket.gethostname(),
            model=self._encoder.identity.model,
            identity=self._encoder.identity,
            eligible=True,
            served=self._served,
        )

    @ray.method(concurrency_group="batch")
    def encode_batch(self, texts: list[str]) -> np.ndarray:
        self._served += 1
        return self._encoder.encode(texts)

    @ray.method(concurrency_group="query")
    def encode_query(self, text: str) -> tuple[np.ndarray, EncoderIdentity]:
        """The query vector together with the identity that produced it (checked by the index)."""
        return self._encoder.encode([text])[0], self._encoder.identity
