"""embedding.precision: bf16 and int8 encoders are other identities, and the gate decides whether
their vectors may join an fp32 index (bf16 passes, int8 is refused); in each precision the query
path (`encode_queries`) gives the rows `encode` gives. The real packaged model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from sentence_transformers import SentenceTransformer

from cluster.gate.probe import MIN_COSINE, ProbeTarget, Regime, Verdict, probe
from cluster.local.encoder import LocalEncoder, resolve_model_path
from cluster.settings import EmbeddingSettings
from cluster.space import EncoderIdentity

pytestmark = pytest.mark.slow  # loads the model three times


@pytest.fixture(scope="module")
def encoders() -> dict[str, LocalEncoder]:
    return {
        p: LocalEncoder(EmbeddingSettings(precision=p), device="cpu", cpu_threads=2) for p in ("fp32", "bf16", "int8")
    }


def target(name: str, encoder: LocalEncoder) -> ProbeTarget:
    async def embed(texts: list[str]) -> np.ndarray:
        return encoder.encode(texts)

    return ProbeTarget(name=name, model=encoder.identity.model_label, upstream=None, needs_pin=False, embed=embed)


async def gate(candidate: LocalEncoder, reference: LocalEncoder) -> tuple[Verdict, float | None]:
    report = await probe(
        target("candidate", candidate),
        target("reference", reference),
        regime=Regime.LOCAL_REF,
        expected_width=reference.identity.width,
        clock=lambda: 0.0,
    )
    return report.verdict, report.min_cosine


def test_precision_is_part_of_the_identity_and_of_the_gate_key(encoders: dict[str, LocalEncoder]) -> None:
    identities = {p: e.identity for p, e in encoders.items()}
    assert [identities[p].precision for p in ("fp32", "bf16", "int8")] == ["fp32", "bf16", "int8"]
    assert len({i.space_id for i in identities.values()}) == 3  # three spaces until the gate says otherwise
    assert identities["fp32"].model_label == identities["fp32"].model
    assert identities["bf16"].model_label == f"{identities['bf16'].model} (bf16)"
    assert EncoderIdentity.model_validate(identities["fp32"].model_dump()) == identities["fp32"]


async def test_the_gate_admits_a_bf16_encoder_into_an_fp32_space(encoders: dict[str, LocalEncoder]) -> None:
    verdict, min_cosine = await gate(encoders["bf16"], encoders["fp32"])
    assert verdict is Verdict.VERIFIED
    assert min_cosine is not None and MIN_COSINE <= min_cosine < 1.0  # close, and really computed in bf16


async def test_the_gate_refuses_an_int8_encoder_beside_fp32(encoders: dict[str, LocalEncoder]) -> None:
    verdict, min_cosine = await gate(encoders["int8"], encoders["fp32"])
    assert verdict is Verdict.VECTOR_INCOMPATIBLE
    assert min_cosine is not None and min_cosine < MIN_COSINE


def test_an_unknown_precision_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="precision"):
        EmbeddingSettings(precision="fp16")  # type: ignore[arg-type]  # the invalid value is the point


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_query_path_gives_the_rows_encode_gives_alone_and_batched(
    encoders: dict[str, LocalEncoder], precision: str
) -> None:
    encoder = encoders[precision]
    texts = ["parse a date string", "retry a request with exponential backoff and jitter", "def main():"]
    rows = encoder.encode(texts)
    batched = encoder.encode_queries(texts, threads=1)
    alone = np.vstack([encoder.encode_queries([text]) for text in texts])
    assert batched.shape == alone.shape == (3, encoder.identity.width) and batched.dtype == np.float32
    assert float((rows * batched).sum(axis=1).min()) > 0.9999  # padding to the longest changes nothing
    assert float((rows * alone).sum(axis=1).min()) > 0.9999
    np.testing.assert_allclose(np.linalg.norm(alone, axis=1), 1.0, atol=1e-5)


def linear_dtypes(encoder: LocalEncoder) -> set[torch.dtype]:
    return {m.weight.dtype for m in encoder._model.modules() if isinstance(m, torch.nn.Linear)}  # noqa: SLF001


def test_bf16_casts_its_linear_layers_once_and_gives_autocasts_vectors_bit_for_bit(
    encoders: dict[str, LocalEncoder],
) -> None:
    """bf16 is autocast's arithmetic: the linear layers' weights are rounded to bf16 once, at load, not on
    every call, and every vector is the one autocast over the model's fp32 weights gives, bulk and query
    path alike."""
    bf16 = encoders["bf16"]
    assert linear_dtypes(bf16) == {torch.bfloat16} and linear_dtypes(encoders["fp32"]) == {torch.float32}
    model = SentenceTransformer(resolve_model_path(None), device="cpu")
    texts = ["parse a date string", "def retry(request, attempts=3):\n    return backoff(request)", "x" * 900]
    with torch.inference_mode(), torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        reference = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
        alone = model.encode(texts[:1], normalize_embeddings=True, convert_to_numpy=True)
    assert np.array_equal(bf16.encode(texts), reference)
    assert np.array_equal(bf16.encode_queries(texts[:1]), alone)  # alone: a batch pads to its longest text
    assert not np.array_equal(encoders["fp32"].encode(texts), reference)  # the reference is bf16 arithmetic
