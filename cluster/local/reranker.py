"""Local cross-encoder reranker: load by path or name (offline), score (query, document) pairs.

The embedded default configures none: no reranker weights can be installed offline here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cluster.errors import ConfigError
from cluster.settings import RerankerSettings

if TYPE_CHECKING:
    from sentence_transformers import CrossEncoder


class LocalReranker:
    def __init__(self, settings: RerankerSettings, *, device: str = "cpu", cpu_threads: int | None = None) -> None:
        if settings.model is None:
            raise ConfigError("reranker.model", "no local reranker model is configured")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        import torch
        from sentence_transformers import CrossEncoder

        if device == "cpu":
            torch.set_num_threads(cpu_threads or os.cpu_count() or 1)
        try:
            self._model: CrossEncoder = CrossEncoder(settings.model, device=device)
        except OSError as exc:
            raise ConfigError("reranker.model", f"cannot load {settings.model!r} offline: {exc}") from exc
        self.model = settings.model
        self.device = device

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """One relevance score per document, in input order (higher is more relevant)."""
        if not documents:
            return []
        scores = self._model.predict([(query, doc) for doc in documents], show_progress_bar=False)
        return [float(s) for s in scores]
