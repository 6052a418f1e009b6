"""The sections of the settings model: one frozen pydantic model per concern, with its defaults.

Read once at an entry point (job, Serve app builder, CLI) and passed down; actors receive
the parsed model, never the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, SecretStr, model_validator

from cluster.roles import CHAT_ROLES, Role
from cluster.settings.bearer import bearer_token, configured_token, token_file_rule

CONFIG_FILE_ENV = "SAMESPACE_CONFIG_FILE"
DEFAULT_WIDTH = 384  # all-MiniLM-L6-v2; production example: 2560 (Qwen3-Embedding-4B)
DEFAULT_NAMESPACE = "samespace"
DEFAULT_MCP_PORT = 8000
OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
DEFAULT_CLOUD_TIMEOUT_S = 60.0
# Peer defaults for the single-call roles; embedding models are chosen per deployment (they are the index).
DEFAULT_CLOUD_MODELS = {
    Role.RERANKER: "qwen/qwen3-reranker-8b",
    Role.CODE_ASSISTANT: "poolside/laguna-s-2.1",
    Role.RLM: "deepseek/deepseek-v4-flash",
}
DEFAULT_WINDOW_LINES = 40  # DESIGN §10: peer value
DEFAULT_OVERLAP_LINES = 10  # DESIGN §10: peer value

# The fan-out pool: the peer system's values, DESIGN §4 "starting values".
DEFAULT_TARGET_BATCH_S = 3.0  # targetChunkMs 3000
DEFAULT_MIN_BATCH = 2  # minChunk
DEFAULT_MAX_BATCH = 64  # maxChunk
DEFAULT_PROBE_BATCH = 8  # probeChunk, for a lane whose rate is unknown
DEFAULT_DEPTH = 3  # requests in flight for a lane at >= slowDepthRatio x best
DEFAULT_SLOW_DEPTH_RATIO = 0.5  # slowDepthRatio
DEFAULT_MIN_RATE_RATIO = 0.05  # minRateRatio: slower lanes are parked
DEFAULT_REPROBE_EVERY = 20  # reprobeEvery: a parked lane's probe, per batches dispatched pool-wide
DEFAULT_MAX_CONSECUTIVE_FAILURES = 2  # maxConsecutiveFailures: then the lane is dropped for the run
DEFAULT_RATE_EWMA_ALPHA = 0.3  # EMA 0.7 old / 0.3 new
DEFAULT_RATE_LIMIT_COOLDOWN_S = 2.0  # BASE_BACKOFF_MS, for a 429 without Retry-After
DEFAULT_ADMIT_RETRY_S = 0.25  # ours: how soon a cloud lane without a permit asks again

MAX_HOSTS = 256
REGISTRY_WRITES_PER_MIN = 30


# Spot checks: a non-reference provider's batches are checked on their own texts,
# re-embedded by the reference. The first batch after a verdict always is; then this share of
# batches, SPOT_CHECK_TEXTS distinct texts each at uniformly random positions (so by default four
# reference re-embeds per batch). A provider falsifying m of a batch's B texts escapes one check
# with probability C(B-m, k) / C(B, k): for B = 64, m = 4 that is 0.77 at k = 4, 0.94 at k = 1.
SPOT_CHECK_RATE = 1.0
SPOT_CHECK_TEXTS = 4

# The query-vector cache
DEFAULT_TTL_S = 600.0  # peer QUERY_EMBED_TTL_MS: 10 min
DEFAULT_MAX_ENTRIES = 500  # peer


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class RaySettings(_Section):
    address: str = Field(default="auto", description="Ray address to connect to ('auto', 'local', ray://...).")
    namespace: str = Field(default=DEFAULT_NAMESPACE, description="Ray namespace of every named actor.")


class EmbeddingSettings(_Section):
    """The local encoder: what every local embedder actor loads (and what defines the index space)."""

    model: str | None = Field(
        default=None,
        description="sentence-transformers model path or name; None = the packaged all-MiniLM-L6-v2, offline.",
    )
    width: int = Field(default=DEFAULT_WIDTH, ge=1, le=65536, description="Width of the index's vectors.")
    batch_size: int = Field(default=32, ge=1, le=4096, description="Texts per encode() call.")
    startup_timeout_s: float = Field(
        default=300.0, gt=0, description="How long a job waits for an encoder actor that is still loading its model."
    )
    max_seq_length: int | None = Field(default=None, ge=8, description="Token cap; None = the model's own.")
    device: Literal["auto", "cpu", "cuda"] = Field(default="auto", description="auto = cuda if the actor has a GPU.")
    precision: Literal["fp32", "bf16", "int8"] = Field(
        default="fp32",
        description="fp32; bf16 = autocast (matrix products in bfloat16, the linear layers' weights rounded to it "
        "once at load; 1.8-2.9x the fp32 rate on CPUs with native bf16, a query's encode 7 ms against 11.6, minimum "
        "cosine 0.99997 against fp32); int8 = dynamic quantisation of the linear layers (CPU "
        "only; minimum cosine 0.84: the gate refuses it beside fp32). Part of the encoder identity; the gate "
        "decides whether an encoder of another precision may write into an index.",
    )
    cpu_threads: int | None = Field(
        default=None, ge=1, description="torch threads on CPU; None = the node's cores (shared by cpu_actors)."
    )
    cpu_actors: int = Field(
        default=1,
        ge=1,
        le=64,
        description="CPU embedder actors (when the cluster runs a CPU embedder), each with cpu_threads torch threads, "
        "None: the node's cores / cpu_actors. Processes of one thread each encode a small model faster than one "
        "process whose threads wait on each other (MiniLM, 2 cores: 2 x 1 thread 14% faster than 1 x 2), at the "
        "cost of a model copy each and a query encoded on fewer threads.",
    )
    gpus_per_actor: float = Field(default=1.0, gt=0, le=8, description="GPU share of one GPU embedder actor.")
    accelerator_resource: str = Field(
        default="GPU", min_length=1, description="Ray resource that marks an accelerator (one embedder per unit)."
    )
    cpu_embedder: Literal["auto", "always", "never"] = Field(
        default="auto", description="auto = one CPU embedder only when the cluster has no accelerator."
    )


class RerankerSettings(_Section):
    model: str | None = Field(
        default=None, description="Local cross-encoder path or name; None = no local reranker (none ships offline)."
    )
    candidates: int = Field(default=30, ge=1, le=500, description="Fused top candidates re-scored per query.")


class RoleRoute(_Section):
    """Which OpenRouter model serves a role, and for embedding roles the pinned upstream (DESIGN §6)."""

    model: str = Field(min_length=1, description="OpenRouter model slug, e.g. 'qwen/qwen3-embedding-4b'.")
    upstream: str | None = Field(
        default=None, min_length=1, description="Pinned upstream provider slug, e.g. 'deepinfra' (embedding roles)."
    )
    max_input_tokens: int = Field(default=8192, ge=1, description="Token cap of the cloud encoder (part of its space).")


class CloudSettings(_Section):
    """OpenRouter capacity. Opt-in: nothing is cloud-eligible until enabled and a key is pushed."""

    enabled: bool = Field(default=False, description="Create virtual containers for the routed roles.")
    base_url: str = Field(default=OPENROUTER_BASE_URL, description="OpenRouter API base URL.")
    timeout_s: float = Field(default=DEFAULT_CLOUD_TIMEOUT_S, gt=0, le=600, description="Per-request timeout.")
    key_env: str | None = Field(
        default=None, description="Env var on each node holding the key (operator's choice); else pushed at run time."
    )
    routes: dict[Role, RoleRoute] = Field(
        default_factory=lambda: {role: RoleRoute(model=model) for role, model in DEFAULT_CLOUD_MODELS.items()},
        description="Model (and pin) per role; a role without a route has no virtual container.",
    )
    key_wait_s: float = Field(
        default=0.0,
        ge=0,
        le=3600,
        description="How long a reindex waits for a key push when a role's policy needs the cloud and no "
        "virtual container holds a key (0 = say so and stop at once).",
    )

    @model_validator(mode="after")
    def _embedding_routes_are_pinned(self) -> CloudSettings:
        for role, route in self.routes.items():
            if role.writes_index and route.upstream is None:
                raise ValueError(f"cloud.routes.{role.value}: an embedding route must name an upstream pin (DESIGN §6)")
        self.check_base_url(self.base_url)
        return self

    @staticmethod
    def check_base_url(url: str) -> str:
        """An http(s) URL with a host and nothing secret in it; the message never echoes the URL."""
        from urllib.parse import urlsplit

        shape = "cloud.base_url must be an http(s) URL with a host, e.g. https://openrouter.ai/api/v1"
        try:
            parts = urlsplit(url)
            _ = parts.port  # an out-of-range or non-numeric port raises here
        except ValueError:
            raise ValueError(shape) from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(shape)
        if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
            raise ValueError("cloud.base_url must not carry credentials, a query or a fragment")
        return url


class ChatEndpoint(_Section):
    """A local OpenAI-compatible chat server (vLLM, Ray Serve LLM, llama.cpp...) serving one role."""

    url: str = Field(min_length=1, description="Base URL without /v1, e.g. 'http://gpu-node-1:8100'.")
    model: str = Field(min_length=1, description="The model id the server serves (as in its /v1/models).")
    key_env: str | None = Field(default=None, description="Env var on the node holding the server's key, if any.")
    timeout_s: float = Field(default=120.0, gt=0, le=900, description="Per-request timeout.")
    context_ttl_s: float = Field(
        default=300.0, ge=0, description="How long the window read from /v1/models is trusted (a server may restart)."
    )


class LlmSettings(_Section):
    """Local chat endpoints of the two chat roles; the cloud routes are in `cloud.routes`."""

    endpoints: dict[Role, list[ChatEndpoint]] = Field(
        default_factory=dict, description="Per chat role (code-assistant, rlm): local servers, tried in order."
    )

    @model_validator(mode="after")
    def _chat_roles_only(self) -> LlmSettings:
        for role in self.endpoints:
            if role not in CHAT_ROLES:
                raise ValueError(f"llm.endpoints.{role.value}: only code-assistant and rlm have chat endpoints")
        return self


class RlmSettings(_Section):
    """The ask path (DESIGN §9): gathering loop, synthesis, and their budgets. Peer values marked."""

    fallback_mode: Literal["local-only", "local-first"] = Field(
        default="local-only",
        description="local-only: the RLM runs on local endpoints only (the cloud reserve is not its fallback; "
        "no local RLM means plain retrieval); local-first: the policy's cloud reserve may serve it.",
    )
    max_rounds: int = Field(default=2, ge=1, le=8, description="Gathering rounds after the plan (peer ask: 2).")
    gather_deadline_s: float = Field(default=75.0, gt=0, le=600, description="Deadline of the gathering (peer: 75).")
    ask_budget_s: float = Field(default=120.0, gt=0, le=900, description="Whole ask (peer: 120).")
    synthesis_reserve_s: float = Field(default=14.0, ge=0, le=600, description="Kept for synthesis (peer: 14).")
    min_round_s: float = Field(default=4.0, ge=0, le=60, description="No round starts with less left (peer: 4).")
    max_evidence_chars: int = Field(default=13_000, ge=500, le=1_000_000, description="Evidence cap (peer ask: 13000).")
    tool_concurrency: int = Field(default=4, ge=1, le=32, description="Tool calls in parallel (peer: 4).")
    seed_k: int = Field(default=8, ge=1, le=50, description="Plain-retrieval hits that seed the evidence (peer: 8).")
    tool_k: int = Field(default=8, ge=1, le=50, description="Hits per search inside the loop (peer: 8).")
    default_context_tokens: int = Field(
        default=8192, ge=1024, description="Context window assumed when the endpoint does not report one."
    )
    query_cache_ttl_s: float = Field(
        default=DEFAULT_TTL_S, gt=0, description="Query-vector cache lifetime (peer: 10 min)."
    )
    query_cache_entries: int = Field(
        default=DEFAULT_MAX_ENTRIES, ge=1, description="Query-vector cache size (peer: 500)."
    )


class GateSettings(_Section):
    """The compatibility gate (DESIGN §5). There is deliberately no switch that turns it off."""

    reference: str | None = Field(
        default=None, description="Preferred local reference provider (actor name); else the first by name."
    )
    sentinel_period_s: float = Field(
        default=600.0, gt=0, description="How often serving encoders are re-probed for drift (DESIGN §12)."
    )
    probe_timeout_s: float = Field(default=15.0, gt=0, le=600, description="Time a provider has to embed the probes.")
    spot_check_rate: float = Field(
        default=SPOT_CHECK_RATE,
        gt=0,
        le=1,
        description="Share of a non-reference provider's batches spot-checked on their own texts, re-embedded by "
        "the reference; the first batch after a verdict always is. Never 0: no off switch.",
    )
    spot_check_texts: int = Field(
        default=SPOT_CHECK_TEXTS,
        ge=1,
        le=16,
        description="Distinct texts of a checked batch, at uniformly random positions, re-embedded by the "
        "reference (a batch with m of B texts falsified is caught with probability 1 - C(B-m, k) / C(B, k)).",
    )


class BudgetSettings(_Section):
    """The key-wide cloud budget (DESIGN §7); local GPUs never touch it."""

    override: int | None = Field(default=None, ge=1, le=256, description="Manual ceiling of concurrent cloud calls.")
    acquire_timeout_s: float = Field(default=120.0, gt=0, description="Longest wait for a permit before giving up.")
    discovery_interval_s: float = Field(default=600.0, gt=0, description="How often GET /key and /credits are read.")
    window_s: float = Field(default=60.0, gt=0, description="The rate window (60 s; tests compress time).")
    daily_caps: dict[Role, NonNegativeFloat] = Field(
        default_factory=dict, description="Cloud spend cap per role per UTC day, in credits (none = uncapped)."
    )


class AdminSettings(_Section):
    """The admin API: every route needs this bearer token; without one configured, every call is 401."""

    token: Annotated[SecretStr | None, bearer_token("admin.token")] = Field(
        default=None, description="Bearer token (SAMESPACE_ADMIN__TOKEN); blank is unset, under 16 bytes refused."
    )
    token_file: Annotated[Path | None, token_file_rule("admin.token_file")] = Field(
        default=None, description="A file holding the token (first line)."
    )
    config_path: Path = Field(
        default=Path("~/.samespace/config.json").expanduser(), description="The durable config store's file."
    )

    def expected_token(self) -> SecretStr | None:
        return configured_token(self.token, self.token_file, "admin.token_file")


class ChunkingSettings(_Section):
    window_lines: int = Field(
        default=DEFAULT_WINDOW_LINES, ge=2, le=10_000, description="Longest span before windowing (peer: 40)."
    )
    overlap_lines: int = Field(
        default=DEFAULT_OVERLAP_LINES, ge=0, description="Overlap of consecutive windows (peer: 10)."
    )
    max_file_bytes: int = Field(default=1_000_000, ge=1, description="Files larger than this are skipped.")
    max_chunk_bytes: int = Field(
        default=16_384,
        ge=256,
        le=1_000_000,
        description="Longest chunk text in UTF-8 bytes; a longer window is cut by lines, a longer line by "
        "characters. 16 KiB keeps every normal 40-line chunk whole (this repository's largest is "
        "~4.4 KB) and cuts a 1 MB one-line file into ~61 chunks.",
    )
    max_syntax_depth: int = Field(
        default=32,
        ge=1,
        le=200,
        description="Deepest nesting of classes, namespaces and wrappers the chunker descends into; deeper "
        "code is chunked in line windows (a 10,000-deep file must not exhaust the Python stack).",
    )

    @model_validator(mode="after")
    def _overlap_below_window(self) -> ChunkingSettings:
        if self.overlap_lines >= self.window_lines:
            raise ValueError("chunking.overlap_lines must be smaller than chunking.window_lines")
        return self


class IngestSettings(_Section):
    """What a reindex may read and how far it may shrink an index: secret files are never
    read, one hostile file never fails a job, and a walk that finds far less than the serving build
    is refused."""

    extra_deny: list[str] = Field(
        default_factory=list,
        description="More gitignore-style patterns never indexed, on top of the built-in secret deny-list.",
    )
    reinclude: list[str] = Field(
        default_factory=list,
        description="gitignore-style patterns indexed even when an ignore file or the deny-list excludes them "
        "(the secret content scan still applies).",
    )
    max_shrink_share: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="A build that drops more than this share of the serving build's files is refused "
        "unless the job is run with --allow-shrink.",
    )


class ServeSettings(_Section):
    host: str = Field(default="127.0.0.1", description="Serve HTTP host (loopback by default).")
    port: int = Field(default=DEFAULT_MCP_PORT, ge=1, le=65535, description="Serve HTTP port.")
    mcp_replicas: int = Field(default=1, ge=1, le=64, description="Replicas of the stateless MCP deployment.")
    read_max_lines: int = Field(default=400, ge=1, le=10_000, description="Most lines one read_code call returns.")
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names every HTTP route accepts besides loopback (the DNS-rebinding guard): "
        "'name' or 'name:*' on any port, 'name:port' on that port only; Origins are http/https of these.",
    )
    token: Annotated[SecretStr | None, bearer_token("serve.token")] = Field(
        default=None, description="Bearer token /mcp and /rlm/ask require when set (SAMESPACE_SERVE__TOKEN)."
    )
    token_file: Annotated[Path | None, token_file_rule("serve.token_file")] = Field(
        default=None, description="A file holding that token (first line)."
    )

    @model_validator(mode="after")
    def _allowed_hosts_are_host_names(self) -> ServeSettings:
        for entry in self.allowed_hosts:
            if self.split_host(entry) is None:
                raise ValueError(f"serve.allowed_hosts: {entry!r} is not a host name, 'name:port' or 'name:*'")
        return self

    @staticmethod
    def split_host(value: str) -> tuple[str, str | None] | None:
        """A Host header (or an allowed_hosts entry) as lower-case (name, port); None when malformed.

        The port is None when absent, its digits, or '*' (entries only: any port). IPv6 names keep
        their brackets, as in a Host header: '[::1]:8000' → ('[::1]', '8000').
        """
        value = value.lower()
        if value.startswith("["):
            name, bracket, rest = value.partition("]")
            name += bracket
            if not bracket or len(name) < 3 or not set(name[1:-1]) <= set("0123456789abcdef:."):
                return None
        else:
            name, sep, port = value.partition(":")
            rest = sep + port
            if not name or not set(name) <= set("abcdefghijklmnopqrstuvwxyz0123456789-._"):
                return None
        if not rest:
            return name, None
        port = rest[1:]
        if not rest.startswith(":") or not (port == "*" or (port.isdigit() and port.isascii() and len(port) <= 5)):
            return None
        return name, port

    def expected_token(self) -> SecretStr | None:
        """The token the guard requires: `token`, else the first line of `token_file`."""
        return configured_token(self.token, self.token_file, "serve.token_file")


# The fan-out pool (DESIGN §4)
class FanoutSettings(BaseModel):
    """Tuning of the fan-out pool; the defaults are the peer's (DESIGN §4)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    target_batch_s: float = Field(
        default=DEFAULT_TARGET_BATCH_S, gt=0, description="A batch is sized to take this long: rate x target."
    )
    min_batch: int = Field(default=DEFAULT_MIN_BATCH, ge=1, description="Smallest rate-sized batch, in texts.")
    max_batch: int = Field(default=DEFAULT_MAX_BATCH, ge=1, description="Largest batch, in texts.")
    probe_batch: int = Field(
        default=DEFAULT_PROBE_BATCH, ge=1, description="Batch of a lane whose rate is unknown; a parked lane's probe."
    )
    depth: int = Field(
        default=DEFAULT_DEPTH, ge=1, description="Batches in flight for a lane at >= slow_depth_ratio x the best rate."
    )
    slow_depth_ratio: float = Field(
        default=DEFAULT_SLOW_DEPTH_RATIO,
        gt=0,
        le=1,
        description="Below this share of the best rate a lane keeps 1 batch in flight.",
    )
    min_rate_ratio: float = Field(
        default=DEFAULT_MIN_RATE_RATIO, gt=0, le=1, description="Below this share of the best rate a lane is parked."
    )
    reprobe_every: int = Field(
        default=DEFAULT_REPROBE_EVERY,
        ge=1,
        description="A parked lane takes one probe batch per this many batches dispatched pool-wide.",
    )
    max_consecutive_failures: int = Field(
        default=DEFAULT_MAX_CONSECUTIVE_FAILURES, ge=1, description="Consecutive failures that drop a lane for the run."
    )
    rate_ewma_alpha: float = Field(
        default=DEFAULT_RATE_EWMA_ALPHA, gt=0, le=1, description="Weight of a new rate sample in the lane's EWMA."
    )
    rate_limit_cooldown_s: float = Field(
        default=DEFAULT_RATE_LIMIT_COOLDOWN_S, ge=0, description="Cooldown after a 429 that carries no Retry-After."
    )
    admit_retry_s: float = Field(
        default=DEFAULT_ADMIT_RETRY_S, gt=0, description="How soon a cloud lane refused a permit asks again."
    )

    @model_validator(mode="after")
    def _sizes_are_ordered(self) -> FanoutSettings:
        if self.min_batch > self.max_batch:
            raise ValueError(f"min_batch ({self.min_batch}) must not exceed max_batch ({self.max_batch})")
        if not self.min_batch <= self.probe_batch <= self.max_batch:
            raise ValueError(
                f"probe_batch ({self.probe_batch}) must lie within min_batch..max_batch "
                f"({self.min_batch}..{self.max_batch})"
            )
        return self


# The sidecar fleet
class FleetSettings(BaseModel):
    """The sidecar fleet: transport switches, liveness constants (peer values), command limits, caps.

    The fleet's bearer token is not here: it is `SamespaceSettings.fleet_token`
    (env SAMESPACE_FLEET_TOKEN), so every sidecar of a fleet shares one secret; each agent also
    gets its own credential at registration.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    websocket: bool = Field(default=True, description="Accept sidecars on the /sidecar WebSocket.")
    http_fallback: bool = Field(default=True, description="Accept the POST /sidecar/* fallback.")
    handshake_timeout_s: float = Field(default=30.0, gt=0, description="A socket must register within this.")
    ping_interval_s: float = Field(default=30.0, gt=0, description="Ping sweep period.")
    max_missed_pongs: int = Field(default=3, ge=1, description="Close after this many unanswered pings.")
    superseded_grace_s: float = Field(
        default=45.0, ge=0, description="An older socket of a re-registered agent lives this long."
    )
    stale_after_s: float = Field(
        default=30.0, gt=0, description="No heartbeat for this long: the host leaves the lanes."
    )
    command_timeout_s: float = Field(
        default=60.0, gt=0, description="A command unanswered this long fails (peer 60 s)."
    )
    poll_wait_max_s: float = Field(default=25.0, gt=0, description="Longest a POST /sidecar/poll is held open.")
    max_hosts: int = Field(
        default=MAX_HOSTS,
        ge=1,
        le=65536,
        description="Registry cap: a new agent beyond it is refused (a stale, disconnected entry makes room first).",
    )
    registry_writes_per_min: int = Field(
        default=REGISTRY_WRITES_PER_MIN,
        ge=1,
        description="Durable registry writes allowed in any 60 s; later changes are coalesced into the next one.",
    )
    virtual_discovery_s: float = Field(
        default=30.0,
        gt=0,
        description="How often each reachable sidecar is asked for its virtual containers (the `containers` "
        "command; also asked once as it registers). Kept in memory only.",
    )
