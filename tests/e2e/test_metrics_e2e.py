"""samespace's metrics on Ray's Prometheus endpoint, after a real reindex job and real MCP calls.

The session's Ray exports on `ray_cluster.metrics_port`; its agent takes each process's metrics
every report interval (10 s), so every check waits for the value instead of reading it once. The
session's other tests reindex and call tools too: what this module checks is either keyed by its
own index name or compared before and after its own calls.
"""

from __future__ import annotations

import shutil

import pytest
import ray

from cluster.index.records import IndexRecord
from cluster.telemetry import Metric
from samespace.clients import call_tool, result_text
from tests.support.jobs import reindex
from tests.support.metrics import EXPORT_WAIT_S, Sample, counter, gauge, histogram_count, scrape, scraped_until, total
from tests.support.ray_cluster import FIXTURES, McpServer, RayCluster
from tests.support.waiting import wait_until_async

pytestmark = [pytest.mark.ray, pytest.mark.slow]

INDEX = "metrics-poly"
LOCAL_EMBEDDER = "samespace-embedder-cpu0"


@pytest.fixture(scope="module")
def indexed(ray_cluster: RayCluster, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory) -> IndexRecord:
    """The serving record of the index this module built (what index_status reports)."""
    from actors import get_index_actor

    repo = tmp_path_factory.mktemp("metrics") / "polyglot"
    shutil.copytree(FIXTURES / "polyglot", repo)
    reindex(ray_cluster, repo, INDEX)
    record: IndexRecord = ray.get(get_index_actor(ray_cluster.settings).record.remote(INDEX))  # type: ignore[arg-type]
    return record


def test_the_endpoint_serves_rays_and_samespaces_series(ray_cluster: RayCluster, indexed: IndexRecord) -> None:
    samples = scrape(ray_cluster)
    assert any(s.name.startswith("ray_node_") for s in samples)  # Ray's own, beside ours
    assert all(s.labels.get("SessionName") for s in samples if s.name.startswith("ray_samespace_"))


def test_the_texts_embedded_for_the_reindex_are_its_two_texts_per_chunk(
    ray_cluster: RayCluster, indexed: IndexRecord
) -> None:
    points = indexed.chunks
    assert points > 6 and indexed.embedded == points  # a fresh index: every chunk embedded, none reused
    landed = {"project": INDEX, "role": "code-embedding", "provider": LOCAL_EMBEDDER, "provider_kind": "local"}
    samples = scraped_until(
        ray_cluster,
        lambda s: total(s, counter(Metric.EMBED_TEXTS), project=INDEX) == 2 * points,  # its code text and its name text
        f"{counter(Metric.EMBED_TEXTS)}{{project={INDEX!r}}} == {2 * points}",
    )
    assert total(samples, counter(Metric.EMBED_TEXTS), **landed) == 2 * points
    assert total(samples, counter(Metric.EMBED_BATCHES), **landed) >= 1
    lane = {"role": "code-embedding", "provider": LOCAL_EMBEDDER, "provider_kind": "local"}
    assert total(samples, histogram_count(Metric.EMBED_BATCH_SECONDS), **lane) >= total(
        samples, counter(Metric.EMBED_BATCHES), **landed
    )
    chunks = scraped_until(
        ray_cluster,
        lambda s: total(s, counter(Metric.REINDEX_CHUNKS), index=INDEX, source="embedded") == points,
        f"{counter(Metric.REINDEX_CHUNKS)}{{index={INDEX!r}}} == {points}",
    )
    assert total(chunks, counter(Metric.REINDEX_CHUNKS), index=INDEX, source="reused") == 0


def test_the_reindex_progress_is_complete_and_its_duration_is_exported(
    ray_cluster: RayCluster, indexed: IndexRecord
) -> None:
    points = indexed.chunks

    def complete(s: list[Sample]) -> bool:
        done = total(s, gauge(Metric.REINDEX_CHUNKS_DONE), index=INDEX)
        return done == points == total(s, gauge(Metric.REINDEX_CHUNKS_PLANNED), index=INDEX)

    samples = scraped_until(ray_cluster, complete, f"chunks done == planned == {points} for {INDEX!r}")
    assert total(samples, gauge(Metric.REINDEX_LAST_DURATION_SECONDS), index=INDEX) > 0
    # The job's driver recorded its run as it exited; Ray keeps a histogram after its process is gone.
    ran = histogram_count(Metric.REINDEX_DURATION_SECONDS)
    samples = scraped_until(
        ray_cluster,
        lambda s: total(s, ran, index=INDEX, outcome="ok") == 1,
        f"{ran}{{index={INDEX!r}, outcome='ok'}} == 1",
    )
    assert total(samples, ran, index=INDEX, outcome="failed") == 0


def test_the_gate_verdict_of_the_local_embedder_is_exported(ray_cluster: RayCluster, indexed: IndexRecord) -> None:
    verdict = {"role": "code-embedding", "provider": LOCAL_EMBEDDER}
    samples = scraped_until(
        ray_cluster,
        lambda s: total(s, gauge(Metric.GATE_VERDICT), **verdict, verdict="verified") == 1,
        f"{gauge(Metric.GATE_VERDICT)}{{verdict='verified'}} == 1 for {LOCAL_EMBEDDER}",
    )
    others = [s for s in samples if s.name == gauge(Metric.GATE_VERDICT) and verdict.items() <= s.labels.items()]
    assert all(s.value == 0 for s in others if s.labels["verdict"] != "verified")


async def test_mcp_tool_calls_are_counted_per_tool_and_outcome(
    ray_cluster: RayCluster, mcp_server: McpServer, indexed: IndexRecord
) -> None:
    calls, seconds = counter(Metric.MCP_TOOL_CALLS), histogram_count(Metric.MCP_TOOL_SECONDS)
    before = scrape(ray_cluster)
    ok = {"tool": "search_code", "outcome": "ok"}
    error = {"tool": "search_code", "outcome": "error"}
    for query in ("edit distance between two strings", "retry with backoff", "debounce a callback"):
        result = await call_tool(mcp_server.url, "search_code", {"query": query, "k": 3, "repo": INDEX})
        assert not result.is_error, result_text(result)
    refused = await call_tool(mcp_server.url, "search_code", {"query": "x", "repo": "no-such-index"})
    assert refused.is_error

    def rose(s: list[Sample]) -> bool:
        return (
            total(s, calls, **ok) - total(before, calls, **ok) >= 3
            and total(s, calls, **error) - total(before, calls, **error) >= 1
        )

    def scraped() -> list[Sample] | None:
        samples = scrape(ray_cluster)
        return samples if rose(samples) else None

    after = await wait_until_async(scraped, timeout_s=EXPORT_WAIT_S, interval_s=1.0, what="search_code calls counted")
    assert total(after, calls, **ok) - total(before, calls, **ok) == 3
    assert total(after, calls, **error) - total(before, calls, **error) == 1
    assert total(after, seconds, **ok) - total(before, seconds, **ok) == 3


def test_the_budget_publishes_its_permits(ray_cluster: RayCluster) -> None:
    from actors.budget import get_budget_actor
    from cluster.cloud.budget import Outcome, Priority

    granted = counter(Metric.BUDGET_PERMITS_GRANTED)
    before = total(scrape(ray_cluster), granted)
    budget = get_budget_actor(ray_cluster.settings)  # type: ignore[arg-type]
    for _ in range(2):
        ticket = ray.get(budget.acquire.remote("metrics-e2e", Priority.BULK, 30.0))
        ray.get(budget.release.remote(ticket, 0.1, Outcome.OK))
    samples = scraped_until(  # both from one look at the budget after the releases
        ray_cluster,
        lambda s: total(s, granted) - before == 2 and total(s, gauge(Metric.BUDGET_IN_FLIGHT)) == 0,
        f"{granted} rose by the 2 permits taken, none in flight",
    )
    assert total(samples, gauge(Metric.BUDGET_CEILING_PERMITS)) >= 1
    assert {s.labels["priority"] for s in samples if s.name == gauge(Metric.BUDGET_WAITING)} == {"bulk", "interactive"}
