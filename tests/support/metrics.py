"""Reading the session Ray's Prometheus endpoint in e2e tests: samespace's series, summed over processes."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from cluster.telemetry import CATALOG, exported_names
from tests.support.ray_cluster import RayCluster
from tests.support.waiting import wait_until

EXPORT_WAIT_S = 90.0  # Ray's agent takes a process's metrics every 10 s; a loaded machine is slower


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


def scrape(cluster: RayCluster) -> list[Sample]:
    url = f"http://127.0.0.1:{cluster.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return [
        Sample(s.name, dict(s.labels), float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def total(samples: list[Sample], series: str, **labels: str) -> float:
    """The sum over processes (every series carries its WorkerId) of the series matching `labels`."""
    return sum(s.value for s in samples if s.name == series and labels.items() <= s.labels.items())


def counter(name: str) -> str:
    return exported_names(CATALOG[name])[0]


def histogram_count(name: str) -> str:
    return next(n for n in exported_names(CATALOG[name]) if n.endswith("_count"))


def gauge(name: str) -> str:
    return exported_names(CATALOG[name])[0]


def scraped_until(cluster: RayCluster, holds: Callable[[list[Sample]], bool], what: str) -> list[Sample]:
    def check() -> list[Sample] | None:
        samples = scrape(cluster)
        return samples if holds(samples) else None

    found: list[Sample] = wait_until(check, timeout_s=EXPORT_WAIT_S, interval_s=1.0, what=what)
    return found
