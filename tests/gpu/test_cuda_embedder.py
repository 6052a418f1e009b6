"""On a machine with a GPU: the encoder runs on cuda and stays in the CPU encoder's space.

Skipped where torch sees no CUDA device (the project's own machines); run on a lent GPU box
(`bench/gpu_check.sh`). The model is the configured one (`SAMESPACE_EMBEDDING__MODEL`; unset, the
packaged MiniLM).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cluster.local.encoder import LocalEncoder
from cluster.settings import SamespaceSettings

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")

PROBES = [
    "def add(a, b):\n    return a + b",
    "func Retry(n int) error { return nil }",
    "# Installing\n\nRun the installer.",
    "git log --oneline | head",
    "The quick brown fox jumps over the lazy dog.",
]


def test_the_encoder_uses_cuda_and_matches_the_cpu_vectors() -> None:
    embedding = SamespaceSettings().embedding
    cpu = LocalEncoder(embedding, device="cpu")
    gpu = LocalEncoder(embedding, device="cuda")
    assert gpu.device == "cuda" and gpu.identity == cpu.identity
    a, b = cpu.encode(PROBES), gpu.encode(PROBES)
    assert float(np.min(np.sum(a * b, axis=1))) >= 0.99


def test_bf16_on_cuda_stays_in_the_fp32_cpu_space() -> None:
    embedding = SamespaceSettings().embedding
    cpu = LocalEncoder(embedding, device="cpu")
    gpu = LocalEncoder(embedding.model_copy(update={"precision": "bf16"}), device="cuda")
    a, b = cpu.encode(PROBES), gpu.encode(PROBES)
    assert float(np.min(np.sum(a * b, axis=1))) >= 0.99
