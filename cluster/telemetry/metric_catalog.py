"""Every metric samespace exports: its name, kind, description, label keys and histogram buckets.

Pure data, no Ray, and the one list of them: `Metric` spells every name, `SPECS` describes each,
`metrics_table` renders them for the docs, and the shipped dashboard is tested against them.
`actors/metrics.py` builds the `ray.util.metrics` objects from these specs in
each process that records one. Ray's metrics agent serves them in Prometheus format on every
node's metrics export port, beside Ray's and Serve's own series, under `exported_names(spec)`:
Ray 2.60 puts its namespace in front (`ray_`), a counter gains `_total`, a histogram is its
`_bucket`, `_count` and `_sum` series. Every series also carries the labels Ray adds
(`Component`, `NodeAddress`, `SessionName`, `Version`, `WorkerId`): one series per process, so
dashboards `sum` over them. A histogram's `_sum` is rebuilt by Ray's agent from bucket midpoints,
so it is approximate; where an exact total matters there is a counter beside it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise

__all__ = [
    "CATALOG",
    "LATENCY_BUCKETS_S",
    "METRIC_PREFIX",
    "RAY_LABELS",
    "RAY_NAMESPACE",
    "REINDEX_BUCKETS_S",
    "SPECS",
    "Metric",
    "MetricKind",
    "MetricSpec",
    "catalog_problems",
    "exported_names",
    "metrics_table",
]

METRIC_PREFIX = "samespace_"  # every name here starts with it
RAY_NAMESPACE = "ray"  # what Ray's agent puts in front of an application metric's name
# Labels Ray's agent adds to every series (and `le`, a histogram bucket's): a tag key must not be one.
RAY_LABELS = frozenset({"Component", "NodeAddress", "SessionName", "Version", "WorkerId", "le"})

# Seconds. A batch or a tool call: 5 ms (a cached query) up to two minutes (a cold cloud batch).
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
# Seconds. A reindex: an up-to-date check (a second) up to a large repository on CPU (two hours).
REINDEX_BUCKETS_S = (1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)


class MetricKind(StrEnum):
    COUNTER = "counter"  # only goes up (per process): `inc` by a positive amount
    GAUGE = "gauge"  # the value now; a process re-sends its gauges or they age out of the agent
    HISTOGRAM = "histogram"  # observations counted into `boundaries`' buckets


@dataclass(frozen=True)
class MetricSpec:
    """One metric: what `ray.util.metrics` is given to build it."""

    name: str
    kind: MetricKind
    description: str
    tag_keys: tuple[str, ...] = ()
    boundaries: tuple[float, ...] = ()  # histograms only: upper bounds, increasing, all > 0
    recorded_by: str = ""  # who records it, and when: the docs' table says it


def exported_names(spec: MetricSpec) -> tuple[str, ...]:
    """The series names a metric has on the Prometheus endpoint (Ray 2.60, OpenTelemetry export)."""
    base = f"{RAY_NAMESPACE}_{spec.name}"
    if spec.kind is MetricKind.COUNTER:
        return (f"{base}_total",)
    if spec.kind is MetricKind.HISTOGRAM:
        return (f"{base}_bucket", f"{base}_count", f"{base}_sum")
    return (base,)


class Metric(StrEnum):
    """Every metric's name: the one place each is spelled. A member is its name (a `str`)."""

    # embedding: recorded by each role's dispatcher, which sees every lane (local, cloud, sidecar)
    EMBED_TEXTS = "samespace_embed_texts"
    EMBED_BATCHES = "samespace_embed_batches"
    EMBED_BATCH_SECONDS = "samespace_embed_batch_seconds"
    EMBED_FAILURES = "samespace_embed_failures"
    GATE_VERDICT = "samespace_gate_verdict"

    # the cloud budget (the budget actor) and spend per role
    BUDGET_PERMITS_GRANTED = "samespace_budget_permits_granted"
    BUDGET_RATE_LIMITED = "samespace_budget_rate_limited"
    BUDGET_IN_FLIGHT = "samespace_budget_in_flight"
    BUDGET_WAITING = "samespace_budget_waiting"
    BUDGET_CEILING_PERMITS = "samespace_budget_ceiling_permits"
    BUDGET_EFFECTIVE_PERMITS = "samespace_budget_effective_permits"
    BUDGET_COOLDOWN_SECONDS = "samespace_budget_cooldown_seconds"
    BUDGET_WINDOW_RPM = "samespace_budget_window_rpm"
    BUDGET_STATE = "samespace_budget_state"
    CLOUD_SPEND_CREDITS = "samespace_cloud_spend_credits"
    CLOUD_SPEND_CAP_CREDITS = "samespace_cloud_spend_cap_credits"

    # reindex: progress from the index actor, the run's duration from the job's driver
    REINDEX_CHUNKS_DONE = "samespace_reindex_chunks_done"
    REINDEX_CHUNKS_PLANNED = "samespace_reindex_chunks_planned"
    REINDEX_CHUNKS = "samespace_reindex_chunks"
    REINDEX_LAST_DURATION_SECONDS = "samespace_reindex_last_duration_seconds"
    REINDEX_DURATION_SECONDS = "samespace_reindex_duration_seconds"

    # the MCP replicas
    MCP_TOOL_CALLS = "samespace_mcp_tool_calls"
    MCP_TOOL_SECONDS = "samespace_mcp_tool_seconds"
    ASKS = "samespace_asks"
    ASK_ROUNDS = "samespace_ask_rounds"
    ASK_FALLBACKS = "samespace_ask_fallbacks"
    ASK_SECONDS = "samespace_ask_seconds"


_LANE = ("role", "provider", "provider_kind")  # provider_kind: local | cloud | sidecar

# Who records each metric, and when (the docs' table says it beside the series).
_LANDED = "each role's dispatcher, per batch that landed"
_CALLED = "each role's dispatcher, per call to a provider (batches, gate probes, spot checks)"
_GATE = "each role's dispatcher, every 5 s"
_BUDGET = "the budget actor, every 2 s"
_INDEX = "the index actor (progress, commit)"
_DRIVER = "the reindex job's driver, as it exits"
_TOOL = "the MCP replicas, per tool call"
_ASK = "the MCP replicas, per answered ask"

SPECS = (
    MetricSpec(
        Metric.EMBED_TEXTS,
        MetricKind.COUNTER,
        "Texts embedded in batches that landed, per provider (project: the index a reindex embeds for).",
        (*_LANE, "policy", "project"),
        recorded_by=_LANDED,
    ),
    MetricSpec(
        Metric.EMBED_BATCHES,
        MetricKind.COUNTER,
        "Embedding batches that landed, per provider (project: the index a reindex embeds for).",
        (*_LANE, "policy", "project"),
        recorded_by=_LANDED,
    ),
    MetricSpec(
        Metric.EMBED_BATCH_SECONDS,
        MetricKind.HISTOGRAM,
        "Seconds each embedding call to a provider took that answered: bulk batches, gate probes, spot checks.",
        _LANE,
        LATENCY_BUCKETS_S,
        recorded_by=_CALLED,
    ),
    MetricSpec(
        Metric.EMBED_FAILURES,
        MetricKind.COUNTER,
        "Embedding calls to a provider that raised, by exception class (kind); 429s are RateLimited.",
        (*_LANE, "kind"),
        recorded_by=_CALLED,
    ),
    MetricSpec(
        Metric.GATE_VERDICT,
        MetricKind.GAUGE,
        "The gate's current verdict per provider: 1 for the verdict in force, 0 for one it had before.",
        ("role", "provider", "verdict"),
        recorded_by=_GATE,
    ),
    MetricSpec(
        Metric.BUDGET_PERMITS_GRANTED,
        MetricKind.COUNTER,
        "Cloud permits granted (requests started).",
        recorded_by=_BUDGET,
    ),
    MetricSpec(Metric.BUDGET_RATE_LIMITED, MetricKind.COUNTER, "Cloud requests answered 429.", recorded_by=_BUDGET),
    MetricSpec(
        Metric.BUDGET_IN_FLIGHT, MetricKind.GAUGE, "Cloud permits granted and not yet released.", recorded_by=_BUDGET
    ),
    MetricSpec(
        Metric.BUDGET_WAITING,
        MetricKind.GAUGE,
        "Callers waiting for a cloud permit, by priority.",
        ("priority",),
        recorded_by=_BUDGET,
    ),
    MetricSpec(
        Metric.BUDGET_CEILING_PERMITS,
        MetricKind.GAUGE,
        "Most cloud permits the budget will hold now.",
        recorded_by=_BUDGET,
    ),
    MetricSpec(
        Metric.BUDGET_EFFECTIVE_PERMITS,
        MetricKind.GAUGE,
        "Cloud permits allowed now (AIMD, at most the ceiling).",
        recorded_by=_BUDGET,
    ),
    MetricSpec(
        Metric.BUDGET_COOLDOWN_SECONDS,
        MetricKind.GAUGE,
        "Seconds left in the cooldown after a 429 (0: none).",
        recorded_by=_BUDGET,
    ),
    MetricSpec(
        Metric.BUDGET_WINDOW_RPM,
        MetricKind.GAUGE,
        "Requests a minute the window gate enforces: the key's credible rate or the one learned at a 429.",
        ("source",),
        recorded_by=_BUDGET,
    ),
    MetricSpec(
        Metric.BUDGET_STATE,
        MetricKind.GAUGE,
        "The budget's state: 1 for steady, ramping or backing-off, whichever holds now; 0 for the others.",
        ("state",),
        recorded_by=_BUDGET,
    ),
    MetricSpec(
        Metric.CLOUD_SPEND_CREDITS,
        MetricKind.GAUGE,
        "Cloud spend today (UTC), in credits, per role.",
        ("role",),
        recorded_by=_BUDGET,
    ),
    MetricSpec(
        Metric.CLOUD_SPEND_CAP_CREDITS,
        MetricKind.GAUGE,
        "Daily cloud spend cap, in credits, per role.",
        ("role",),
        recorded_by=_BUDGET,
    ),
    MetricSpec(
        Metric.REINDEX_CHUNKS_DONE,
        MetricKind.GAUGE,
        "Chunks written to the index's latest build.",
        ("index",),
        recorded_by=_INDEX,
    ),
    MetricSpec(
        Metric.REINDEX_CHUNKS_PLANNED,
        MetricKind.GAUGE,
        "Chunks the index's latest build will hold.",
        ("index",),
        recorded_by=_INDEX,
    ),
    MetricSpec(
        Metric.REINDEX_CHUNKS,
        MetricKind.COUNTER,
        "Chunks of committed builds, by source: embedded now or reused from an earlier build.",
        ("index", "source"),
        recorded_by=_INDEX,
    ),
    MetricSpec(
        Metric.REINDEX_LAST_DURATION_SECONDS,
        MetricKind.GAUGE,
        "Seconds the index's last committed build took, from its start to its commit.",
        ("index",),
        recorded_by=_INDEX,
    ),
    MetricSpec(
        Metric.REINDEX_DURATION_SECONDS,
        MetricKind.HISTOGRAM,
        "Seconds a reindex job's run took (outcome: ok or failed), recorded by the job's driver.",
        ("index", "outcome"),
        REINDEX_BUCKETS_S,
        recorded_by=_DRIVER,
    ),
    MetricSpec(
        Metric.MCP_TOOL_CALLS,
        MetricKind.COUNTER,
        "MCP tool calls, by tool and outcome (ok, error: answered as a tool error, failed: raised).",
        ("tool", "outcome"),
        recorded_by=_TOOL,
    ),
    MetricSpec(
        Metric.MCP_TOOL_SECONDS,
        MetricKind.HISTOGRAM,
        "Seconds an MCP tool call took in the replica, by tool and outcome.",
        ("tool", "outcome"),
        LATENCY_BUCKETS_S,
        recorded_by=_TOOL,
    ),
    MetricSpec(
        Metric.ASKS,
        MetricKind.COUNTER,
        "Asks answered, by how the answer was made (mode).",
        ("mode",),
        recorded_by=_ASK,
    ),
    MetricSpec(
        Metric.ASK_ROUNDS, MetricKind.COUNTER, "Tool rounds the retrieval model ran, over every ask.", recorded_by=_ASK
    ),
    MetricSpec(
        Metric.ASK_FALLBACKS,
        MetricKind.COUNTER,
        "Fallbacks asks took, by the stage that fell back (rlm, retrieval, synthesis, no-evidence, internal).",
        ("stage",),
        recorded_by=_ASK,
    ),
    MetricSpec(
        Metric.ASK_SECONDS,
        MetricKind.HISTOGRAM,
        "Seconds an ask took, by how the answer was made (mode).",
        ("mode",),
        (*LATENCY_BUCKETS_S, 300.0),
        recorded_by=_ASK,
    ),
)

CATALOG: Mapping[str, MetricSpec] = {spec.name: spec for spec in SPECS}

_NAME = re.compile(rf"^{METRIC_PREFIX}[a-z0-9_]+$")
_LABEL = re.compile(r"^[a-z][a-z0-9_]*$")  # Prometheus allows more; ours are lower snake case


def catalog_problems(specs: Iterable[MetricSpec]) -> list[str]:
    """What is wrong with `specs` (nothing, for the catalogue: a unit test holds it to that)."""
    specs = list(specs)
    problems = []
    if len({s.name for s in specs}) != len(specs):
        problems.append("metric names must be unique")
    for spec in specs:
        if not _NAME.match(spec.name) or spec.name.endswith("_total"):
            problems.append(f"{spec.name}: a name is {METRIC_PREFIX}<lower snake case>, never ending in '_total'")
        bad = [k for k in spec.tag_keys if not _LABEL.match(k) or k in RAY_LABELS or k.startswith("otel_")]
        if bad or len(set(spec.tag_keys)) != len(spec.tag_keys):
            problems.append(f"{spec.name}: bad or repeated label keys {spec.tag_keys}")
        bounds = spec.boundaries
        if (spec.kind is MetricKind.HISTOGRAM) != bool(bounds):
            problems.append(f"{spec.name}: histograms, and only they, have boundaries")
        if bounds and (bounds[0] <= 0 or any(a >= b for a, b in pairwise(bounds))):
            problems.append(f"{spec.name}: boundaries must be positive and increasing")
    return problems


def metrics_table(specs: Iterable[MetricSpec] = SPECS) -> str:
    """The docs' table of the metrics, one row each: the series on the endpoint, the kind, the label
    keys, who records it and what it is. The docs hold it verbatim; a unit test keeps them equal."""
    rows = ["| series | kind | labels | recorded by | what it is |", "|---|---|---|---|---|"]
    for spec in specs:
        first, *more = exported_names(spec)
        series = ", ".join([f"`{first}`", *(f"`_{name.rsplit('_', 1)[1]}`" for name in more)])
        cells = (series, spec.kind.value, ", ".join(spec.tag_keys) or "-", spec.recorded_by, spec.description)
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows) + "\n"
