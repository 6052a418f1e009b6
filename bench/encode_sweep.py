"""The raw encode on one device, swept over precisions and batch sizes, with and without length
bucketing: tokens/s, and against the device's own bf16 matrix-product rate measured in the same run.
No Ray, no store: the GPU case's first number, and it runs on CPU the same way.

    python -m bench.encode_sweep [--repo PATH | --texts FILE] [--device auto] [--precisions fp32,bf16]
        [--batch-sizes 32,128,512] [--limit N] [--out FILE]
    python -m bench.encode_sweep --repo PATH --write-texts FILE   # the texts, for a machine with no chunkers

- Work: a text's tokens (special tokens in, cut at the model's `max_seq_length`). Useful FLOPs are
  2 × the model's dense weights × tokens; attention's share is left out, so every rate is a lower bound.
- Bucketing on: one `encode()` of every text (the model sorts them by length, as a reindex sends them);
  off: one `encode()` per batch in the corpus's order, each batch padded to its longest text. Padded
  tokens are counted for both: bucketing's saving, separate from the device's speed.
- The ceiling: a square bf16 matrix product on the same device (`matmul_bf16_tflops`), and the
  datasheet's dense bf16 peak where the device is one this file knows (`SPEC_BF16_TFLOPS`).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Dense (no sparsity) bf16 tensor-core peaks from the vendor's datasheets, in TFLOP/s (SXM parts).
SPEC_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0}
ROOT = Path(__file__).resolve().parent.parent


def padded_tokens(tokens: Sequence[int], chars: Sequence[int], batch_size: int, *, bucketing: bool) -> int:
    """Token slots the forward passes run: each batch pads to its longest text. Bucketing batches the
    texts longest first by characters, as sentence-transformers sorts them; without it, in order."""
    order = sorted(range(len(tokens)), key=lambda i: -chars[i]) if bucketing else list(range(len(tokens)))
    total = 0
    for start in range(0, len(order), batch_size):
        batch = [tokens[i] for i in order[start : start + batch_size]]
        total += max(batch) * len(batch)
    return total


def matmul_tflops(device: str, dtype_name: str, size: int, repeats: int = 5) -> float:
    """TFLOP/s of a square matrix product of `size` on `device` (random data; three warm-ups)."""
    import torch

    dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    for _ in range(3):
        torch.matmul(a, b)
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(repeats):
        torch.matmul(a, b)
    _sync(device)
    return 2 * size**3 * repeats / (time.perf_counter() - t0) / 1e12


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def device_name(device: str) -> str:
    import platform

    if device.startswith("cuda"):
        import torch

        return str(torch.cuda.get_device_name(device))
    return platform.processor() or platform.machine()


def spec_peak(name: str) -> float | None:
    """The datasheet's dense bf16 peak of a device this file knows by name, else None."""
    return next((peak for key, peak in SPEC_BF16_TFLOPS.items() if key in name), None)


def sweep_one(encoder: Any, texts: list[str], *, bucketing: bool) -> float:
    """Seconds to encode every text (after one warm-up batch)."""
    encoder.encode(texts[: encoder.batch_size])
    _sync(encoder.device)
    t0 = time.perf_counter()
    if bucketing:
        encoder.encode(texts)
    else:
        for start in range(0, len(texts), encoder.batch_size):
            encoder.encode(texts[start : start + encoder.batch_size])
    _sync(encoder.device)
    return time.perf_counter() - t0


def run_sweep(
    texts: list[str], *, device: str, precisions: Sequence[str], batch_sizes: Sequence[int], matmul_size: int
) -> dict[str, Any]:
    from cluster.local.encoder import LocalEncoder
    from cluster.settings import SamespaceSettings

    embedding = SamespaceSettings().embedding  # the configured model (the environment's, or the packaged one)
    first = LocalEncoder(embedding, device=device)
    tokens = first.token_counts(texts)
    chars = [len(t) for t in texts]
    flops_per_token = 2 * first.dense_weights
    matmul = matmul_tflops(device, "bf16", matmul_size)
    spec = spec_peak(device_name(device))
    runs: list[dict[str, Any]] = []
    for precision in precisions:
        for batch_size in batch_sizes:
            encoder = LocalEncoder(
                embedding.model_copy(update={"precision": precision, "batch_size": batch_size}), device=device
            )
            for bucketing in (True, False):
                seconds = sweep_one(encoder, texts, bucketing=bucketing)
                useful = flops_per_token * sum(tokens) / seconds / 1e12
                padded = padded_tokens(tokens, chars, batch_size, bucketing=bucketing)
                runs.append(
                    {
                        "precision": precision,
                        "batch_size": batch_size,
                        "bucketing": bucketing,
                        "seconds": round(seconds, 3),
                        "texts_per_s": round(len(texts) / seconds, 1),
                        "tokens_per_s": round(sum(tokens) / seconds, 1),
                        "padded_tokens": padded,
                        "padding_overhead": round(padded / sum(tokens), 3),
                        "useful_tflops": round(useful, 4),
                        "of_matmul_bf16": round(useful / matmul, 4),
                        "of_spec_bf16": round(useful / spec, 4) if spec else None,
                    }
                )
                print(json.dumps(runs[-1]), flush=True)
    return {
        "device": device_name(device),
        "model": first.identity.model,
        "max_seq_length": first.identity.max_seq_length,
        "texts": len(texts),
        "tokens": sum(tokens),
        "dense_weights": first.dense_weights,
        "flops_per_token": flops_per_token,
        "matmul_bf16_tflops": round(matmul, 3),
        "matmul_size": matmul_size,
        "spec_bf16_tflops": spec,
        "runs": runs,
        "best": max(runs, key=lambda r: r["tokens_per_s"]),
        "note": "useful FLOPs = 2 x dense weights x tokens (attention left out: a lower bound)",
    }


def corpus_texts(repo: Path) -> list[str]:
    """What a reindex of `repo` embeds: each chunk's code text and its name text."""
    from cluster.build import collect_chunks
    from cluster.index.representations import name_text
    from cluster.settings import SamespaceSettings
    from cluster.space import embedding_text

    chunks, _, _ = collect_chunks(repo, SamespaceSettings())
    return [embedding_text(c) for c in chunks] + [name_text(c) for c in chunks]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.encode_sweep")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--repo", type=Path, default=None, help="chunk this repository (default: this one)")
    source.add_argument("--texts", type=Path, default=None, help="a JSON list of texts (from --write-texts)")
    parser.add_argument("--write-texts", type=Path, default=None, help="write the texts to this file and stop")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (cuda when torch sees one)")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--batch-sizes", default="32,128,512")
    parser.add_argument("--limit", type=int, default=None, help="the first N texts only")
    parser.add_argument("--matmul-size", type=int, default=None, help="default: 8192 on cuda, 2048 on cpu")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    texts = json.loads(args.texts.read_text()) if args.texts else corpus_texts(args.repo or ROOT)
    texts = texts[: args.limit] if args.limit else texts
    if args.write_texts:
        args.write_texts.write_text(json.dumps(texts))
        print(f"{len(texts)} texts written to {args.write_texts}")
        return 0
    import torch

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    result = run_sweep(
        texts,
        device=device,
        precisions=[p for p in args.precisions.split(",") if p],
        batch_sizes=[int(b) for b in args.batch_sizes.split(",") if b],
        matmul_size=args.matmul_size or (8192 if device.startswith("cuda") else 2048),
    )
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
