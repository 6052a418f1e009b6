"""The fake's vectors: the packaged MiniLM's, reshaped as each upstream's `vectors` mode returns them."""

from __future__ import annotations

import functools
import hashlib
import threading
from typing import TYPE_CHECKING

import numpy as np

from ._config import FakeConfig, UpstreamBehaviour

if TYPE_CHECKING:
    from cluster.local.encoder import LocalEncoder


@functools.cache
def shared_encoder() -> LocalEncoder:
    """The packaged MiniLM, loaded once per process on first use."""
    from cluster.local.encoder import LocalEncoder
    from cluster.settings import EmbeddingSettings

    return LocalEncoder(EmbeddingSettings(), device="cpu")


_ENCODE_LOCK = threading.Lock()


def encode(texts: list[str]) -> np.ndarray:
    """The local model's vectors of `texts` (one encode at a time)."""
    with _ENCODE_LOCK:
        return shared_encoder().encode(texts)


def seed_for(*parts: object) -> int:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little")


@functools.cache
def _rotation(width: int, seed: int) -> np.ndarray:
    """A fixed random orthogonal matrix: the 'other-model' space (same geometry, other coordinates)."""
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.standard_normal((width, width)))
    return (q * np.sign(np.diag(r))).astype(np.float32)


def shape_vectors(
    vectors: np.ndarray, behaviour: UpstreamBehaviour, upstream: str, texts: list[str], config: FakeConfig
) -> np.ndarray:
    """The local model's vectors as this upstream would return them."""
    seed = behaviour.seed if behaviour.seed is not None else (config.seed or 0)
    if behaviour.vectors == "same":
        return vectors
    if behaviour.vectors == "perturbed":
        out = np.empty_like(vectors)
        for i, (vector, text) in enumerate(zip(vectors, texts, strict=True)):
            # Deterministic per (seed, upstream, text): the same text always gets the same vector back.
            rng = np.random.default_rng(seed_for("noise", seed, upstream, text))
            noisy = vector + rng.normal(0.0, behaviour.sigma, size=vector.shape).astype(np.float32)
            out[i] = noisy / np.linalg.norm(noisy)
        return out
    if behaviour.vectors == "other-model":
        return vectors @ _rotation(vectors.shape[1], seed_for("rotation", seed, upstream) % 2**32)
    if behaviour.vectors == "probe-exact":
        from cluster.gate.probe import PROBE_TEXTS

        rotated = vectors @ _rotation(vectors.shape[1], seed_for("rotation", seed, upstream) % 2**32)
        return np.stack([v if t in PROBE_TEXTS else r for v, r, t in zip(vectors, rotated, texts, strict=True)])
    width = behaviour.wrong_width or vectors.shape[1] + 1
    out = np.zeros((vectors.shape[0], width), dtype=np.float32)
    keep = min(width, vectors.shape[1])
    out[:, :keep] = vectors[:, :keep]
    return out
