"""Local inference: the sentence-transformers encoder, the cross-encoder reranker, the chat client."""

from __future__ import annotations

from cluster.local.chat_client import LocalChatClient, context_window_of
from cluster.local.encoder import LocalEncoder, pick_device
from cluster.local.reranker import LocalReranker

__all__ = [
    "LocalChatClient",
    "LocalEncoder",
    "LocalReranker",
    "context_window_of",
    "pick_device",
]
