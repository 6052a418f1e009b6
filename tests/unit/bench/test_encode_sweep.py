"""bench.encode_sweep: the padding arithmetic, the datasheet lookup, and one small sweep on CPU end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.encode_sweep import main, padded_tokens, spec_peak


def test_bucketing_pads_each_batch_to_its_longest_text_after_sorting_by_characters() -> None:
    tokens, chars = [10, 2, 9, 3], [100, 20, 90, 30]
    assert padded_tokens(tokens, chars, 2, bucketing=True) == 10 * 2 + 3 * 2  # (10, 9) then (3, 2)
    assert padded_tokens(tokens, chars, 2, bucketing=False) == 10 * 2 + 9 * 2  # (10, 2) then (9, 3)
    assert padded_tokens(tokens, chars, 3, bucketing=False) == 10 * 3 + 3  # a short last batch pads to itself


def test_the_datasheet_peak_is_known_by_the_devices_name_only() -> None:
    assert spec_peak("NVIDIA H200") == 989.0
    assert spec_peak("NVIDIA A100-SXM4-80GB") == 312.0
    assert spec_peak("x86_64") is None


@pytest.mark.slow
def test_a_sweep_of_a_repositorys_texts_counts_their_tokens_and_padding(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    long_body = " + ".join(["value"] * 60)
    functions = [
        f"def short_{i}(value):\n    return value\n"
        if i % 2 == 0
        else f"def long_{i}(value):\n    return {long_body}\n"
        for i in range(4)
    ]
    (repo / "mixed.py").write_text("\n\n".join(functions))  # short, long, short, long: batches of two in order mix them
    texts_file, out = tmp_path / "texts.json", tmp_path / "sweep.json"
    assert main(["--repo", str(repo), "--write-texts", str(texts_file)]) == 0
    texts = json.loads(texts_file.read_text())
    assert len(texts) >= 4 and len(texts) % 2 == 0  # each chunk's code text and name text

    assert main(["--texts", str(texts_file), "--device", "cpu", "--precisions", "fp32", "--batch-sizes", "2",
                 "--matmul-size", "256", "--out", str(out)]) == 0  # fmt: skip
    result = json.loads(out.read_text())
    from cluster.local.encoder import LocalEncoder
    from cluster.settings import EmbeddingSettings

    counts = LocalEncoder(EmbeddingSettings()).token_counts(texts)
    assert result["tokens"] == sum(counts) and result["texts"] == len(texts)
    assert result["spec_bf16_tflops"] is None and result["matmul_bf16_tflops"] > 0
    runs = {run["bucketing"]: run for run in result["runs"]}
    assert set(runs) == {True, False}
    chars = [len(t) for t in texts]
    for bucketing, run in runs.items():
        assert run["padded_tokens"] == padded_tokens(counts, chars, 2, bucketing=bucketing)
        assert abs(sum(counts) / run["tokens_per_s"] - run["seconds"]) < 0.002
    assert runs[True]["padded_tokens"] < runs[False]["padded_tokens"]  # the corpus mixes long and short texts
