"""The metrics catalogue (cluster/telemetry) and the recorder that never fails its caller (actors/metrics.py).

No Ray cluster: the recorder is given fake metric objects, or Ray's own ones with no cluster to send
to (they record into nothing).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import yaml

import actors.metrics as metrics
from cluster.cloud.budget import BudgetSnapshot, BudgetState, CeilingSource
from cluster.telemetry import (
    CATALOG,
    METRIC_PREFIX,
    RAY_LABELS,
    SPECS,
    Metric,
    MetricKind,
    MetricSpec,
    OneHot,
    catalog_problems,
    exported_names,
    failure_kind,
    fallback_stage,
    metrics_table,
)

# ---- the catalogue ---------------------------------------------------------------------------------


def test_the_catalogue_has_no_problems() -> None:
    assert catalog_problems(SPECS) == []
    assert set(CATALOG) == {spec.name for spec in SPECS}


def test_every_named_metric_is_described_once_and_says_who_records_it() -> None:
    assert [spec.name for spec in SPECS] == list(Metric)
    assert all(spec.recorded_by for spec in SPECS)
    assert CATALOG["samespace_embed_texts"] is CATALOG[Metric.EMBED_TEXTS]  # a member is its name


def test_every_name_is_prefixed_and_every_label_key_is_a_valid_non_reserved_one() -> None:
    for spec in SPECS:
        assert spec.name.startswith(METRIC_PREFIX) and spec.description
        for key in spec.tag_keys:
            assert key.isidentifier() and key == key.lower() and key not in RAY_LABELS and not key.startswith("__")


def test_histogram_bounds_are_positive_and_increasing_and_only_histograms_have_them() -> None:
    for spec in SPECS:
        if spec.kind is MetricKind.HISTOGRAM:
            assert spec.boundaries[0] > 0
            assert list(spec.boundaries) == sorted(set(spec.boundaries))
        else:
            assert spec.boundaries == ()


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (MetricSpec("embed_texts", MetricKind.COUNTER, "d"), "a name is samespace_"),
        (MetricSpec("samespace_calls_total", MetricKind.COUNTER, "d"), "never ending in '_total'"),
        (MetricSpec("samespace_x", MetricKind.GAUGE, "d", ("WorkerId",)), "bad or repeated label keys"),
        (MetricSpec("samespace_x", MetricKind.GAUGE, "d", ("role", "role")), "bad or repeated label keys"),
        (MetricSpec("samespace_x", MetricKind.GAUGE, "d", ("le",)), "bad or repeated label keys"),
        (MetricSpec("samespace_x", MetricKind.HISTOGRAM, "d"), "histograms, and only they"),
        (MetricSpec("samespace_x", MetricKind.GAUGE, "d", (), (1.0,)), "histograms, and only they"),
        (MetricSpec("samespace_x", MetricKind.HISTOGRAM, "d", (), (1.0, 1.0)), "positive and increasing"),
        (MetricSpec("samespace_x", MetricKind.HISTOGRAM, "d", (), (0.0, 1.0)), "positive and increasing"),
    ],
)
def test_each_catalogue_rule_names_a_spec_that_breaks_it(spec: MetricSpec, problem: str) -> None:
    problems = catalog_problems([spec])
    assert len(problems) == 1 and problem in problems[0]
    assert catalog_problems([SPECS[0], SPECS[0]]) == ["metric names must be unique"]


def test_exported_names_are_what_ray_serves() -> None:
    assert exported_names(CATALOG[Metric.EMBED_TEXTS]) == ("ray_samespace_embed_texts_total",)
    assert exported_names(CATALOG[Metric.GATE_VERDICT]) == ("ray_samespace_gate_verdict",)
    assert exported_names(CATALOG[Metric.EMBED_BATCH_SECONDS]) == (
        "ray_samespace_embed_batch_seconds_bucket",
        "ray_samespace_embed_batch_seconds_count",
        "ray_samespace_embed_batch_seconds_sum",
    )


def test_the_spend_gauges_are_per_role() -> None:
    assert CATALOG[Metric.CLOUD_SPEND_CREDITS].tag_keys == ("role",) == CATALOG[Metric.CLOUD_SPEND_CAP_CREDITS].tag_keys
    assert CATALOG[Metric.CLOUD_SPEND_CREDITS].kind is MetricKind.GAUGE


# ---- the label rules -------------------------------------------------------------------------------


def test_a_state_gauge_sets_the_new_state_to_1_and_the_one_it_left_to_0() -> None:
    states = OneHot()
    key = {"role": "code-embedding", "provider": "p"}
    assert states.move(key, "probe-failed") == [("probe-failed", 1.0)]
    assert states.move(key, "probe-failed") == [("probe-failed", 1.0)]
    assert states.move(key, "verified") == [("probe-failed", 0.0), ("verified", 1.0)]
    assert states.move({"role": "code-embedding", "provider": "q"}, "verified") == [("verified", 1.0)]
    assert states.current(key) == "verified"


@pytest.mark.parametrize(
    ("fallback", "stage"),
    [
        ("rlm: unavailable (no provider) → plain retrieval", "rlm"),
        ("rlm: deadline (no answer) after round 2 → the evidence gathered so far", "rlm"),
        ("retrieval: failed (NoProviderLeft: ...)", "retrieval"),
        ("no evidence: nothing indexed matched (or retrieval failed)", "no-evidence"),
        ("synthesis: the answer cited nothing from the evidence → rejected", "synthesis"),
        ("synthesis unavailable → citations only", "synthesis"),
        ("internal error (KeyError) → no answer", "internal"),
        ("something new", "other"),
    ],
)
def test_an_ask_fallback_is_counted_under_its_stage(fallback: str, stage: str) -> None:
    assert fallback_stage(fallback) == stage


def test_a_failure_is_counted_under_the_class_raised_in_the_actor() -> None:
    class RateLimited(Exception):
        pass

    class Wrapper(Exception):  # how Ray re-raises an actor's error: its cause kept
        def __init__(self, cause: BaseException) -> None:
            super().__init__()
            self.cause = cause

    assert failure_kind(RateLimited()) == "RateLimited"
    assert failure_kind(Wrapper(RateLimited())) == "RateLimited"


# ---- the recorder ----------------------------------------------------------------------------------


@dataclass
class FakeMetric:
    spec: MetricSpec
    calls: list[tuple[str, float, dict[str, str]]] = field(default_factory=list)
    fail: bool = False

    def _call(self, op: str, value: float, tags: dict[str, str]) -> None:
        if self.fail:
            raise ValueError("refused")
        missing = set(self.spec.tag_keys) - set(tags)
        if missing:
            raise ValueError(f"Missing value for tag key(s): {missing}")
        self.calls.append((op, value, tags))

    def inc(self, value: float, tags: dict[str, str]) -> None:
        self._call("inc", value, tags)

    def observe(self, value: float, tags: dict[str, str]) -> None:
        self._call("observe", value, tags)

    def set(self, value: float, tags: dict[str, str]) -> None:
        self._call("set", value, tags)


class FakeMetrics:
    def __init__(self) -> None:
        self.built: dict[str, FakeMetric] = {}

    def build(self, spec: MetricSpec) -> FakeMetric:
        self.built[spec.name] = FakeMetric(spec)
        return self.built[spec.name]

    def values(self, name: str, op: str = "inc") -> list[tuple[float, dict[str, str]]]:
        metric = self.built.get(name)
        return [(v, t) for o, v, t in (metric.calls if metric else []) if o == op]


@pytest.fixture
def fake() -> Iterator[FakeMetrics]:
    """The module's recorder swapped for one over fake metrics (no refresher thread)."""
    made = FakeMetrics()
    saved = metrics._recorder  # noqa: SLF001
    metrics._recorder = metrics.MetricsRecorder(CATALOG, build=made.build, refresh_s=lambda: None)  # noqa: SLF001
    try:
        yield made
    finally:
        metrics._recorder = saved  # noqa: SLF001


def test_recording_never_raises_and_a_failing_metric_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    def explode(spec: MetricSpec) -> Any:
        raise RuntimeError("Ray said no")

    recorder = metrics.MetricsRecorder(CATALOG, build=explode, refresh_s=lambda: None)
    with caplog.at_level(logging.DEBUG, logger="samespace.metrics"):
        for _ in range(3):
            recorder.count(Metric.EMBED_TEXTS, 1, {})
            recorder.observe(Metric.EMBED_BATCH_SECONDS, 0.1, {})
            recorder.set_gauge(Metric.GATE_VERDICT, 1, {})
            recorder.count("samespace_not_in_the_catalogue", 1, {})
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 4  # one per metric, however often it fails
    assert {w.getMessage().split()[1] for w in warnings} == {
        Metric.EMBED_TEXTS,
        Metric.EMBED_BATCH_SECONDS,
        Metric.GATE_VERDICT,
        "samespace_not_in_the_catalogue",
    }


def test_rays_own_metrics_refusing_a_call_never_reach_the_caller() -> None:
    recorder = metrics.MetricsRecorder(CATALOG, refresh_s=lambda: None)  # Ray's objects, no cluster to send to
    recorder.count(Metric.EMBED_TEXTS, 1, {"role": "code-embedding"})  # tags missing: Ray raises ValueError
    recorder.count(Metric.EMBED_TEXTS, 0, {})  # Ray refuses 0: never asked
    recorder.observe(Metric.EMBED_BATCH_SECONDS, 0.5, {"role": "r", "provider": "p", "provider_kind": "local"})
    recorder.set_gauge(Metric.GATE_VERDICT, 1, {"role": "r", "provider": "p", "verdict": "verified"})


def test_gauges_are_resent_until_set_to_none(fake: FakeMetrics) -> None:
    metrics.set_gauge(Metric.CLOUD_SPEND_CREDITS, 1.5, role="rlm")
    metrics.set_gauge(Metric.CLOUD_SPEND_CREDITS, 2.5, role="code-assistant")
    metrics._recorder.refresh()  # noqa: SLF001  what the refresher thread does
    assert [v for v, _ in fake.values(Metric.CLOUD_SPEND_CREDITS, "set")] == [1.5, 2.5, 1.5, 2.5]
    metrics.set_gauge(Metric.CLOUD_SPEND_CREDITS, None, role="rlm")
    metrics._recorder.refresh()  # noqa: SLF001
    assert fake.values(Metric.CLOUD_SPEND_CREDITS, "set")[-1] == (2.5, {"role": "code-assistant"})
    assert len(fake.values(Metric.CLOUD_SPEND_CREDITS, "set")) == 5


def test_spend_without_a_cap_exports_no_cap_series(fake: FakeMetrics) -> None:
    metrics.publish_spend("rlm", 0.25, None)
    metrics.publish_spend("code-assistant", 1.0, 5.0)
    spent = [(0.25, {"role": "rlm"}), (1.0, {"role": "code-assistant"})]
    assert fake.values(Metric.CLOUD_SPEND_CREDITS, "set") == spent
    assert fake.values(Metric.CLOUD_SPEND_CAP_CREDITS, "set") == [(5.0, {"role": "code-assistant"})]


async def test_a_metered_embed_times_answers_and_counts_failures_by_class(fake: FakeMetrics) -> None:
    class RateLimited(Exception):
        pass

    async def ok(texts: list[str]) -> np.ndarray:
        return np.zeros((len(texts), 2), dtype=np.float32)

    async def throttled(texts: list[str]) -> np.ndarray:
        raise RateLimited("429")

    rows = await metrics.metered_embed(ok, "code-embedding", "cpu0", "local")(["a", "b"])
    assert rows.shape == (2, 2)
    with pytest.raises(RateLimited):
        await metrics.metered_embed(throttled, "code-embedding", "or", "cloud")(["a"])
    [(seconds, lane)] = fake.values(Metric.EMBED_BATCH_SECONDS, "observe")
    assert seconds >= 0 and lane == {"role": "code-embedding", "provider": "cpu0", "provider_kind": "local"}
    assert fake.values(Metric.EMBED_FAILURES) == [
        (1, {"role": "code-embedding", "provider": "or", "provider_kind": "cloud", "kind": "RateLimited"})
    ]


def test_the_gate_publishes_each_providers_latest_verdict_and_zeroes_the_one_before(fake: FakeMetrics) -> None:
    def report(provider: str, verdict: str, at: float) -> Any:
        return SimpleNamespace(
            key=SimpleNamespace(provider=provider), verdict=SimpleNamespace(value=verdict), checked_at=at
        )

    metrics.publish_gate("code-embedding", [report("gpu-z", "probe-failed", 1.0)])
    metrics.publish_gate("code-embedding", [report("gpu-z", "probe-failed", 1.0), report("gpu-z", "verified", 2.0)])
    assert [(v, t["verdict"]) for v, t in fake.values(Metric.GATE_VERDICT, "set")] == [
        (1.0, "probe-failed"),
        (0.0, "probe-failed"),
        (1.0, "verified"),
    ]


def _snapshot(**update: Any) -> BudgetSnapshot:
    base: dict[str, Any] = {
        "ceiling": 8,
        "effective": 4,
        "in_flight": 2,
        "waiting": {"a": {"bulk": 3}, "b": {"bulk": 1, "interactive": 2}},
        "source": CeilingSource.LEARNED,
        "state": BudgetState.RAMPING,
        "reason": "r",
        "rate_limited": 1,
        "requests": 10,
        "window_rpm": 30.0,
        "cooldown_until": 105.0,
        "latency_ewma_s": 1.0,
        "last_discovery_at": None,
    }
    return BudgetSnapshot(**{**base, **update})


def test_the_budget_publishes_deltas_of_its_counters_and_its_gauges_as_they_are(fake: FakeMetrics) -> None:
    publisher = metrics.BudgetPublisher()
    publisher.publish(_snapshot(), now=100.0)
    publisher.publish(_snapshot(requests=14, rate_limited=1, state=BudgetState.BACKING_OFF, window_rpm=None), 110.0)
    assert [v for v, _ in fake.values(Metric.BUDGET_PERMITS_GRANTED)] == [10, 4]
    assert [v for v, _ in fake.values(Metric.BUDGET_RATE_LIMITED)] == [1]
    waiting = {t["priority"]: v for v, t in fake.values(Metric.BUDGET_WAITING, "set")}
    assert waiting == {"bulk": 4, "interactive": 2}
    assert [v for v, _ in fake.values(Metric.BUDGET_COOLDOWN_SECONDS, "set")] == [5.0, 0.0]
    assert fake.values(Metric.BUDGET_WINDOW_RPM, "set") == [(30.0, {"source": "learned"})]
    assert metrics._recorder.gauges().get((Metric.BUDGET_WINDOW_RPM, (("source", "learned"),))) is None  # noqa: SLF001
    states = [(t["state"], v) for v, t in fake.values(Metric.BUDGET_STATE, "set")]
    assert states == [("ramping", 1.0), ("ramping", 0.0), ("backing-off", 1.0)]


def test_an_asks_fallbacks_are_counted_by_stage(fake: FakeMetrics) -> None:
    result = SimpleNamespace(
        produced=SimpleNamespace(
            mode="citations-only",
            rounds=2,
            fallbacks=["rlm: deadline (x) after round 2 → the evidence", "synthesis unavailable → citations only"],
            timings=SimpleNamespace(total_ms=1500.0),
        )
    )
    metrics.record_ask(result)  # type: ignore[arg-type]
    assert [t["stage"] for _, t in fake.values(Metric.ASK_FALLBACKS)] == ["rlm", "synthesis"]
    metrics.record_ask(SimpleNamespace())  # type: ignore[arg-type]  # malformed: logged, never raised


# ---- the docs' table, the shipped dashboard and scrape config -----------------------------------------

REPOSITORY = Path(__file__).resolve().parents[3]
DASHBOARDS = REPOSITORY / "dashboards"
TABLE = re.compile(r"<!-- metrics table: [^\n]*-->\n(.*?)<!-- end of the metrics table -->", re.DOTALL)


def test_the_docs_show_the_catalogues_table_as_it_renders() -> None:
    pages = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").rglob("*.md"))]
    tables = [table for page in pages for table in TABLE.findall(page.read_text(encoding="utf-8"))]
    assert tables, "no page holds the metrics table between its markers"
    for table in tables:
        assert table == metrics_table(), (
            "regenerate it: python -c 'from cluster.telemetry import metrics_table as t; print(t())'"
        )


def test_the_table_has_a_row_per_metric_naming_its_series() -> None:
    header, rule, *rows = metrics_table().splitlines()
    assert header.startswith("| series |") and set(rule) == {"|", "-"}
    assert len(rows) == len(SPECS)
    assert all(f"`{exported_names(spec)[0]}`" in row for spec, row in zip(SPECS, rows, strict=True))
    odd = metrics_table([MetricSpec("samespace_x", MetricKind.GAUGE, "a | b")])
    assert odd.splitlines()[-1] == "| `ray_samespace_x` | gauge | - |  | a \\| b |"


def test_the_dashboard_shows_every_metric_and_only_series_the_catalogue_exports() -> None:
    exprs = [
        t["expr"]
        for p in json.loads((DASHBOARDS / "samespace.json").read_text())["panels"]
        for t in p.get("targets", [])
    ]
    used = {name for expr in exprs for name in re.findall(r"\bray_samespace_\w+", expr)}
    exported = {name for spec in SPECS for name in exported_names(spec)}
    assert used <= exported, used - exported
    assert {spec.name for spec in SPECS if not set(exported_names(spec)) & used} == set()


def test_the_scrape_config_targets_the_default_metrics_port() -> None:
    from samespace.head import DEFAULT_METRICS_PORT

    config = yaml.safe_load((DASHBOARDS / "prometheus.yml").read_text())
    [job] = config["scrape_configs"]
    assert job["static_configs"][0]["targets"] == [f"127.0.0.1:{DEFAULT_METRICS_PORT}"]


def test_the_head_exports_metrics_on_the_port_it_is_given_unless_a_ray_arg_names_one() -> None:
    from samespace.head import DEFAULT_METRICS_PORT, METRICS_PORT_FLAG, HeadSpec, ray_start_argv

    assert not any(a.startswith(METRICS_PORT_FLAG) for a in ray_start_argv(HeadSpec(num_cpus=1)))  # Ray picks one
    fixed = ray_start_argv(HeadSpec(num_cpus=1, metrics_port=DEFAULT_METRICS_PORT))
    assert f"{METRICS_PORT_FLAG}={DEFAULT_METRICS_PORT}" in fixed
    chosen = ray_start_argv(
        HeadSpec(num_cpus=1, metrics_port=DEFAULT_METRICS_PORT, extra_args=(f"{METRICS_PORT_FLAG}=9999",))
    )
    assert [a for a in chosen if a.startswith(METRICS_PORT_FLAG)] == [f"{METRICS_PORT_FLAG}=9999"]
