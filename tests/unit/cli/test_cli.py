"""The `samespace` command line: parsing, help, secrets, and what each command would run (no Ray started)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from samespace.answers import format_answer
from samespace.cli import build_parser, main, run_plan
from samespace.cluster_commands import direct_ingress_fits, reindex_argv, run, write_serve_config
from samespace.head import HeadRecord, daemon_pids, ray_start_argv, session_members, stop_session
from samespace.state import ROOT, StateDir, cluster_env
from tests.support.fakes.admin_stub import ADMIN_TOKEN, AdminStub, serve_admin_stub

COMMANDS = ["run", "stop", "reindex", "search", "ask", "mcp-config", "status", "push-key", "set-policy", "sidecar"]
COMMANDS += ["index", "refresh", "remove", "indexes"]
KEY = "sk-or-v1-" + "7" * 48


# --- parsing and help ------------------------------------------------------------------------------------


def test_the_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    listed = capsys.readouterr().out
    assert [c for c in COMMANDS if f"    {c}" not in listed] == []


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "sidecar"])
def test_each_commands_help_explains_it_with_an_example(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: samespace {command}")
    assert f"example:\n  samespace {command}" in text


def test_sidecar_hands_its_whole_command_line_to_the_sidecars_own(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["sidecar", "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: python -m sidecar")
    assert "--master" in text


def test_a_missing_or_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ([], ["launch"]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
    assert "usage: samespace" in capsys.readouterr().err


def test_set_policy_accepts_only_known_roles_and_policies(capsys: pytest.CaptureFixture[str]) -> None:
    parsed = build_parser().parse_args(["set-policy", "code-embedding", "backup"])
    assert (parsed.role, parsed.policy) == ("code-embedding", "backup")
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["set-policy", "code-embedding", "cheapest"])
    assert exited.value.code == 2
    assert "invalid choice: 'cheapest'" in capsys.readouterr().err


def test_the_addresses_default_to_the_local_serve_and_dashboard(tmp_path: Path) -> None:
    parser = build_parser()
    assert parser.parse_args(["search", "q"]).address == "http://127.0.0.1:8000"
    assert parser.parse_args(["status"]).address == "http://127.0.0.1:8000"
    run = parser.parse_args(["run"])
    assert (run.port, run.dashboard_port, run.mcp_port) == (6379, 8265, 8000)
    assert run.state_dir == ROOT / ".samespace"


# --- push-key: the key from stdin, never argv ------------------------------------------------------------


@pytest.fixture
def admin_stub() -> Iterator[str]:
    with serve_admin_stub() as url:
        yield url


def test_push_key_reads_the_key_from_stdin_and_starts_no_child_process(
    admin_stub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    monkeypatch.setenv("SAMESPACE_ADMIN__TOKEN_FILE", str(token_file))
    monkeypatch.setattr(sys, "stdin", io.StringIO(KEY + "\n"))
    children: list[tuple[Any, Any]] = []
    real_init = subprocess.Popen.__init__

    def recording_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        children.append((args, kwargs.get("env")))
        real_init(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", recording_init)
    assert main(["push-key", "--address", admin_stub, "--state-dir", str(tmp_path)]) == 0
    assert AdminStub.received == [("/admin/openrouter", f"Bearer {ADMIN_TOKEN}", {"api_key": KEY})]
    assert children == []  # so no child's argv or environment can hold the key
    assert KEY not in capsys.readouterr().out


def test_push_key_refuses_a_key_on_the_command_line(admin_stub: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["push-key", "--address", admin_stub, KEY])
    assert exited.value.code == 2
    assert AdminStub.received == []
    capsys.readouterr()


def test_set_policy_posts_the_policy_to_the_admin_api(
    admin_stub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    token_file = tmp_path / "admin-token"
    token_file.write_text(ADMIN_TOKEN)
    monkeypatch.setenv("SAMESPACE_ADMIN__TOKEN_FILE", str(token_file))
    assert main(["set-policy", "reranker", "local", "--address", admin_stub + "/"]) == 0
    assert AdminStub.received == [("/admin/openrouter", f"Bearer {ADMIN_TOKEN}", {"policies": {"reranker": "local"}})]
    assert json.loads(capsys.readouterr().out) == {"pushed": True}


# --- what run, stop and reindex would run ----------------------------------------------------------------


def _plan(tmp_path: Path, *extra: str) -> Any:
    args = build_parser().parse_args(
        ["run", "--repo", str(ROOT / "tests" / "fixtures" / "polyglot"), "--state-dir", str(tmp_path / "state"), *extra]
    )
    return run_plan(args, {"PATH": "/usr/bin", "HOME": str(tmp_path)})


def test_run_starts_a_loopback_head_deploys_the_config_and_submits_the_job_with_the_checkout(tmp_path: Path) -> None:
    plan = _plan(
        tmp_path,
        "--port",
        "7001",
        "--dashboard-port",
        "7002",
        "--temp-dir",
        "/tmp/ss-x",
        "--metrics-port",
        "7004",
        "--ray-arg=--ray-client-server-port=7003",
        "--num-cpus",
        "3",
    )
    start, deploy, submit = plan.commands()
    assert start[:3] == [sys.executable, "-m", "samespace.ray_head"]  # `ray start`, lean (samespace/ray_head.py)
    assert start[3:] == [
        "start",
        "--head",
        "--num-cpus=3",
        "--disable-usage-stats",
        "--node-ip-address=127.0.0.1",
        "--dashboard-host=127.0.0.1",
        "--port=7001",
        "--dashboard-port=7002",
        "--no-monitor",
        "--include-log-monitor=false",
        "--temp-dir=/tmp/ss-x",
        "--metrics-export-port=7004",
        "--ray-client-server-port=7003",
    ]
    assert deploy[1:] == ["deploy", "--address", "http://127.0.0.1:7002", str(tmp_path / "state" / "serve_config.yaml")]
    assert submit[1:] == [
        "job",
        "submit",
        "--address",
        "http://127.0.0.1:7002",
        "--working-dir",
        str(ROOT),
        "--",
        "python",
        "-m",
        "jobs.reindex",
        "--repo",
        str(ROOT / "tests" / "fixtures" / "polyglot"),
        "--name",
        "polyglot",
    ]


def test_run_reads_the_ray_token_from_its_file_and_keeps_its_state_in_the_state_dir(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    state = tmp_path / "state"
    assert plan.env["RAY_AUTH_MODE"] == "token"
    assert plan.env["RAY_AUTH_TOKEN_PATH"] == str(state / "ray-token")
    assert plan.env["SAMESPACE_STORE__DATA_DIR"] == str(state / "data")
    assert plan.env["SAMESPACE_ADMIN__TOKEN_FILE"] == str(state / "admin-token")
    assert plan.env["SAMESPACE_ADMIN__CONFIG_PATH"] == str(state / "config.json")
    assert plan.env["SAMESPACE_SERVE__PORT"] == "8000"
    assert plan.env["HF_HUB_OFFLINE"] == "1"
    assert plan.env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    # (the test's folder is named after the test, which names the token)
    args = [arg.replace(str(tmp_path), "") for argv in plan.commands() for arg in argv]
    assert [arg for arg in args if "token" in arg.lower()] == []


def test_the_callers_environment_names_other_store_and_admin_files(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    env = cluster_env(state, {"SAMESPACE_STORE__DATA_DIR": "/srv/data", "SAMESPACE_ADMIN__TOKEN_FILE": "/etc/t"})
    assert (env["SAMESPACE_STORE__DATA_DIR"], env["SAMESPACE_ADMIN__TOKEN_FILE"]) == ("/srv/data", "/etc/t")
    assert (
        cluster_env(state, {"SAMESPACE_STORE__DATA_DIR": "/srv/data"}, data_dir=Path("/d"))["SAMESPACE_STORE__DATA_DIR"]
        == "/d"
    )
    assert "SAMESPACE_SERVE__PORT" not in cluster_env(state, {})


def test_run_deploys_a_copy_of_the_serve_config_with_the_proxy_on_the_port_it_names(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    config = ROOT / "serve_config.yaml"
    written = write_serve_config(config, state, 18123)
    assert written == state.serve_config
    original, copy = yaml.safe_load(config.read_text()), yaml.safe_load(written.read_text())
    assert original["http_options"]["port"] != 18123
    assert copy["http_options"] == {**original["http_options"], "port": 18123}
    assert {k: v for k, v in copy.items() if k != "http_options"} == {
        k: v for k, v in original.items() if k != "http_options"
    }


def test_the_mcp_replica_serves_the_mcp_port_itself_when_it_is_the_only_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from samespace.head import direct_ingress_env

    monkeypatch.delenv("SAMESPACE_SERVE__MCP_REPLICAS", raising=False)
    monkeypatch.delenv("SAMESPACE_CONFIG_FILE", raising=False)
    direct = _plan(tmp_path, "--mcp-port", "18125").head
    assert direct.direct_ingress_port == 18125
    env = direct.environment({})
    assert env == {**env, **direct_ingress_env(18125)}
    # the controller hands out ports from [min, max): exactly the MCP port, and no other
    assert (env["RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT"], env["RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT"]) == (
        "18125",
        "18126",
    )
    assert env["RAY_SERVE_ENABLE_DIRECT_INGRESS"] == "1"
    proxied = _plan(tmp_path, "--serve-proxy").head
    assert proxied.direct_ingress_port is None
    assert not set(direct_ingress_env(8000)) & set(proxied.environment({}))


def _config(tmp_path: Path, applications: list[dict[str, Any]]) -> Path:
    document = {**yaml.safe_load((ROOT / "serve_config.yaml").read_text()), "applications": applications}
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_direct_ingress_only_for_the_mcp_app_alone_at_one_replica(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SAMESPACE_SERVE__MCP_REPLICAS", raising=False)
    monkeypatch.delenv("SAMESPACE_CONFIG_FILE", raising=False)
    mcp = {"name": "mcp", "route_prefix": "/", "import_path": "serve_apps.mcp:build_app", "args": {}}
    admin = {"name": "admin", "route_prefix": "/admin", "import_path": "serve_apps.admin:build_app"}
    assert direct_ingress_fits(ROOT / "serve_config.yaml")
    assert direct_ingress_fits(_config(tmp_path, [mcp]))
    assert not direct_ingress_fits(_config(tmp_path, [mcp, admin]))  # two ingress replicas, one port
    assert not direct_ingress_fits(_config(tmp_path, [{**mcp, "args": {"serve": {"mcp_replicas": 2}}}]))
    assert not direct_ingress_fits(_config(tmp_path, [{**mcp, "import_path": "other.app:build"}]))
    monkeypatch.setenv("SAMESPACE_SERVE__MCP_REPLICAS", "3")
    assert not direct_ingress_fits(_config(tmp_path, [mcp]))
    assert _plan(tmp_path).head.direct_ingress_port is None


def test_dry_run_prints_the_commands_and_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    assert main(["run", "--dry-run", "--state-dir", str(state), "--mcp-port", "18124", "--repo", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[1:5] == ["-m", "samespace.ray_head", "start", "--head"]
    assert [line.split()[1:3] for line in lines[1:]] == [["deploy", "--address"], ["job", "submit"]]
    assert lines[1].endswith(str(state / "serve_config.yaml"))
    assert not state.exists()


def test_full_dashboard_runs_ray_itself_and_keeps_the_task_table(tmp_path: Path) -> None:
    from samespace.head import MALLOC_ARENAS_ENV, TASK_EVENTS_ENV

    lean = _plan(tmp_path).head
    full = _plan(tmp_path, "--full-dashboard").head
    assert ray_start_argv(full)[1:3] == ["start", "--head"] and ray_start_argv(full)[0].endswith("ray")
    assert TASK_EVENTS_ENV not in full.environment({}) and lean.environment({})[TASK_EVENTS_ENV] == "0"
    assert lean.environment({TASK_EVENTS_ENV: "1000"})[TASK_EVENTS_ENV] == "1000"  # the caller's value stands
    assert lean.environment({})[MALLOC_ARENAS_ENV] == full.environment({})[MALLOC_ARENAS_ENV] == "2"


def test_reindex_passes_its_flags_to_the_job() -> None:
    repo = ROOT / "tests" / "fixtures" / "polyglot"
    assert reindex_argv(repo, None) == ["--repo", str(repo), "--name", "polyglot"]
    assert reindex_argv(repo, "api", full=True, allow_shrink=True) == [
        "--repo",
        str(repo),
        "--name",
        "api",
        "--full",
        "--allow-shrink",
    ]


# --- the state folder's secrets, and stopping only our own head ------------------------------------------


def test_the_tokens_are_made_once_private_and_never_rewritten(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    assert state.ensure_ray_token()
    assert state.ensure_admin_token()
    assert state.path.stat().st_mode & 0o777 == 0o700
    assert state.ray_token.stat().st_mode & 0o777 == 0o600
    assert state.admin_token.stat().st_mode & 0o777 == 0o600
    assert len(state.ray_token.read_text()) == 64
    first = state.ray_token.read_text(), state.admin_token.read_text()
    assert not state.ensure_ray_token()
    assert not state.ensure_admin_token()
    assert (state.ray_token.read_text(), state.admin_token.read_text()) == first
    state.admin_token.write_text("")
    assert state.ensure_admin_token()  # an empty admin token file is made again, as `make run` did
    assert state.admin_token.read_text().strip()


@pytest.mark.parametrize("blank", ["\n", "  \n\n"])
def test_a_blank_admin_token_file_is_made_again(blank: str, tmp_path: Path) -> None:
    # the admin app reads a blank token file as no token (every call 401): run makes a real one
    state = StateDir(tmp_path / "state")
    state.ensure()
    state.admin_token.write_text(blank)
    assert state.ensure_admin_token()
    assert len(state.admin_token.read_text().strip()) >= 16


def test_run_refuses_a_short_admin_token_file_before_it_starts_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import samespace.cluster_commands as cluster_commands

    monkeypatch.setattr(cluster_commands, "probe_head", lambda *a: pytest.fail("looked for a head"))
    monkeypatch.setattr(cluster_commands, "start_head", lambda *a: pytest.fail("started a head"))
    plan = _plan(tmp_path, "--serve-proxy")
    plan.state.ensure()
    canary = "short-canary"
    plan.state.admin_token.write_text(canary + "\n")
    with pytest.raises(SystemExit) as refused:
        run(plan, lambda argv: pytest.fail("talked to the MCP app"))
    message = str(refused.value.code)
    assert "admin.token_file (SAMESPACE_ADMIN__TOKEN_FILE)" in message and "is 12 bytes" in message
    assert canary not in message


def test_a_head_record_that_cannot_be_read_is_no_record(tmp_path: Path) -> None:
    path = tmp_path / "ray-head.json"
    assert HeadRecord.read(path) is None
    path.write_text("{not json")
    assert HeadRecord.read(path) is None
    HeadRecord(session=42, gcs_address="127.0.0.1:1", dashboard_url="http://127.0.0.1:2").write(path)
    assert HeadRecord.read(path) == HeadRecord(42, "127.0.0.1:1", "http://127.0.0.1:2")
    path.write_text('{"session": 7, "gcs_address": "a", "dashboard_url": "b", "direct_ingress_port": 8000}')
    assert HeadRecord.read(path) == HeadRecord(7, "a", "b", direct_ingress_port=8000)


def test_stop_leaves_a_session_that_holds_no_ray_head_alone() -> None:
    # A stale record's session id may belong to someone else by now: no GCS or raylet, no signal.
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        assert session_members(other.pid) == [other.pid]
        assert daemon_pids(other.pid) == []
        assert stop_session(other.pid, grace_s=0.0) is False
        assert other.poll() is None
    finally:
        os.kill(other.pid, signal.SIGKILL)
        other.wait()


def test_stop_leaves_no_process_of_a_head_that_ignores_sigterm_and_keeps_forking(tmp_path: Path) -> None:
    # A copy of sleep named raylet makes the session a Ray head's; its shell ignores SIGTERM and forks a
    # long sleep every 10 ms, so a SIGKILL sent to one listing of the session misses those forked after it.
    raylet = tmp_path / "raylet"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", raylet)
    script = f"trap '' TERM; {raylet} 60 & while :; do sleep 60 & sleep 0.01; done"
    head = subprocess.Popen(["bash", "-c", script], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while len(session_members(head.pid)) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert daemon_pids(head.pid)  # positive control: a head, with forks under way
        assert stop_session(head.pid, grace_s=0.2) is True
        assert session_members(head.pid) == []  # none left, none still exiting
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)
        head.wait()


def test_an_answer_prints_with_its_citations_and_fallbacks() -> None:
    lines = format_answer(
        {
            "answer": "It writes a temp file and renames it.",
            "citations": [
                {
                    "repo": "polyglot",
                    "path": "pkg/storage.py",
                    "start_line": 6,
                    "end_line": 14,
                    "symbol": "write_json_atomically",
                }
            ],
            "produced": {"fallbacks": ["rlm unavailable → plain retrieval"]},
        }
    )
    assert lines == [
        "It writes a temp file and renames it.",
        "\ncitations:",
        "  polyglot:pkg/storage.py:6-14  write_json_atomically",
        "\nfallbacks: rlm unavailable → plain retrieval",
    ]
