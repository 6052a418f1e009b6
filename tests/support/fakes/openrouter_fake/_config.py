"""What the fake's control plane can set: its keys, each upstream's behaviour, the model catalogue."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..scripted_chat import ChatRule

LOCAL_WIDTH = 384  # all-MiniLM-L6-v2
RPM_WINDOW_S = 60.0


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KeyConfig(_Strict):
    """One API key the fake accepts."""

    label: str | None = Field(default=None, description="Name in /key and in stats; default key-<sha256[:8]>.")
    rpm_limit: int | None = Field(default=None, ge=1, description="Key-wide requests/min; None → FakeConfig.rpm.")
    credits: float = Field(default=100.0, description="total_credits; usage >= credits → 402.")
    usage: float = Field(
        default=0.0,
        ge=0,
        description="Spent so far (grows by each response's usage.cost + FakeConfig.cost_per_request).",
    )
    limit: float | None = Field(default=None, description="The key's own spending cap (/key `limit`).")
    is_free_tier: bool = False
    management: bool = Field(default=True, description="May read /credits (OpenRouter: management keys only).")
    in_flight_budget: int | None = Field(
        default=None, ge=0, description="Max concurrent inference requests; beyond → 402 in_flight_budget_exhausted."
    )
    in_flight_retry_after_s: float = Field(default=1.0, ge=0)


VectorMode = Literal["same", "perturbed", "other-model", "wrong-width", "probe-exact"]
RetryAfterFormat = Literal["seconds", "http-date", "none"]
MalformedMode = Literal["invalid-json", "wrong-shape", "missing-row"]


class UpstreamBehaviour(_Strict):
    """How one upstream provider slug behaves. Faults are checked after latency, in field order."""

    vectors: VectorMode = Field(
        default="same",
        description="same | perturbed | other-model | wrong-width | probe-exact (the gate's probe texts "
        "same, every other text other-model: an upstream gaming a gate that checks only those).",
    )
    sigma: float = Field(
        default=0.005, ge=0, description="perturbed: per-component noise; cosine ≈ 1/sqrt(1 + sigma²·width)."
    )
    wrong_width: int | None = Field(default=None, ge=1, description="wrong-width: returned width (default width+1).")
    latency_s: float = Field(default=0.0, ge=0, description="Sleep before answering (faults included).")
    fail_429_every: int | None = Field(default=None, ge=1, description="Every Nth request to this upstream → 429.")
    fail_rate_429: float = Field(default=0.0, ge=0, le=1, description="Probability of a 429.")
    retry_after_s: float | None = Field(default=1.0, ge=0, description="Retry-After on scripted 429s.")
    retry_after_format: RetryAfterFormat = "seconds"
    fail_5xx_count: int = Field(default=0, ge=0, description="The first N requests to this upstream → fail_5xx_status.")
    fail_5xx_rate: float = Field(default=0.0, ge=0, le=1, description="Probability of a fail_5xx_status.")
    fail_5xx_status: int = Field(default=503, ge=500, le=599)
    malformed: MalformedMode | None = Field(default=None, description="Answer 200 with a broken body.")
    seed: int | None = Field(default=None, description="Seeds noise and fault draws; None → FakeConfig.seed.")


class ModelEntry(_Strict):
    id: str
    name: str | None = None
    context_length: int
    max_completion_tokens: int | None = None
    output_modalities: list[str] = Field(default_factory=lambda: ["text"])
    # Credits per token, listed in GET /models as decimal strings and charged as usage.cost.
    prompt_price: float = Field(default=1e-8, ge=0)
    completion_price: float = Field(default=0.0, ge=0)


DEFAULT_MODELS = (
    ModelEntry(id="sentence-transformers/all-minilm-l6-v2", context_length=512, output_modalities=["embeddings"]),
    ModelEntry(id="qwen/qwen3-embedding-4b", context_length=32768, output_modalities=["embeddings"]),
    ModelEntry(id="qwen/qwen3-reranker-8b", context_length=32768),
    ModelEntry(id="deepseek/deepseek-v4-flash", context_length=131072, max_completion_tokens=8192),
    ModelEntry(id="poolside/laguna-s-2.1", context_length=262144, max_completion_tokens=16384),
)


class FakeConfig(_Strict):
    """Everything the control plane can set. POST /_fake/config replaces it whole."""

    keys: dict[str, KeyConfig] = Field(default_factory=dict, description="Accepted keys → their config.")
    upstreams: dict[str, UpstreamBehaviour] = Field(default_factory=dict, description="Upstream slug → behaviour.")
    default_behaviour: UpstreamBehaviour = Field(
        default_factory=UpstreamBehaviour, description="For unlisted upstreams and unpinned rerank/chat."
    )
    strict_upstreams: bool = Field(default=False, description="An unlisted pinned upstream → 404 (no endpoint).")
    rpm: int | None = Field(default=None, ge=1, description="Key-wide RPM for keys without their own rpm_limit.")
    rpm_window_s: float = Field(
        default=RPM_WINDOW_S, gt=0, description="Length of the rate window (60 s; benchmarks compress time)."
    )
    cost_per_request: float = Field(default=0.0, ge=0, description="Added to a key's usage per successful call.")
    report_cost: bool = Field(
        default=True,
        description="usage.cost (credits: tokens × the model's price) in every inference response, as "
        "OpenRouter sends it; False → usage without cost, as an OpenAI-compatible server.",
    )
    width: int = Field(default=LOCAL_WIDTH, ge=1, description="Width of the local model's vectors.")
    seed: int | None = Field(default=0, description="Default seed; None → nondeterministic fault draws.")
    models: list[ModelEntry] = Field(default_factory=lambda: list(DEFAULT_MODELS))
    chat_rules: list[ChatRule] = Field(
        default_factory=list, description="Scripted chat answers, tried in order before the CALL:/echo default."
    )
