"""bench.search_load's pure parts: process names, /proc memory, summaries, ratios, the acceptance checks.

No Ray and no servers, except the one slow test that starts bench.single_process and calls its tool.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from bench.load_clients import client_offsets
from bench.load_servers import QUERY_CACHE_TTL_S, run_env
from bench.process_memory import (
    Memory,
    MemoryTrace,
    ProcessMemory,
    aggregate_by_name,
    cpu_per_call,
    descendants,
    parse_smaps_rollup,
    parse_stat_cpu_s,
    process_name,
)
from bench.search_load import MAX_SAMESPACE_RSS_BYTES, Check, compare, evaluate, load_summary, markdown_table
from cluster.settings import SamespaceSettings
from samespace.head import free_port

ROOT = Path(__file__).resolve().parents[3]
ROLLUP = """\
564856d0a000-7fff35925000 ---p 00000000 00:00 0                          [rollup]
Rss:                1772 kB
Pss:                 250 kB
Pss_Dirty:           108 kB
Shared_Clean:       1624 kB
Shared_Dirty:          0 kB
Private_Clean:        40 kB
Private_Dirty:       108 kB
"""
MiB = 1024 * 1024


def side(qps: float, p50_ms: float, p99_ms: float = 0.0) -> dict[str, float]:
    return {"qps": qps, "p50_ms": p50_ms, "p99_ms": p99_ms}


def rows(*figures: tuple[int, float, float, float, float]) -> list[dict[str, object]]:
    """(clients, samespace q/s, samespace p50, single q/s, single p50) → comparison rows."""
    return [compare(n, side(sq, sp), side(oq, op)) for n, sq, sp, oq, op in figures]


def test_smaps_rollup_gives_rss_pss_and_private_pages_in_bytes() -> None:
    assert parse_smaps_rollup(ROLLUP) == Memory(rss=1772 * 1024, pss=250 * 1024, uss=(40 + 108) * 1024)


def test_text_without_an_rss_line_is_not_a_rollup() -> None:
    with pytest.raises(ValueError, match="Rss"):
        parse_smaps_rollup("Name: raylet\nState: S\n")


@pytest.mark.parametrize(
    ("cmdline", "name"),
    [
        (["ray::IndexActor.search()"], "ray::IndexActor"),
        (["ray::samespace-index:IndexActor.__init__"], "ray::samespace-index:IndexActor"),
        (["ray::ServeReplica:mcp:McpIngress"], "ray::ServeReplica:mcp:McpIngress"),
        (["ray::IDLE                    "], "ray::IDLE"),
        (["/venv/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet", "--raylet_socket_name=x"], "raylet"),
        (["/venv/bin/python", "/venv/lib/ray/dashboard/dashboard.py", "--host=127.0.0.1"], "dashboard.py"),
        (["/venv/bin/python", "-u", "/venv/lib/ray/_private/runtime_env/agent/main.py"], "agent/main.py"),
        (["/venv/bin/python3.11", "-m", "bench.single_process", "--port", "1"], "-m bench.single_process"),
        (
            ["ray-dashboard-JobHead-0 (/venv/bin/python -c from multiprocessing.forkserver import main)"],
            "ray-dashboard-JobHead",
        ),
        (
            ["/venv/bin/python", "-c", "from multiprocessing.forkserver import main; main(3, 4, ['x'])"],
            "-c from multiprocessing.forkserver import main",
        ),
        (["/venv/bin/python", "-m"], "python"),
    ],
)
def test_a_process_is_named_by_its_ray_title_program_or_script(cmdline: list[str], name: str) -> None:
    assert process_name(cmdline, comm="fallback") == name


def test_a_process_without_a_command_line_is_named_by_its_comm() -> None:
    assert process_name([], comm="kworker") == "kworker"


def test_descendants_are_the_roots_and_everything_below_them_only() -> None:
    parents = {10: 1, 11: 10, 12: 11, 13: 10, 20: 1, 21: 20}
    assert descendants([10], parents) == {10, 11, 12, 13}
    assert descendants([10, 21], parents) == {10, 11, 12, 13, 21}


def test_same_name_processes_are_summed_with_a_count_largest_first() -> None:
    processes = [
        ProcessMemory(1, "ray::IDLE", Memory(rss=100 * MiB, pss=50 * MiB, uss=40 * MiB)),
        ProcessMemory(2, "raylet", Memory(rss=30 * MiB, pss=20 * MiB, uss=10 * MiB)),
        ProcessMemory(3, "ray::IDLE", Memory(rss=100 * MiB, pss=50 * MiB, uss=40 * MiB)),
    ]
    table = aggregate_by_name(processes)
    assert [(r["process"], r["count"]) for r in table] == [("ray::IDLE", 2), ("raylet", 1)]
    assert table[0]["rss_mb"] == round(200 * MiB / 1e6, 1)
    assert table[0]["pss_mb"] == round(100 * MiB / 1e6, 1)
    assert table[1]["uss_mb"] == round(10 * MiB / 1e6, 1)


def test_the_trace_keeps_each_totals_peak_and_the_last_snapshot() -> None:
    trace = MemoryTrace()
    trace.add([ProcessMemory(1, "a", Memory(rss=10, pss=8, uss=2)), ProcessMemory(2, "b", Memory(rss=5, pss=1, uss=1))])
    trace.add([ProcessMemory(1, "a", Memory(rss=12, pss=3, uss=1))])
    assert trace.peak == Memory(rss=15, pss=9, uss=3)
    assert [p.pid for p in trace.last] == [1]
    assert trace.samples == 2


def test_a_load_summary_counts_calls_over_the_window_and_reads_percentiles() -> None:
    latencies = [0.010] * 98 + [0.200, 0.200]
    summary = load_summary(latencies, elapsed_s=4.0)
    assert summary["qps"] == 25.0
    assert summary["calls"] == 100
    assert summary["p50_ms"] == 10.0
    assert summary["p99_ms"] == 200.0
    assert summary["mean_ms"] == pytest.approx(13.8)
    assert summary["errors"] == 0


def test_a_load_summary_needs_calls() -> None:
    with pytest.raises(ValueError, match="at least one call"):
        load_summary([], elapsed_s=1.0)


def test_the_ratios_are_samespace_over_the_single_process() -> None:
    row = compare(4, side(30.0, 120.0), side(60.0, 40.0))
    assert row["qps_ratio"] == 0.5
    assert row["p50_ratio"] == 3.0


def test_clients_start_spread_over_the_query_list() -> None:
    assert client_offsets(100, 1) == [0]
    assert client_offsets(100, 4) == [0, 25, 50, 75]
    assert len(set(client_offsets(10, 8))) == 8


def test_no_clients_have_no_offsets() -> None:
    with pytest.raises(ValueError, match="one client"):
        client_offsets(100, 0)


def test_figures_that_meet_the_issue_pass_every_check() -> None:
    checks = evaluate(rows((1, 50, 30, 60, 16), (4, 60, 70, 70, 60), (8, 61, 130, 70, 120)), 2_000_000_000)
    assert [c.verdict for c in checks] == ["PASS"] * 5


def test_the_issues_before_figures_fail_every_check() -> None:
    before = rows((1, 16.2, 58, 60.7, 15.5), (4, 29.3, 127, 68.1, 56), (8, 20.9, 362, 51.4, 148))
    checks = evaluate(before, 4_150_000_000)
    assert [c.verdict for c in checks] == ["FAIL"] * 5
    assert "3.74" in checks[0].detail  # 58 / 15.5


def test_the_memory_check_passes_at_the_limit_and_fails_above_it() -> None:
    figures = rows((1, 50, 30, 60, 16))
    assert evaluate(figures, MAX_SAMESPACE_RSS_BYTES)[-1].passed is True
    assert evaluate(figures, MAX_SAMESPACE_RSS_BYTES + 1)[-1].passed is False


def test_checks_on_client_counts_that_did_not_run_are_skipped() -> None:
    checks = evaluate(rows((4, 60, 70, 70, 60)), None)
    assert [c.verdict for c in checks] == ["SKIP", "PASS", "SKIP", "SKIP", "SKIP"]
    assert Check("x", None, "not measured").verdict == "SKIP"


def test_the_table_has_both_sides_and_the_ratios() -> None:
    table = markdown_table([compare(8, side(20.9, 362, 578), side(51.4, 148, 220))])
    assert table.splitlines()[0].startswith("| clients | samespace q/s | p50 / p99 ms | single q/s")
    assert table.splitlines()[2] == "| 8 | 20.9 | 362.0 / 578.0 | 51.4 | 148.0 / 220.0 | 0.41 | 2.45 |"


def test_samespace_runs_with_the_makefiles_environment_its_own_state_and_no_cache_hits(tmp_path: Path) -> None:
    env = run_env({"PATH": "/usr/bin", "PYTEST_CURRENT_TEST": "x", "HOME": "/home/u"}, tmp_path, 8123)
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["RAY_USAGE_STATS_ENABLED"] == "0"
    assert env["SAMESPACE_STORE__DATA_DIR"] == str(tmp_path / "data")
    assert env["SAMESPACE_ADMIN__TOKEN_FILE"] == str(tmp_path / "admin-token")
    assert env["SAMESPACE_SERVE__PORT"] == "8123"
    assert env["PATH"].startswith(str(Path(sys.executable).parent))
    assert "PYTEST_CURRENT_TEST" not in env
    assert env["HOME"] == "/home/u"
    ttl = float(env["SAMESPACE_RLM__QUERY_CACHE_TTL_S"])
    assert ttl == QUERY_CACHE_TTL_S < 1e-3
    assert SamespaceSettings(rlm={"query_cache_ttl_s": ttl}).rlm.query_cache_ttl_s == ttl  # the settings accept it


@pytest.mark.slow
def test_the_single_process_answers_search_code_over_mcp(tmp_path: Path) -> None:
    from mcp import Client

    port = free_port()
    log = (tmp_path / "single.log").open("wb")
    repo = ROOT / "tests" / "fixtures" / "polyglot"
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.single_process", "--repo", str(repo), "--port", str(port)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 300
        while process.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).is_success:
                    break
            except httpx.TransportError:
                time.sleep(1)
        assert process.poll() is None, (tmp_path / "single.log").read_text()

        async def search() -> dict[str, object]:
            async with Client(f"http://127.0.0.1:{port}/mcp/") as client:
                result = await client.call_tool("search_code", {"query": "write a JSON file atomically", "k": 3})
                assert not result.is_error
                return result.structured_content or {}

        content = asyncio.run(search())
        hits = content["hits"]
        assert isinstance(hits, list)
        assert len(hits) == 3
        assert hits[0]["path"] == "pkg/storage.py"
        assert hits[0]["score"] >= hits[1]["score"] >= hits[2]["score"]
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def test_the_cpu_seconds_of_a_stat_line_are_user_plus_system_even_with_a_paren_in_the_name() -> None:
    stat = "4242 (ray::Index) Actor)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 30 0 100 0 0"
    assert parse_stat_cpu_s(stat, ticks_per_s=100.0) == 3.0  # (250 + 50) / 100


def test_cpu_per_call_counts_only_processes_alive_at_both_ends_by_name_busiest_first() -> None:
    before = {1: ("ray::IndexActor", 10.0), 2: ("ray::ProxyActor", 5.0), 3: ("ray::DispatcherActor", 1.0)}
    after = {1: ("ray::IndexActor", 10.5), 2: ("ray::ProxyActor", 5.2), 4: ("ray::DispatcherActor", 9.0)}
    assert cpu_per_call(before, after, calls=100) == [
        {"process": "ray::IndexActor", "cpu_ms_per_call": 5.0},
        {"process": "ray::ProxyActor", "cpu_ms_per_call": 2.0},
    ]
