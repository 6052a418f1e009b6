"""On a machine with a GPU: the encoder runs on cuda and stays in the CPU encoder's space.

Skipped where torch sees no CUDA device (the project's own machines); run on a lent GPU box.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cluster.local.encoder import LocalEncoder
from cluster.settings import EmbeddingSettings

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")

PROBES = [
    "def add(a, b):\n    return a + b",
    "func Retry(n int) error { return nil }",
    "# Installing\n\nRun the installer.",
    "git log --oneline | head",
    "The quick brown fox jumps over the lazy dog.",
]


def test_the_encoder_uses_cuda_and_matches_the_cpu_vectors() -> None:
    cpu = LocalEncoder(EmbeddingSettings(), device="cpu")
    gpu = LocalEncoder(EmbeddingSettings(), device="cuda")
    assert gpu.device == "cuda" and gpu.identity == cpu.identity
    a, b = cpu.encode(PROBES), gpu.encode(PROBES)
    assert float(np.min(np.sum(a * b, axis=1))) >= 0.99
