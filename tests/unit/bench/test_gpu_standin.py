"""bench.gpu_standin: the packaged model's folder without its weights, refilled with random ones of the same shapes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.gpu_standin import main
from cluster.local import WEIGHT_SUFFIXES, LocalEncoder, resolve_model_path
from cluster.settings import EmbeddingSettings


@pytest.mark.slow
def test_a_stand_in_has_the_models_shapes_and_tokens_but_not_its_weights(tmp_path: Path) -> None:
    folder = tmp_path / "standin"
    assert main(["strip", str(folder)]) == 0
    assert not [p for p in folder.rglob("*") if p.name.endswith(WEIGHT_SUFFIXES)]
    packaged_bytes = sum(p.stat().st_size for p in Path(resolve_model_path(None)).rglob("*") if p.is_file())
    assert sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) < packaged_bytes / 10
    assert main(["fill", str(folder)]) == 0

    real, standin = LocalEncoder(EmbeddingSettings()), LocalEncoder(EmbeddingSettings(model=str(folder)))
    assert standin.dense_weights == real.dense_weights and standin.identity.width == real.identity.width
    assert standin.identity.weights_sha256 != real.identity.weights_sha256
    texts = ["def add(a, b):\n    return a + b", "The quick brown fox jumps over the lazy dog."]
    assert standin.token_counts(texts) == real.token_counts(texts)
    assert float(np.max(np.abs(standin.encode(texts) - real.encode(texts)))) > 0.1  # not the model's vectors
