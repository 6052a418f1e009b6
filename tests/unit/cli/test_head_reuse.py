"""`samespace run` uses only the Ray head its state folder started, on the same ports, with token auth on."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import samespace.cluster_commands as cluster_commands
from samespace.cli import build_parser, run_plan
from samespace.cluster_commands import run
from samespace.head import HeadRecord, HeadSpec, free_port, listening_inodes, session_listens_on
from samespace.head_reuse import (
    HeadAction,
    HeadAuth,
    HeadProbe,
    auth_from_answers,
    dashboard_auth,
    decide_head,
    probe_head,
)
from samespace.state import ROOT

SPEC = HeadSpec(num_cpus=1, port=7001, dashboard_port=7002)
OURS = HeadRecord(session=4242, gcs_address=SPEC.gcs_address, dashboard_url=SPEC.dashboard_url)
FREE = HeadProbe(gcs_port_taken=False, dashboard_port_taken=False, recorded_alive=False, recorded_holds_ports=False)
RUNNING = HeadProbe(
    gcs_port_taken=True, dashboard_port_taken=True, recorded_alive=True, recorded_holds_ports=True, auth=HeadAuth.ON
)


def _probe(base: HeadProbe, **changes: Any) -> HeadProbe:
    return HeadProbe(**{**base.__dict__, **changes})


# --- the decision, as a pure function -----------------------------------------------------------------------


def test_free_ports_and_no_head_of_this_folder_start_one() -> None:
    assert decide_head(SPEC, None, FREE).action is HeadAction.START
    stale = HeadRecord(session=99, gcs_address=SPEC.gcs_address, dashboard_url=SPEC.dashboard_url)
    assert decide_head(SPEC, stale, FREE).action is HeadAction.START  # its session is gone


def test_this_folders_head_on_the_same_ports_with_token_auth_is_reused() -> None:
    decision = decide_head(SPEC, OURS, RUNNING)
    assert decision.action is HeadAction.REUSE
    assert "token auth on" in decision.reason


@pytest.mark.parametrize(
    ("record", "probe"),
    [
        (None, _probe(FREE, gcs_port_taken=True)),
        (None, _probe(FREE, gcs_port_taken=True, dashboard_port_taken=True)),
        (None, _probe(FREE, dashboard_port_taken=True)),
        # a stale record: its session is gone, and someone else's head holds the port now
        (
            HeadRecord(session=99, gcs_address=SPEC.gcs_address, dashboard_url=SPEC.dashboard_url),
            _probe(FREE, gcs_port_taken=True, dashboard_port_taken=True),
        ),
    ],
    ids=["gcs-port", "both-ports", "dashboard-port", "stale-record"],
)
def test_a_head_this_folder_did_not_start_is_refused_with_what_to_do(
    record: HeadRecord | None, probe: HeadProbe
) -> None:
    decision = decide_head(SPEC, record, probe)
    assert decision.action is HeadAction.REFUSE
    assert "did not start" in decision.reason
    assert "stop it, or pick free ports with --port and --dashboard-port" in decision.reason


@pytest.mark.parametrize(("auth", "said"), [(HeadAuth.OFF, "off"), (HeadAuth.UNKNOWN, "not confirmed")])
def test_this_folders_head_without_token_auth_is_refused(auth: HeadAuth, said: str) -> None:
    decision = decide_head(SPEC, OURS, _probe(RUNNING, auth=auth))
    assert decision.action is HeadAction.REFUSE
    assert f"token auth {said}" in decision.reason and "'samespace stop'" in decision.reason


def test_a_live_recorded_session_that_does_not_hold_the_ports_is_refused() -> None:
    # e.g. the session id was reused, or another process took the port while the head was half down
    decision = decide_head(SPEC, OURS, _probe(RUNNING, recorded_holds_ports=False, auth=HeadAuth.UNKNOWN))
    assert decision.action is HeadAction.REFUSE
    assert "'samespace stop'" in decision.reason


def test_this_folders_head_on_other_ports_is_neither_reused_nor_doubled() -> None:
    elsewhere = HeadRecord(session=4242, gcs_address="127.0.0.1:6379", dashboard_url="http://127.0.0.1:8265")
    decision = decide_head(SPEC, elsewhere, _probe(FREE, recorded_alive=True))
    assert decision.action is HeadAction.REFUSE
    assert "127.0.0.1:6379" in decision.reason and "--port and --dashboard-port" in decision.reason


# --- asking a dashboard about token auth ------------------------------------------------------------------------


def _dashboard(mode: httpx.Response | None, version_status: int) -> httpx.Client:
    def answer(request: httpx.Request) -> httpx.Response:
        assert "authorization" not in request.headers  # the probe sends no token
        if request.url.path == "/api/authentication_mode":
            return mode if mode is not None else httpx.Response(404)
        if request.url.path == "/api/version":
            return httpx.Response(version_status, json={"version": "2.60.0"})
        return httpx.Response(404)

    return httpx.Client(transport=httpx.MockTransport(answer))


@pytest.mark.parametrize(
    ("mode", "version_status", "auth"),
    [
        (httpx.Response(200, json={"authentication_mode": "token"}), 401, HeadAuth.ON),
        (httpx.Response(200, json={"authentication_mode": "disabled"}), 200, HeadAuth.OFF),
        (None, 200, HeadAuth.OFF),  # a Ray without the route, answering without a token
        (httpx.Response(200, json={"authentication_mode": "token"}), 200, HeadAuth.OFF),  # says token, is not
        (httpx.Response(200, text="not json"), 401, HeadAuth.UNKNOWN),
        (httpx.Response(200, json={"authentication_mode": "token"}), 500, HeadAuth.UNKNOWN),
    ],
    ids=["token", "disabled", "old-ray-open", "says-token-but-open", "garbled", "broken"],
)
def test_token_auth_is_on_only_when_the_dashboard_says_so_and_refuses_an_anonymous_call(
    mode: httpx.Response | None, version_status: int, auth: HeadAuth
) -> None:
    with _dashboard(mode, version_status) as client:
        assert dashboard_auth("http://127.0.0.1:7002", client) is auth


def test_a_dashboard_that_does_not_answer_is_unknown() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with httpx.Client(transport=httpx.MockTransport(refuse)) as client:
        assert dashboard_auth("http://127.0.0.1:7002", client) is HeadAuth.UNKNOWN
    assert auth_from_answers(httpx.Response(403), httpx.Response(403)) is HeadAuth.UNKNOWN


# --- real sockets standing in for a head ------------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP socket listening on 127.0.0.1, held by this process: a head that is not this folder's."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield int(server.getsockname()[1])


def test_the_listening_socket_of_a_port_is_found_in_procs_table(listener: int) -> None:
    table = Path("/proc/net/tcp").read_text()
    assert listening_inodes(table, listener)
    assert not listening_inodes(table, free_port())


def test_a_port_is_held_by_the_session_whose_process_listens_on_it(listener: int) -> None:
    assert session_listens_on(os.getsid(0), listener)
    assert not session_listens_on(os.getsid(0), free_port())
    code = "import socket,sys; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(); print(s.getsockname()[1]); "
    code += "sys.stdout.flush(); sys.stdin.read()"
    other = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert other.stdout is not None
        port = int(other.stdout.readline())
        assert session_listens_on(other.pid, port)
        assert not session_listens_on(os.getsid(0), port)  # someone else's session holds it
        assert not session_listens_on(other.pid, listener)
    finally:
        other.kill()
        other.wait()


def test_a_foreign_listener_on_the_gcs_port_is_refused_and_never_asked_anything(listener: int) -> None:
    spec = HeadSpec(num_cpus=1, port=listener, dashboard_port=free_port())
    asked: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        return httpx.Response(200)

    client = httpx.Client(transport=httpx.MockTransport(answer))
    # a record naming a session of its own: alive, but no GCS or raylet in it, and not the one on the port
    # (not this test's session: the suite's own Ray may run in it)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        record = HeadRecord(session=other.pid, gcs_address=spec.gcs_address, dashboard_url=spec.dashboard_url)
        for recorded in (None, record):
            probe = probe_head(spec, recorded, client)
            assert probe.gcs_port_taken and not probe.recorded_alive and not probe.recorded_holds_ports
            assert decide_head(spec, recorded, probe).action is HeadAction.REFUSE
    finally:
        other.kill()
        other.wait()
    assert asked == []


def test_run_refuses_a_foreign_head_before_it_deploys_or_pushes_anything(
    listener: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[list[str]] = []

    def record_run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        ran.append(argv)
        return subprocess.CompletedProcess(argv, 1)

    monkeypatch.setattr(cluster_commands.subprocess, "run", record_run)
    monkeypatch.setattr(cluster_commands, "start_head", lambda *a: pytest.fail("started a head"))
    repo, state = ROOT / "tests" / "fixtures" / "polyglot", tmp_path / "state"
    ports = ["--port", str(listener), "--dashboard-port", str(free_port())]
    args = build_parser().parse_args(["run", "--repo", str(repo), "--state-dir", str(state), *ports, "--serve-proxy"])
    plan = run_plan(args, {"PATH": "/usr/bin", "HOME": str(tmp_path)})
    with pytest.raises(SystemExit) as refused:
        run(plan, lambda argv: pytest.fail("talked to the MCP app"))
    assert isinstance(refused.value.code, str)
    assert f"port {listener} (Ray GCS) is in use" in refused.value.code
    assert "--port and --dashboard-port" in refused.value.code
    assert ran == []
    assert not (tmp_path / "state" / "ray-head.json").exists()
