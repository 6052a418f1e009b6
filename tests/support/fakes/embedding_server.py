"""An OpenAI-compatible embedding server backed by the packaged MiniLM, as a subprocess (tests only).

    with FakeEmbeddingServer(perturb=0.5) as server:      # loads MiniLM in the child (~5-10 s)
        httpx.post(server.base_url + "/embeddings", json={"model": server.model_name, "input": ["a"]})
        assert server.stats().texts == 1

Endpoints: GET /health, GET /v1/models, POST /v1/embeddings (float or base64), GET /stats, POST /stats/reset.
Vectors are `LocalEncoder(EmbeddingSettings()).encode` rows; with `--perturb SCALE` each row gets
deterministic Gaussian noise (seeded by the text) of norm ≈ SCALE and is renormalised, so its cosine
to the exact row is ≈ 1/sqrt(1 + SCALE²) (0.5 → ≈ 0.89; 0.1 → ≈ 0.995).

`--mode probe-exact` perturbs every text except the gate's public probe texts
(`cluster.gate.probe.PROBE_TEXTS`), which get their exact rows: a server that games a gate checking only
those. `--mode uniform` (the default) perturbs every text alike.

Run directly (from the repository root): python -m tests.support.fakes.embedding_server --port 9201
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import threading
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from .openrouter_server import LOOPBACK, FakeServerProcess

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
EMBEDDING_STARTUP_TIMEOUT_S = 60.0  # torch import + MiniLM load in the child
OWNED_BY = "samespace-test"
_API_KEY_ENV = "FAKE_EMBEDDING_API_KEY"

Encode = Callable[[list[str]], np.ndarray]
Mode = Literal["uniform", "probe-exact"]
MODES: tuple[Mode, ...] = ("uniform", "probe-exact")


class EmbeddingStats(BaseModel):
    """GET /stats: embedding requests answered (200) and the texts they carried."""

    requests: int = 0
    texts: int = 0
    texts_by_request: list[int] = Field(default_factory=list)
    models: list[str | None] = Field(default_factory=list, description="The model each request named.")


class _EmbeddingsRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    input: str | list[str]
    encoding_format: Literal["float", "base64"] = "float"


def perturb_rows(texts: list[str], rows: np.ndarray, scale: float) -> np.ndarray:
    """Add noise of norm ≈ scale (per-component std scale/sqrt(width), seeded by each text), renormalise."""
    if scale == 0:
        return rows
    width = rows.shape[1]
    out = rows.astype(np.float64, copy=True)
    for i, text in enumerate(texts):
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        out[i] += np.random.default_rng(seed).standard_normal(width) * (scale / np.sqrt(width))
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32)


def perturb_for_mode(texts: list[str], rows: np.ndarray, scale: float, mode: Mode) -> np.ndarray:
    """`perturb_rows`, except that under `probe-exact` the gate's probe texts keep their exact rows."""
    if mode == "uniform":
        return perturb_rows(texts, rows, scale)
    from cluster.gate.probe import PROBE_TEXTS

    out = perturb_rows(texts, rows, scale).copy()
    exact = [i for i, text in enumerate(texts) if text in PROBE_TEXTS]
    out[exact] = rows[exact]
    return out


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)


def _read_request(raw: bytes) -> tuple[_EmbeddingsRequest, list[str]] | JSONResponse:
    """The request and its texts, or the 400 an OpenAI-compatible server answers."""
    try:
        body = _EmbeddingsRequest.model_validate(json.loads(raw))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return _error(400, "Invalid JSON body")
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        return _error(400, f"Invalid request: {'.'.join(map(str, first['loc'])) or 'body'}: {first['msg']}")
    texts = [body.input] if isinstance(body.input, str) else body.input
    if not texts:
        return _error(400, "Invalid request: input must not be empty")
    if any(not t for t in texts):
        return _error(400, "Invalid request: input must not contain empty strings")
    return body, texts


def _embeddings_answer(rows: np.ndarray, texts: list[str], encoding_format: str, model_name: str) -> dict[str, Any]:
    """OpenAI's embeddings body: each row as floats or as base64 of little-endian float32."""
    if encoding_format == "base64":
        embedded: list[Any] = [base64.b64encode(r.astype("<f4").tobytes()).decode("ascii") for r in rows]
    else:
        embedded = [r.astype(np.float32).tolist() for r in rows]
    tokens = sum(len(t.split()) for t in texts)
    return {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(embedded)],
        "model": model_name,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def build_embedding_app(
    encode: Encode,
    *,
    model_name: str = DEFAULT_MODEL_NAME,
    perturb: float = 0.0,
    api_key: str | None = None,
    mode: Mode = "uniform",
) -> Starlette:
    """The server as an ASGI app around `encode` (texts → L2-normalised float32 rows)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    stats = EmbeddingStats()
    stats_lock = threading.Lock()
    encode_lock = threading.Lock()  # one model, one encode at a time

    def authorised(request: Request) -> bool:
        return api_key is None or request.headers.get("authorization") == f"Bearer {api_key}"

    def run_encode(texts: list[str]) -> np.ndarray:
        with encode_lock:
            rows = encode(texts)
        return perturb_for_mode(texts, rows, perturb, mode)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    async def models(request: Request) -> JSONResponse:
        if not authorised(request):
            return _error(401, "Invalid API key", "authentication_error")
        return JSONResponse({"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": OWNED_BY}]})

    async def embeddings(request: Request) -> JSONResponse:
        if not authorised(request):
            return _error(401, "Invalid API key", "authentication_error")
        parsed = _read_request(await request.body())
        if isinstance(parsed, JSONResponse):
            return parsed
        body, texts = parsed
        rows = await run_in_threadpool(run_encode, texts)
        with stats_lock:
            stats.requests += 1
            stats.texts += len(texts)
            stats.texts_by_request.append(len(texts))
            stats.models.append(body.model)
        return JSONResponse(_embeddings_answer(rows, texts, body.encoding_format, model_name))

    async def get_stats(request: Request) -> JSONResponse:
        with stats_lock:
            return JSONResponse(stats.model_dump())

    async def reset_stats(request: Request) -> JSONResponse:
        with stats_lock:
            stats.requests, stats.texts = 0, 0
            stats.texts_by_request.clear()
            stats.models.clear()
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/v1/models", models),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/stats", get_stats),
            Route("/stats/reset", reset_stats, methods=["POST"]),
        ]
    )


class FakeEmbeddingServer(FakeServerProcess):
    """Starts `python -m tests.support.fakes.embedding_server` on 127.0.0.1 and stops it by PID on exit.

    perturb:     noise norm added to each row (0 = the exact MiniLM vectors)
    mode:        "uniform" (every row perturbed alike) or "probe-exact" (the gate's probe texts exact)
    model_name:  the id /v1/models lists and responses report
    api_key:     if set, /v1/* requires `Authorization: Bearer <api_key>` (401 otherwise)
    base_url:    http://127.0.0.1:<port>/v1 (what a sidecar's --serve takes)
    """

    module = "tests.support.fakes.embedding_server"
    health_path = "/health"
    name = "fake embedding server"

    def __init__(
        self,
        *,
        perturb: float = 0.0,
        model_name: str = DEFAULT_MODEL_NAME,
        api_key: str | None = None,
        port: int | None = None,
        startup_timeout_s: float = EMBEDDING_STARTUP_TIMEOUT_S,
        mode: Mode = "uniform",
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        super().__init__(port=port, startup_timeout_s=startup_timeout_s)
        self.base_url = f"{self.root_url}/v1"
        self.perturb = perturb
        self.mode = mode
        self.model_name = model_name
        self._api_key = api_key

    def __repr__(self) -> str:
        return (
            f"FakeEmbeddingServer(base_url={self.base_url!r}, perturb={self.perturb}, "
            f"mode={self.mode!r}, pid={self.pid})"
        )

    def _extra_args(self) -> list[str]:
        args = ["--model-name", self.model_name, "--perturb", repr(self.perturb), "--mode", self.mode]
        return args + (["--api-key-env", _API_KEY_ENV] if self._api_key else [])

    def start(self) -> FakeEmbeddingServer:
        if self._api_key is None:
            return super().start()
        previous = os.environ.get(_API_KEY_ENV)
        os.environ[_API_KEY_ENV] = self._api_key  # the child inherits it; never on its command line
        try:
            return super().start()
        finally:
            if previous is None:
                os.environ.pop(_API_KEY_ENV, None)
            else:
                os.environ[_API_KEY_ENV] = previous

    def stats(self) -> EmbeddingStats:
        return EmbeddingStats.model_validate(self._get_json("/stats"))

    def reset(self) -> None:
        self._http.post("/stats/reset").raise_for_status()


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="OpenAI-compatible MiniLM embedding server (tests only).")
    parser.add_argument("--host", default=LOOPBACK)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model-name", default=DEFAULT_MODEL_NAME, help="Id listed by /v1/models.")
    parser.add_argument("--perturb", type=float, default=0.0, help="Noise norm added to each row (0 = exact).")
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="uniform",
        help="probe-exact: the gate's probe texts get exact rows, every other text is perturbed.",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads.")
    parser.add_argument("--api-key-env", default=None, help="Env var holding the bearer key /v1/* requires.")
    args = parser.parse_args(argv)
    if args.perturb < 0:
        parser.error("--perturb must be >= 0")
    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None

    from cluster.local.encoder import LocalEncoder
    from cluster.settings import EmbeddingSettings

    encoder = LocalEncoder(EmbeddingSettings(), device="cpu", cpu_threads=args.threads)  # before /health answers
    app = build_embedding_app(
        encoder.encode, model_name=args.model_name, perturb=args.perturb, api_key=api_key, mode=args.mode
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
