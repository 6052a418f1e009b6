"""bench.soak's pure parts: the mix scheduler, the call log, the per-minute table and the 10 % verdict. No Ray."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.process_memory import Memory, ProcessMemory
from bench.soak_mix import KINDS, CallLog, MixScheduler, max_calls, weighted_cycle
from bench.soak_verdicts import (
    MinuteSample,
    Verdict,
    minute_markdown,
    minute_table,
    name_verdicts,
    overall,
    process_verdicts,
    verdict_markdown,
    within_growth,
)

MB = 1_000_000


def proc(name: str, pid: int, rss_mb: float, pss_mb: float | None = None) -> ProcessMemory:
    pss = rss_mb / 2 if pss_mb is None else pss_mb
    return ProcessMemory(pid=pid, name=name, memory=Memory(rss=int(rss_mb * MB), pss=int(pss * MB)))


def by_key(verdicts: list[Verdict]) -> dict[tuple[str, int | None], Verdict]:
    return {(v.process, v.pid): v for v in verdicts}


# The mix.


def test_weighted_cycle_spreads_each_kind_by_its_weight() -> None:
    assert weighted_cycle({"a": 2, "b": 1}) == ["a", "b", "a"]
    cycle = weighted_cycle({"search_code": 6, "read_code": 2, "index_status": 1})
    assert Counter(cycle) == {"search_code": 6, "read_code": 2, "index_status": 1}
    assert all(cycle[i] != "read_code" or cycle[i + 1] != "read_code" for i in range(len(cycle) - 1))


def test_weighted_cycle_refuses_a_zero_weight() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        weighted_cycle({"a": 1, "b": 0})


def test_scheduler_turns_reads_into_searches_until_a_hit_is_known() -> None:
    scheduler = MixScheduler(["read_code", "search_code"], ask_every_s=60, first_ask_s=1000, limit=10)
    assert scheduler.next_kind(0.0, have_hit=False) == "search_code"  # a read with nothing to read
    assert scheduler.next_kind(0.1, have_hit=False) == "search_code"
    assert scheduler.next_kind(0.2, have_hit=True) == "read_code"


def test_scheduler_asks_when_due_and_skips_missed_asks_instead_of_bursting() -> None:
    scheduler = MixScheduler(["search_code"], ask_every_s=10, first_ask_s=5, limit=100)
    assert scheduler.next_kind(4.9, True) == "search_code"
    assert scheduler.next_kind(5.0, True) == "ask_code"
    assert scheduler.next_kind(6.0, True) == "search_code"  # the next ask is due at 15
    assert scheduler.next_kind(37.0, True) == "ask_code"  # 15, 25 and 35 were missed: one ask, not three
    assert scheduler.next_kind(38.0, True) == "search_code"
    assert scheduler.next_kind(44.9, True) == "search_code"
    assert scheduler.next_kind(45.0, True) == "ask_code"


def test_scheduler_stops_at_its_limit() -> None:
    scheduler = MixScheduler(["search_code", "index_status"], ask_every_s=60, first_ask_s=1000, limit=3)
    kinds = [scheduler.next_kind(float(i), True) for i in range(5)]
    assert kinds == ["search_code", "index_status", "search_code", None, None]
    assert scheduler.scheduled == 3


def test_max_calls_bounds_a_client_by_its_interval_and_its_asks() -> None:
    assert max_calls(minutes=2, interval_s=0.5, ask_every_s=60) == 240 + 2 + 1


# The call log.


def test_call_log_summarises_calls_errors_by_name_and_percentiles_per_kind() -> None:
    log = CallLog()
    for i in range(1, 101):
        log.record(1.0, "search_code", i / 1000)  # 1..100 ms
    log.record(2.0, "search_code", 5.0, "ToolError", "index 'load' is missing")
    log.record(2.0, "search_code", 5.0, "ToolError", "again")
    log.record(3.0, "ask_code", 0.2, outcome="citations-only")
    log.record(61.0, "ask_code", 0.3, "UnexpectedAskMode", "mode 'no-evidence'", outcome="no-evidence")
    log.record(61.5, "session", 0.1, "ConnectError", "refused")
    summary = log.summary()
    assert list(summary) == [*KINDS, "session"]
    search = summary["search_code"]
    assert (search["calls"], search["ok"], search["errors"]) == (102, 100, {"ToolError": 2})
    assert (search["p50_ms"], search["p99_ms"]) == (51.0, 99.0)  # over the calls that succeeded only
    assert search["error_messages"]["ToolError"] == ["index 'load' is missing", "again"]
    assert summary["ask_code"]["outcomes"] == {"citations-only": 1, "no-evidence": 1}
    assert summary["ask_code"]["errors"] == {"UnexpectedAskMode": 1}
    assert summary["read_code"] == {
        "calls": 0,
        "ok": 0,
        "errors": {},
        "error_messages": {},
        "p50_ms": None,
        "p99_ms": None,
        "outcomes": {},
    }
    assert log.errors() == 4
    minutes = log.per_minute(2)
    assert minutes[0]["search_code"]["calls"] == 102 and minutes[1]["search_code"]["calls"] == 0
    assert minutes[1]["ask_code"] == {"calls": 1, "errors": 1, "p50_ms": None}


# The per-minute table.


SAMPLES = [
    MinuteSample(0, 0.1, (proc("raylet", 10, 100), proc("ray::IdleWorker", 20, 50))),
    MinuteSample(1, 60.2, (proc("raylet", 10, 110), proc("ray::IdleWorker", 20, 50), proc("ray::IdleWorker", 21, 40))),
    MinuteSample(2, 121.0, (proc("raylet", 10, 120), proc("ray::IdleWorker", 21, 45))),
]


def test_minute_table_has_a_row_per_process_with_its_rss_at_every_minute() -> None:
    rows = {(row["process"], row["pid"]): row for row in minute_table(SAMPLES)}
    assert set(rows) == {("raylet", 10), ("ray::IdleWorker", 20), ("ray::IdleWorker", 21)}
    assert rows[("raylet", 10)]["rss_mb"] == [100.0, 110.0, 120.0]
    assert rows[("raylet", 10)]["pss_mb"] == [50.0, 55.0, 60.0]
    assert rows[("ray::IdleWorker", 20)]["rss_mb"] == [50.0, 50.0, None]  # gone at minute 2
    assert rows[("ray::IdleWorker", 21)]["rss_mb"] == [None, 40.0, 45.0]  # born at minute 1
    assert rows[("raylet", 10)]["minutes"] == [0, 1, 2]


def test_minute_table_by_name_sums_same_name_processes_and_counts_them() -> None:
    rows = {row["process"]: row for row in minute_table(SAMPLES, by_name=True)}
    assert rows["ray::IdleWorker"]["rss_mb"] == [50.0, 90.0, 45.0]
    assert rows["ray::IdleWorker"]["count"] == [1, 2, 1]
    assert "pid" not in rows["raylet"]
    table = minute_markdown(minute_table(SAMPLES, by_name=True))
    assert table.splitlines()[0] == "| process | m0 | m1 | m2 |"
    assert "| ray::IdleWorker | 50 | 90 (x2) | 45 |" in table
    assert "| raylet | 100 | 110 | 120 |" in table
    assert "| raylet | 10 | 100 | 110 | 120 |" in minute_markdown(minute_table(SAMPLES))


# The 10 % verdict.


def test_within_growth_allows_ten_percent_and_any_drop() -> None:
    assert within_growth(1000, 1100)
    assert not within_growth(1000, 1101)
    assert within_growth(1000, 500)
    assert within_growth(0, 0)
    assert not within_growth(0, 1)
    assert within_growth(1000, 1200, tolerance=0.25)


def test_process_verdicts_compare_each_pid_at_both_minutes() -> None:
    baseline = [proc("raylet", 10, 100), proc("ray::IndexActor", 11, 400)]
    last = [proc("raylet", 10, 110), proc("ray::IndexActor", 11, 441)]
    verdicts = by_key(process_verdicts(baseline, last))
    raylet, index = verdicts[("raylet", 10)], verdicts[("ray::IndexActor", 11)]
    assert (raylet.status, raylet.verdict, raylet.passed) == ("compared", "PASS", True)
    assert raylet.ratio == pytest.approx(1.10)
    assert (index.verdict, index.baseline_rss, index.last_rss) == ("FAIL", 400 * MB, 441 * MB)
    assert overall(verdicts.values()) is False
    assert overall([raylet]) is True


def test_process_verdicts_report_new_restarted_and_gone_processes_not_drop_them() -> None:
    baseline = [proc("ray::EmbedderActor", 30, 900), proc("-m jobs.reindex", 40, 300), proc("raylet", 10, 100)]
    last = [proc("ray::EmbedderActor", 31, 2000), proc("ray::DispatcherActor", 50, 200), proc("raylet", 10, 100)]
    verdicts = by_key(process_verdicts(baseline, last))
    assert set(verdicts) == {
        ("ray::EmbedderActor", 31),
        ("ray::DispatcherActor", 50),
        ("-m jobs.reindex", 40),
        ("raylet", 10),
    }
    restarted = verdicts[("ray::EmbedderActor", 31)]
    assert (restarted.verdict, restarted.previous_pid, restarted.passed) == ("RESTARTED", 30, None)
    assert (restarted.baseline_rss, restarted.last_rss) == (900 * MB, 2000 * MB)
    new = verdicts[("ray::DispatcherActor", 50)]
    assert (new.verdict, new.baseline_rss, new.last_rss, new.ratio) == ("NEW", None, 200 * MB, None)
    gone = verdicts[("-m jobs.reindex", 40)]
    assert (gone.verdict, gone.last_rss) == ("GONE", None)
    assert overall(verdicts.values()) is True  # only raylet was compared, and it held
    assert overall([restarted, new, gone]) is None  # nothing compared: not measured
    table = verdict_markdown(list(verdicts.values()), 5, 20)
    assert table.splitlines()[0].startswith("| process | pid | RSS m5 | RSS m20 | ratio |")
    assert "| ray::EmbedderActor | 31 | 900 | 2000 | 2.22 | 450 | 1000 | RESTARTED | pid 30 → 31 |" in table
    assert "| ray::DispatcherActor | 50 | - | 200 | - | - | 100 | NEW |  |" in table


def test_name_verdicts_sum_same_name_processes_so_a_growing_pool_fails() -> None:
    baseline = [proc("ray::IdleWorker", 20, 100), proc("raylet", 10, 100)]
    last = [proc("ray::IdleWorker", 21, 100), proc("ray::IdleWorker", 22, 100), proc("raylet", 10, 100)]
    verdicts = by_key(name_verdicts(baseline, last))
    pool = verdicts[("ray::IdleWorker", None)]
    assert (pool.verdict, pool.counts, pool.ratio) == ("FAIL", (1, 2), 2.0)
    assert verdicts[("raylet", None)].verdict == "PASS"
    assert overall(verdicts.values()) is False
    assert "| ray::IdleWorker | - | 100 | 200 | 2.00 | 50 | 100 | FAIL | 1 → 2 processes |" in verdict_markdown(
        list(verdicts.values()), 1, 3
    )
    only_new = by_key(name_verdicts([], [proc("x", 1, 10)]))
    assert only_new[("x", None)].verdict == "NEW"
    only_gone = by_key(name_verdicts([proc("x", 1, 10)], []))
    assert only_gone[("x", None)].verdict == "GONE"
