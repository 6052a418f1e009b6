"""The audit log (cluster/auth/audit.py): one JSON line per record in a 0600 file, the query only under
audit.include_queries, rotation by size across `backups` files, appends from two processes that never
tear a line, reads newest first through the filters, and a write failure that never reaches the caller."""

from __future__ import annotations

import json
import logging
import multiprocessing
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cluster.auth import AuditLog, AuditQuery, AuditRecord, Principal
from cluster.settings import AuditSettings

NOON = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
ALICE = Principal(kind="oauth", subject="alice", client_id="claude-code", scopes=frozenset({"samespace:read"}))
SECRET_QUERY = "where is the payroll export that finance asked about"


def record(n: int = 0, **fields: Any) -> AuditRecord:
    values: dict[str, Any] = {
        "time": NOON + timedelta(seconds=n),
        "surface": "mcp",
        "action": "search_code",
        "indexes": ["shop"],
        "outcome": "ok",
        "ms": 12.5,
        "credits": 0.002,
        "query": SECRET_QUERY,
    }
    return AuditRecord.by(fields.pop("principal", ALICE), **{**values, **fields})


def audit_log(tmp_path: Path, **settings: Any) -> AuditLog:
    return AuditLog(tmp_path / "data" / "audit.jsonl", AuditSettings(**settings), clock=NOON.timestamp)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_record_is_one_json_line_in_a_0600_file_without_the_query(tmp_path: Path) -> None:
    log = audit_log(tmp_path)
    log.append(record(0))
    log.append(record(1, outcome="denied", principal=Principal.shared("token")))
    written = lines(log.path)
    assert written[0] == {
        "time": "2026-12-02T12:00:00Z",
        "subject": "alice",
        "client_id": "claude-code",
        "kind": "oauth",
        "surface": "mcp",
        "action": "search_code",
        "indexes": ["shop"],
        "outcome": "ok",
        "ms": 12.5,
        "credits": 0.002,
    }
    assert (written[1]["subject"], written[1]["kind"], written[1]["outcome"]) == ("token", "token", "denied")
    assert SECRET_QUERY not in log.path.read_text() and "query" not in log.path.read_text()
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
    assert log.now() == NOON


def test_the_query_is_kept_only_under_include_queries(tmp_path: Path) -> None:
    log = audit_log(tmp_path, include_queries=True)
    log.append(record())
    assert lines(log.path)[0]["query"] == SECRET_QUERY
    assert log.read(AuditQuery())[0].query == SECRET_QUERY


def test_a_disabled_log_writes_nothing(tmp_path: Path) -> None:
    log = audit_log(tmp_path, enabled=False)
    log.append(record())
    assert not log.path.exists()


def test_the_log_rotates_by_size_and_keeps_its_backups_newest_first(tmp_path: Path) -> None:
    log = audit_log(tmp_path, max_bytes=4096, backups=2)
    for n in range(200):
        log.append(record(n, action=f"tool_{n}"))
    files = sorted(p.name for p in log.path.parent.glob("audit.jsonl*") if not p.name.endswith(".lock"))
    assert files == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]  # the oldest rotated out
    assert all((log.path.parent / name).stat().st_size <= 4096 for name in files)
    assert all(stat.S_IMODE((log.path.parent / name).stat().st_mode) == 0o600 for name in files)
    kept = log.read(AuditQuery(limit=1000))
    actions = [r.action for r in kept]
    assert actions[0] == "tool_199" and 30 < len(actions) < 200
    assert actions == [f"tool_{n}" for n in range(199, 199 - len(actions), -1)]  # newest first, none skipped
    on_disk = sum(len(lines(log.path.parent / name)) for name in files)
    assert on_disk == len(kept)


def test_without_backups_the_log_starts_again(tmp_path: Path) -> None:
    log = audit_log(tmp_path, max_bytes=4096, backups=0)
    for n in range(100):
        log.append(record(n))
    assert sorted(p.name for p in log.path.parent.iterdir()) == ["audit.jsonl", "audit.jsonl.lock"]
    assert 0 < log.path.stat().st_size <= 4096


def _append_many(path: str, who: str, count: int, max_bytes: int) -> None:
    log = AuditLog(Path(path), AuditSettings(max_bytes=max_bytes, backups=50), clock=NOON.timestamp)
    for n in range(count):
        log.append(record(n, principal=Principal(kind="oauth", subject=who), action=f"{who}-{n}", indexes=["x" * 40]))


@pytest.mark.parametrize("max_bytes", [16 * 1024 * 1024, 8192])
def test_two_processes_appending_at_once_never_tear_or_lose_a_line(tmp_path: Path, max_bytes: int) -> None:
    path = tmp_path / "data" / "audit.jsonl"
    path.parent.mkdir()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_append_many, args=(str(path), who, 300, max_bytes)) for who in ("p", "q")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    log = AuditLog(path, AuditSettings(max_bytes=max_bytes, backups=50), clock=NOON.timestamp)
    found = log.read(AuditQuery(limit=1000))
    assert sorted(r.action for r in found) == sorted(f"{who}-{n}" for who in ("p", "q") for n in range(300))
    raw = [line for p in path.parent.glob("audit.jsonl*") if not p.name.endswith(".lock") for line in lines(p)]
    assert len(raw) == 600  # every line parsed as JSON: none torn
    for who in ("p", "q"):  # each writer's lines in its own order, newest first
        mine = [int(r.action.split("-")[1]) for r in found if r.subject == who]
        assert mine == sorted(mine, reverse=True)


def test_every_filter_narrows_the_answer(tmp_path: Path) -> None:
    log = audit_log(tmp_path)
    bob = Principal(kind="oauth", subject="bob")
    log.append(record(0, action="search_code", indexes=["shop"]))
    log.append(record(10, action="grep_code", indexes=["api", "shop"], principal=bob))
    log.append(record(20, action="PUT /admin/budget/caps", surface="admin", indexes=[], outcome="error"))
    log.append(record(30, action="search_code", outcome="quota", principal=bob))

    def actions(**query: Any) -> list[tuple[str, int]]:
        return [(r.action, int((r.time - NOON).total_seconds())) for r in log.read(AuditQuery(**query))]

    assert actions() == [("search_code", 30), ("PUT /admin/budget/caps", 20), ("grep_code", 10), ("search_code", 0)]
    assert actions(subject="bob") == [("search_code", 30), ("grep_code", 10)]
    assert actions(action="search_code") == [("search_code", 30), ("search_code", 0)]
    assert actions(outcome="quota") == [("search_code", 30)]
    assert actions(index="api") == [("grep_code", 10)]
    assert actions(since=NOON + timedelta(seconds=10), until=NOON + timedelta(seconds=20)) == [
        ("PUT /admin/budget/caps", 20),
        ("grep_code", 10),
    ]
    assert actions(limit=1) == [("search_code", 30)]
    assert actions(subject="bob", outcome="ok") == [("grep_code", 10)]


def test_a_line_that_does_not_parse_is_skipped(tmp_path: Path) -> None:
    log = audit_log(tmp_path)
    log.append(record(0))
    with log.path.open("a") as torn:
        torn.write('{"time": "not a time"}\nnot json at all\n')
    log.append(record(1))
    assert [r.time for r in log.read(AuditQuery())] == [NOON + timedelta(seconds=1), NOON]


def test_a_write_failure_is_logged_once_and_never_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("a file where the log's folder should be")
    log = audit_log(tmp_path)
    with caplog.at_level(logging.WARNING, logger="samespace.audit"):
        log.append(record(0))
        log.append(record(1))
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "not written" in caplog.records[0].message and len(caplog.records) == 1
    assert log.read(AuditQuery()) == []  # and a read answers nothing rather than raising
