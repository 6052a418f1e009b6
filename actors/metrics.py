"""samespace's metrics on Ray: `ray.util.metrics` objects built from cluster/telemetry's catalogue.

Each process builds a metric the first time it records it; Ray's metrics agent on the node serves
every process's series in Prometheus format (`ray_<name>`, counters `ray_<name>_total`) on the
node's metrics export port. What the helpers here promise their callers:

- recording never raises: a failure (a bad tag, Ray's own refusal) is logged once per metric and
  the call carries on; a request never fails for its metrics;
- recording is cheap: a dict lookup and Ray's record call (about 2 µs), no lock once built;
- a gauge stays exported: Ray's agent drops a gauge series the process has not re-sent for two
  report intervals (20 s by default), so every gauge set here is re-sent by one daemon thread per
  process until it is set to None.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from cluster.telemetry import CATALOG, Metric, MetricKind, MetricSpec, OneHot, failure_kind, fallback_stage

if TYPE_CHECKING:
    import numpy as np

    from cluster.ask.pipeline import AskResult
    from cluster.cloud.budget import BudgetSnapshot
    from cluster.cloud.spend import SpendView
    from cluster.gate.probe import GateReport

__all__ = [
    "BUDGET_PUBLISH_S",
    "BudgetPublisher",
    "MetricsRecorder",
    "budget_metrics_loop",
    "count",
    "forget_index",
    "gate_metrics_loop",
    "metered_embed",
    "observe",
    "publish_gate",
    "publish_progress",
    "publish_spend",
    "record_ask",
    "record_commit",
    "record_landed",
    "record_reindex",
    "record_tool",
    "set_gauge",
]

log = logging.getLogger("samespace.metrics")

DEFAULT_REPORT_INTERVAL_MS = 10_000  # Ray's metrics_report_interval_ms
BUDGET_PUBLISH_S = 2.0  # the budget's gauges and counters, read from its snapshot this often
GATE_PUBLISH_S = 5.0  # a dispatcher's verdicts, read from its gate's ledger this often

Tags = tuple[tuple[str, str], ...]


def _refresh_period_s() -> float:
    """Half Ray's report interval: a gauge re-sent this often outlives the agent's two-interval TTL."""
    try:
        import ray

        interval_ms = int(ray._config.metrics_report_interval_ms())  # noqa: SLF001  no public accessor
    except Exception:  # noqa: BLE001 - Ray's default, when its config cannot be read
        interval_ms = DEFAULT_REPORT_INTERVAL_MS
    return max(interval_ms, 1000) / 2000.0


def _build(spec: MetricSpec) -> Any:
    from ray.util import metrics

    name = str(spec.name)  # a `Metric` member is a str; Ray is given the plain one
    if spec.kind is MetricKind.COUNTER:
        return metrics.Counter(name, spec.description, spec.tag_keys)
    if spec.kind is MetricKind.GAUGE:
        return metrics.Gauge(name, spec.description, spec.tag_keys)
    return metrics.Histogram(name, spec.description, list(spec.boundaries), spec.tag_keys)


class MetricsRecorder:
    """One process's metrics: built on first use from `catalog`; every call swallows its own failure.

    `build` makes the metric object of a spec (Ray's, or a test's fake); `refresh_s` is how often
    the gauges set so far are re-sent (None: never, and no thread)."""

    def __init__(
        self,
        catalog: Mapping[str, MetricSpec],
        build: Callable[[MetricSpec], Any] = _build,
        refresh_s: Callable[[], float | None] = _refresh_period_s,
    ) -> None:
        self._catalog = catalog
        self._build = build
        self._refresh_s = refresh_s
        self._metrics: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._gauges: dict[tuple[str, Tags], float] = {}
        self._refresher: threading.Thread | None = None
        self._failed: set[str] = set()

    def count(self, name: str, value: float, tags: Mapping[str, object]) -> None:
        if value <= 0:  # a counter only goes up; Ray refuses 0
            return
        try:
            self._metric(name).inc(value, tags=_strings(tags))
        except Exception as exc:  # noqa: BLE001 - metrics never fail the caller (logged once a metric)
            self._failure(name, exc)

    def observe(self, name: str, value: float, tags: Mapping[str, object]) -> None:
        try:
            self._metric(name).observe(value, tags=_strings(tags))
        except Exception as exc:  # noqa: BLE001 - metrics never fail the caller (logged once a metric)
            self._failure(name, exc)

    def set_gauge(self, name: str, value: float | None, tags: Mapping[str, object]) -> None:
        """Set a gauge series and keep re-sending it; None stops re-sending (Ray's agent drops it soon)."""
        try:
            strings = _strings(tags)
            key = (name, tuple(sorted(strings.items())))
            if value is None:
                with self._lock:
                    self._gauges.pop(key, None)
                return
            self._metric(name).set(value, tags=strings)
            with self._lock:
                self._gauges[key] = value
                if self._refresher is None:
                    self._refresher = self._start_refresher()
        except Exception as exc:  # noqa: BLE001 - metrics never fail the caller (logged once a metric)
            self._failure(name, exc)

    def gauges(self) -> dict[tuple[str, Tags], float]:
        """The gauge series this process keeps sending, with their values."""
        with self._lock:
            return dict(self._gauges)

    def refresh(self) -> None:
        """Re-send every gauge series (the refresher thread calls this)."""
        for (name, tags), value in self.gauges().items():
            try:
                self._metric(name).set(value, tags=dict(tags))
            except Exception as exc:  # noqa: BLE001 - metrics never fail the caller (logged once a metric)
                self._failure(name, exc)

    def _metric(self, name: str) -> Any:
        metric = self._metrics.get(name)
        if metric is None:
            with self._lock:
                metric = self._metrics.get(name)
                if metric is None:
                    metric = self._metrics[name] = self._build(self._catalog[name])
        return metric

    def _start_refresher(self) -> threading.Thread | None:
        period_s = self._refresh_s()
        if period_s is None:
            return None
        thread = threading.Thread(target=self._refresh_loop, args=(period_s,), name="samespace-gauges", daemon=True)
        thread.start()
        return thread

    def _refresh_loop(self, period_s: float) -> None:
        while True:
            time.sleep(period_s)
            self.refresh()

    def _failure(self, name: str, exc: Exception) -> None:
        if name in self._failed:
            log.debug("metric %s not recorded: %r", name, exc)
            return
        self._failed.add(name)
        log.warning("metric %s not recorded (logged once; the call carries on): %r", name, exc)


def _strings(tags: Mapping[str, object]) -> dict[str, str]:
    return {key: value if isinstance(value, str) else str(value) for key, value in tags.items()}


_recorder = MetricsRecorder(CATALOG)  # this process's metrics (Ray's are per process too)


def count(name: str, value: float = 1.0, /, **tags: object) -> None:
    """Add `value` (> 0; anything else is ignored) to a counter of the catalogue."""
    _recorder.count(name, value, tags)


def observe(name: str, value: float, /, **tags: object) -> None:
    """One observation of a histogram of the catalogue."""
    _recorder.observe(name, value, tags)


def set_gauge(name: str, value: float | None, /, **tags: object) -> None:
    """Set a gauge of the catalogue (kept exported); None stops exporting that series."""
    _recorder.set_gauge(name, value, tags)


# ---- embedding (the dispatcher actor) ------------------------------------------------------------


def record_landed(
    role: str, provider: str, provider_kind: str, policy: str, project: str, texts: int, batches: int = 1
) -> None:
    """`batches` batches, of `texts` rows in all, landed from `provider`."""
    tags = {"role": role, "provider": provider, "provider_kind": provider_kind, "policy": policy, "project": project}
    count(Metric.EMBED_TEXTS, texts, **tags)
    count(Metric.EMBED_BATCHES, batches, **tags)


def metered_embed(
    embed: Callable[[list[str]], Awaitable[np.ndarray]], role: str, provider: str, provider_kind: str
) -> Callable[[list[str]], Awaitable[np.ndarray]]:
    """`embed`, timing each call that answers and counting each that raises (by exception class)."""
    lane = {"role": role, "provider": provider, "provider_kind": provider_kind}

    async def call(texts: list[str]) -> np.ndarray:
        began = time.perf_counter()
        try:
            rows = await embed(texts)
        except Exception as exc:
            count(Metric.EMBED_FAILURES, 1, **lane, kind=failure_kind(exc))
            raise
        observe(Metric.EMBED_BATCH_SECONDS, time.perf_counter() - began, **lane)
        return rows

    return call


_verdicts = OneHot()


def publish_gate(role: str, reports: Iterable[GateReport]) -> None:
    """Each provider's latest verdict as 1, the verdict it had before as 0."""
    try:
        latest: dict[str, GateReport] = {}
        for report in reports:
            held = latest.get(report.key.provider)
            if held is None or report.checked_at >= held.checked_at:
                latest[report.key.provider] = report
        for provider, report in latest.items():
            key = {"role": role, "provider": provider}
            for verdict, value in _verdicts.move(key, report.verdict.value):
                set_gauge(Metric.GATE_VERDICT, value, **key, verdict=verdict)
    except Exception as exc:  # noqa: BLE001 - metrics never fail the caller
        log.warning("gate verdicts not published: %r", exc)


async def gate_metrics_loop(role: str, reports: Callable[[], Iterable[GateReport]]) -> None:
    """Publish a dispatcher's verdicts every GATE_PUBLISH_S while it lives (verdicts change inside calls)."""
    while True:
        publish_gate(role, reports())
        await asyncio.sleep(GATE_PUBLISH_S)


# ---- the cloud budget and spend (the budget actor) -----------------------------------------------


class BudgetPublisher:
    """The budget's snapshot as metrics: gauges as they are, counters by what grew since the last look."""

    def __init__(self) -> None:
        self._requests = 0
        self._rate_limited = 0
        self._state = OneHot()
        self._source: str | None = None

    def publish(self, snapshot: BudgetSnapshot, now: float) -> None:
        """`now` on the clock of the snapshot's `cooldown_until` (the controller's: monotonic)."""
        try:
            self._publish(snapshot, now)
        except Exception as exc:  # noqa: BLE001 - metrics never fail the caller
            log.warning("budget metrics not published: %r", exc)

    def _publish(self, snapshot: BudgetSnapshot, now: float) -> None:
        from cluster.cloud.budget import Priority

        if snapshot.requests < self._requests or snapshot.rate_limited < self._rate_limited:
            self._requests = self._rate_limited = 0  # a new controller counts from 0 again
        count(Metric.BUDGET_PERMITS_GRANTED, snapshot.requests - self._requests)
        count(Metric.BUDGET_RATE_LIMITED, snapshot.rate_limited - self._rate_limited)
        self._requests, self._rate_limited = snapshot.requests, snapshot.rate_limited
        set_gauge(Metric.BUDGET_IN_FLIGHT, snapshot.in_flight)
        set_gauge(Metric.BUDGET_CEILING_PERMITS, snapshot.ceiling)
        set_gauge(Metric.BUDGET_EFFECTIVE_PERMITS, snapshot.effective)
        for priority in Priority:
            waiting = sum(by_priority.get(priority.value, 0) for by_priority in snapshot.waiting.values())
            set_gauge(Metric.BUDGET_WAITING, waiting, priority=priority.value)
        left = 0.0 if snapshot.cooldown_until is None else max(0.0, snapshot.cooldown_until - now)
        set_gauge(Metric.BUDGET_COOLDOWN_SECONDS, left)
        source = snapshot.source.value
        if self._source is not None and (self._source != source or snapshot.window_rpm is None):
            set_gauge(Metric.BUDGET_WINDOW_RPM, None, source=self._source)
        self._source = source if snapshot.window_rpm is not None else None
        set_gauge(Metric.BUDGET_WINDOW_RPM, snapshot.window_rpm, source=source)
        for state, value in self._state.move({}, snapshot.state.value):
            set_gauge(Metric.BUDGET_STATE, value, state=state)


async def budget_metrics_loop(
    snapshot: Callable[[], BudgetSnapshot],
    spend: Callable[[], SpendView] | None = None,
    clock: Callable[[], float] = time.monotonic,
    period_s: float = BUDGET_PUBLISH_S,
) -> None:
    """Publish the budget, and today's spend per role, every `period_s` while the actor lives (the
    cooldown's seconds move alone; the spend starts again at 00:00 UTC without a call)."""
    publisher = BudgetPublisher()
    while True:
        publisher.publish(snapshot(), clock())
        for role, view in (spend().roles if spend is not None else {}).items():
            publish_spend(role.value, view.spent, view.cap)
        await asyncio.sleep(period_s)


def publish_spend(role: str, credits: float, cap: float | None) -> None:
    """A role's cloud spend today and its daily cap, in credits (None: no cap, and no cap series)."""
    set_gauge(Metric.CLOUD_SPEND_CREDITS, credits, role=role)
    set_gauge(Metric.CLOUD_SPEND_CAP_CREDITS, cap, role=role)


# ---- reindex (the index actor and the job's driver) ----------------------------------------------


def publish_progress(index: str, done: int, total: int) -> None:
    """Chunks written to the index's latest build, and how many it will hold."""
    set_gauge(Metric.REINDEX_CHUNKS_DONE, done, index=index)
    set_gauge(Metric.REINDEX_CHUNKS_PLANNED, total, index=index)


def record_commit(index: str, embedded: int, reused: int, seconds: float | None) -> None:
    """A build committed: its chunks by source, its progress complete, how long it took."""
    count(Metric.REINDEX_CHUNKS, embedded, index=index, source="embedded")
    count(Metric.REINDEX_CHUNKS, reused, index=index, source="reused")
    publish_progress(index, embedded + reused, embedded + reused)
    if seconds is not None:
        set_gauge(Metric.REINDEX_LAST_DURATION_SECONDS, seconds, index=index)


def forget_index(index: str) -> None:
    """An index was removed: stop exporting its gauges."""
    for name in (Metric.REINDEX_CHUNKS_DONE, Metric.REINDEX_CHUNKS_PLANNED, Metric.REINDEX_LAST_DURATION_SECONDS):
        set_gauge(name, None, index=index)


def record_reindex(index: str, seconds: float, ok: bool) -> None:
    """A reindex job's run ended (the driver records it; Ray flushes it as the driver exits)."""
    observe(Metric.REINDEX_DURATION_SECONDS, seconds, index=index, outcome="ok" if ok else "failed")


# ---- the MCP replicas ------------------------------------------------------------------------------


def record_tool(tool: str, outcome: str, seconds: float) -> None:
    """One MCP tool call: `outcome` ok, error (answered as a tool error) or failed (raised)."""
    count(Metric.MCP_TOOL_CALLS, 1, tool=tool, outcome=outcome)
    observe(Metric.MCP_TOOL_SECONDS, seconds, tool=tool, outcome=outcome)


def record_ask(result: AskResult) -> None:
    """One answered ask: its mode, its rounds, each fallback's stage, its time."""
    try:
        produced = result.produced
        count(Metric.ASKS, 1, mode=produced.mode)
        count(Metric.ASK_ROUNDS, produced.rounds)
        for fallback in produced.fallbacks:
            count(Metric.ASK_FALLBACKS, 1, stage=fallback_stage(fallback))
        observe(Metric.ASK_SECONDS, produced.timings.total_ms / 1000.0, mode=produced.mode)
    except Exception as exc:  # noqa: BLE001 - metrics never fail the caller
        log.warning("ask metrics not recorded: %r", exc)
