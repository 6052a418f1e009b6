"""The metrics samespace exports, as data: names, kinds, label keys, buckets, and the label rules.

No Ray here: `Metric` spells every name once; `actors/metrics.py` records them through
`ray.util.metrics`, and Ray's metrics agent serves them in Prometheus format as `ray_<name>`
(`_total` after a counter's name).
"""

from __future__ import annotations

from cluster.telemetry.labels import FALLBACK_STAGES, OTHER_STAGE, OneHot, failure_kind, fallback_stage
from cluster.telemetry.metric_catalog import (
    CATALOG,
    LATENCY_BUCKETS_S,
    METRIC_PREFIX,
    RAY_LABELS,
    RAY_NAMESPACE,
    REINDEX_BUCKETS_S,
    SPECS,
    Metric,
    MetricKind,
    MetricSpec,
    catalog_problems,
    exported_names,
    metrics_table,
)

__all__ = [
    "CATALOG",
    "FALLBACK_STAGES",
    "LATENCY_BUCKETS_S",
    "METRIC_PREFIX",
    "OTHER_STAGE",
    "RAY_LABELS",
    "RAY_NAMESPACE",
    "REINDEX_BUCKETS_S",
    "SPECS",
    "Metric",
    "MetricKind",
    "MetricSpec",
    "OneHot",
    "catalog_problems",
    "exported_names",
    "failure_kind",
    "fallback_stage",
    "metrics_table",
]
