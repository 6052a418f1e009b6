"""Local embedder actor: a Ray shell around cluster.local.encoder.LocalEncoder.

Two concurrency groups keep interactive queries from queueing behind bulk reindex batches:
`batch` (one at a time, callers pipeline) and `query` (many callers at once, never behind a batch).
Concurrent queries share model calls: `cluster.local.batcher.QueryBatcher` encodes every query
waiting when the model comes free in one call.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from collections import OrderedDict

import numpy as np
import ray

from cluster.local.batcher import QueryBatcher
from cluster.local.encoder import LocalEncoder, actor_cpu_threads, pick_device
from cluster.local.memory import IdleTrim
from cluster.providers import ProviderInfo, ProviderKind
from cluster.roles import EMBEDDING_ROLES
from cluster.settings import EmbeddingSettings
from cluster.space import EncoderIdentity

TEXTS_REMEMBERED = 100_000  # 16-byte digests: ~10 MB at most
# Callers blocked in the query group at once; their texts meet in the batcher (one model call).
QUERY_CONCURRENCY = 32
# torch threads of a query encode on CPU. A query shares the node's cores with the Serve proxy,
# the replica and the index actor: with a second thread its OpenMP team spins waiting for a core
# the others hold (measured on 2 cores: 1 thread 17 ms of CPU a query; 2 threads 24 ms idle, over
# 100 ms with a neighbour busy). Bulk batches keep the actor's threads (`actor_cpu_threads`).
QUERY_THREADS = 1


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


@ray.remote(  # type: ignore[call-overload]  # Ray's stubs list task options only, not actor ones
    concurrency_groups={"batch": 1, "query": QUERY_CONCURRENCY}, max_restarts=3
)
class EmbedderActor:
    def __init__(self, settings: EmbeddingSettings, name: str) -> None:
        device = pick_device(settings.device, ray.get_gpu_ids())
        context = ray.get_runtime_context()
        self._name = name
        self._node_id = context.get_node_id()
        threads = actor_cpu_threads(settings, os.cpu_count() or 1) if device == "cpu" else None
        self._encoder = LocalEncoder(settings, device=device, cpu_threads=threads)
        self._idle_trim = IdleTrim()  # the heap a reindex grew goes back to the OS when it stops
        self._queries = QueryBatcher(self._encode_queries, max_batch=QUERY_CONCURRENCY)
        self._served = 0
        self._texts_seen: OrderedDict[bytes, int] = OrderedDict()  # text digest → times encoded (bounded)
        self._texts_lock = threading.Lock()  # the two concurrency groups run on two threads

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
            model=self._encoder.identity.model_label,
            identity=self._encoder.identity,
            eligible=True,
            served=self._served,
        )

    @ray.method(concurrency_group="batch")
    def encode_batch(self, texts: list[str]) -> np.ndarray:
        self._served += 1
        self._count(texts)
        try:
            return self._encoder.encode(texts)
        finally:
            self._idle_trim.touch()

    @ray.method(concurrency_group="query")
    def encode_count(self, text: str) -> int:
        """How often this actor encoded `text` (among its last TEXTS_REMEMBERED distinct texts)."""
        with self._texts_lock:
            return self._texts_seen.get(_digest(text), 0)

    def _count(self, texts: list[str]) -> None:
        keys = [_digest(text) for text in texts]
        with self._texts_lock:
            for key in keys:
                self._texts_seen[key] = self._texts_seen.get(key, 0) + 1
                self._texts_seen.move_to_end(key)
            while len(self._texts_seen) > TEXTS_REMEMBERED:
                self._texts_seen.popitem(last=False)

    def _encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encoder.encode_queries(texts, threads=None if len(texts) == 1 else QUERY_THREADS)

    @ray.method(concurrency_group="query")
    def encode_query(self, text: str) -> tuple[np.ndarray, EncoderIdentity]:
        """The query vector together with the identity that produced it (checked by the index)."""
        self._count([text])
        return self._queries.encode(text), self._encoder.identity
