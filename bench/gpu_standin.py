"""A stand-in for the configured model on a machine that cannot take its weights: the same folder
(architecture, tokenizer, pooling) with seeded random weights of the same shapes.

The GPU check's machine takes 64 MiB of files a call and the packaged MiniLM's weights are 88 MB. A
forward pass costs the same whatever the weights hold, so speed measured on the stand-in is the
model's; its vectors are not the model's (another `weights_sha256`, so no gate mixes them).

    python -m bench.gpu_standin strip DEST    # here: the packaged model's folder, weights left out
    python -m bench.gpu_standin fill FOLDER   # there: seeded random weights written into it
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from cluster.local import WEIGHT_SUFFIXES, resolve_model_path


def strip_weights(model_dir: Path, dest: Path) -> None:
    """Copy `model_dir` to `dest` without its weight files."""
    shutil.copytree(model_dir, dest, ignore=lambda _, names: [n for n in names if n.endswith(WEIGHT_SUFFIXES)])


def fill_weights(folder: Path, seed: int = 0) -> Path:
    """Write seeded random weights of the folder's architecture (its `config.json`) into it."""
    import torch
    import transformers

    torch.manual_seed(seed)
    model = transformers.AutoModel.from_config(transformers.AutoConfig.from_pretrained(folder))
    with tempfile.TemporaryDirectory() as scratch:
        model.save_pretrained(scratch, safe_serialization=True)  # config.json stays the folder's own
        written = Path(scratch) / "model.safetensors"
        shutil.move(written, folder / written.name)
    return folder / "model.safetensors"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_standin")
    parser.add_argument("action", choices=["strip", "fill"])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    if args.action == "strip":
        strip_weights(Path(resolve_model_path(None)), args.folder)
    else:
        print(f"weights: {fill_weights(args.folder)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
