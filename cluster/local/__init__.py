"""Local inference: the sentence-transformers encoder, the cross-encoder reranker, the chat client."""

from __future__ import annotations

from cluster.local.batcher import QueryBatcher
from cluster.local.chat_client import LocalChatClient, context_window_of
from cluster.local.encoder import WEIGHT_SUFFIXES, LocalEncoder, actor_cpu_threads, pick_device, resolve_model_path
from cluster.local.memory import IdleTrim, return_free_heap
from cluster.local.reranker import LocalReranker

__all__ = [
    "WEIGHT_SUFFIXES",
    "IdleTrim",
    "LocalChatClient",
    "LocalEncoder",
    "LocalReranker",
    "QueryBatcher",
    "actor_cpu_threads",
    "context_window_of",
    "pick_device",
    "resolve_model_path",
    "return_free_heap",
]
