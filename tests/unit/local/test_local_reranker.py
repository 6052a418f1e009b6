"""The local reranker's loading path, on a cross-encoder built here from the packaged MiniLM.

No reranker weights install offline, so the head of this cross-encoder is untrained: the test
covers loading, scoring shape and determinism, not ranking quality.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.errors import ConfigError
from cluster.local.reranker import LocalReranker
from cluster.settings import RerankerSettings
from tests.support.fakes.models import build_local_cross_encoder


@pytest.fixture(scope="module")
def cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_local_cross_encoder(tmp_path_factory.mktemp("cross-encoder"))


def test_a_locally_built_cross_encoder_loads_offline_and_scores_every_document(cross_encoder_dir: Path) -> None:
    reranker = LocalReranker(RerankerSettings(model=str(cross_encoder_dir)), cpu_threads=2)
    docs = ["def add(a, b): return a + b", "the weather is sunny", "retry with exponential backoff"]
    scores = reranker.rerank("retry a failing call", docs)
    assert len(scores) == 3 and all(isinstance(s, float) for s in scores)
    assert reranker.rerank("retry a failing call", docs) == scores  # deterministic
    assert reranker.rerank("q", []) == []


def test_no_configured_model_is_a_config_error_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"reranker\.model"):
        LocalReranker(RerankerSettings())


def test_an_unloadable_model_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises((ConfigError, OSError, ValueError)):
        LocalReranker(RerankerSettings(model=str(tmp_path / "missing")))
