"""What a person reads from the command line: `samespace status` as tables (`--json`: the admin API's raw
answers, as before), and a failing command as one line that says what to do, never a traceback. Against a
real HTTP stub of the admin app (tests/support/fakes/admin_stub.py) with a recorded status; the tables themselves:
test_status_table.py."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from samespace.cli import main
from samespace.state import ROOT
from tests.support.fakes.admin_stub import ADMIN_TOKEN, RECORDED_STATUS, serve_admin_stub


@pytest.fixture(autouse=True)
def _no_ambient_token_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """These commands name their state folder; an ambient SAMESPACE_ADMIN__TOKEN_FILE (a user's, or one
    an earlier test in the session left) would take precedence over it."""
    monkeypatch.delenv("SAMESPACE_ADMIN__TOKEN_FILE", raising=False)


@pytest.fixture
def admin_stub() -> Iterator[str]:
    with serve_admin_stub() as url:
        yield url


# --- status: a table for a person, --json for the raw answers ----------------------------------------------


def _status(admin_stub: str, tmp_path: Path, *flags: str) -> int:
    token_file = tmp_path / "admin-token"
    token_file.write_text(ADMIN_TOKEN)
    return main(["status", *flags, "--address", admin_stub, "--state-dir", str(tmp_path)])


def test_status_prints_the_tables_a_person_reads(
    admin_stub: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _status(admin_stub, tmp_path) == 0
    printed = (ROOT / "tests" / "support" / "fakes" / "admin_status.txt").read_text(encoding="utf-8")
    assert capsys.readouterr().out == printed


def test_status_json_prints_the_raw_answers_as_before(
    admin_stub: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _status(admin_stub, tmp_path, "--json") == 0
    raw = {"providers": RECORDED_STATUS["providers"], "budget": RECORDED_STATUS["budget"]}
    (problem,) = RECORDED_STATUS["health"]["problems"]
    assert capsys.readouterr().out == json.dumps(raw, indent=2) + f"\n\n{problem}\n"


# --- a failing command: one line that says what to do -----------------------------------------------------


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port bound and never listening while the test runs: a connection to it is refused, and no other
    server can take it meanwhile (a port closed at once could be handed to one)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        yield int(probe.getsockname()[1])


def _one_line_failure(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 1
    printed = capsys.readouterr()
    assert printed.err.count("\n") == 1 and "Traceback" not in printed.err, printed.err
    return printed.err


def test_an_unreachable_cluster_is_one_line_naming_samespace_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], refused_port: int
) -> None:
    address = f"http://127.0.0.1:{refused_port}"
    (tmp_path / "admin-token").write_text(ADMIN_TOKEN)
    for command in (["status"], ["search", "where is the retry"]):
        state = ["--state-dir", str(tmp_path)] if command == ["status"] else []
        line = _one_line_failure([*command, "--address", address, *state], capsys)
        assert line.startswith(f"samespace {command[0]}: cannot reach {address}/") and "`samespace run`" in line


def test_a_refused_or_missing_admin_token_is_one_line_saying_where_the_token_is(
    admin_stub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SAMESPACE_ADMIN__TOKEN", raising=False)
    (tmp_path / "admin-token").write_text("not-the-admin-token")
    line = _one_line_failure(["status", "--address", admin_stub, "--state-dir", str(tmp_path)], capsys)
    assert "refused the token (401)" in line and "--state-dir" in line and "not-the-admin-token" not in line
    empty = tmp_path / "empty"
    line = _one_line_failure(["status", "--address", admin_stub, "--state-dir", str(empty)], capsys)
    assert f"no admin token ({empty / 'admin-token'} does not exist)" in line and "`samespace run`" in line
