"""The user's path, exactly as a user walks it: `samespace run`, `samespace search`, `samespace stop`.

`run` starts its own Ray head with `ray start --head` (token auth, every port on 127.0.0.1, chosen free
here so it cannot clash with the suite's in-process Ray), deploys `serve_config.yaml` with `serve deploy`,
waits for /healthz and submits the reindex job with `--working-dir`; the search goes through the `mcp`
package's client; `stop` must leave no GCS or raylet of that head behind. State, store, HOME and Ray's
temp dir are the test's own: the repository's `.samespace/` and `~/.ray` are never touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from samespace.head import (
    FIXED_PORT_FLAGS,
    HeadRecord,
    daemon_pids,
    free_port,
    processes_naming,
    session_members,
    stop_session,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[2]
SAMESPACE = str(Path(sys.executable).with_name("samespace"))
RUN_TIMEOUT_S = 1200  # a cold head, the model loaded by the MCP replica and the job, on a shared 2-core box
CALL_TIMEOUT_S = 180


@dataclass
class UserCluster:
    state_dir: Path
    temp_dir: Path
    mcp_port: int
    env: dict[str, str]
    run: subprocess.CompletedProcess[str]

    def samespace(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [SAMESPACE, *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=CALL_TIMEOUT_S
        )


def _user_env(home: Path) -> dict[str, str]:
    """A user's shell: no samespace or Ray settings from this test process, a HOME of the test's own."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SAMESPACE_", "RAY_")) and key != "PYTEST_CURRENT_TEST"
    }
    env["HOME"] = str(home)
    return env


@pytest.fixture
def user_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UserCluster]:
    base = tmp_path_factory.mktemp("user-path")
    repo = base / "polyglot"
    shutil.copytree(ROOT / "tests" / "fixtures" / "polyglot", repo)
    (base / "home").mkdir()
    # Ray's temp dir holds its unix sockets, whose paths must stay under ~107 bytes: short, under /tmp.
    temp_dir = Path(tempfile.mkdtemp(prefix="ss-user-", dir="/tmp"))
    state_dir = base / "state"
    mcp_port = free_port()
    env = _user_env(base / "home")
    argv = [
        SAMESPACE,
        "run",
        "--repo",
        str(repo),
        "--name",
        "polyglot",
        "--query",
        "write a JSON file atomically",
        "--state-dir",
        str(state_dir),
        "--port",
        str(free_port()),
        "--dashboard-port",
        str(free_port()),
        "--mcp-port",
        str(mcp_port),
        "--temp-dir",
        str(temp_dir),
        "--wait-s",
        "900",
        *(f"--ray-arg={flag}={free_port()}" for flag in FIXED_PORT_FLAGS),
    ]
    try:
        run = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        yield UserCluster(state_dir=state_dir, temp_dir=temp_dir, mcp_port=mcp_port, env=env, run=run)
    finally:
        record = HeadRecord.read(state_dir / "ray-head.json")
        if record is not None:  # the test failed before `samespace stop` ran: stop that head, and only it
            stop_session(record.session)
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_the_users_path_run_then_search_then_stop(user_cluster: UserCluster) -> None:
    # One test, in the user's order: a stop in the middle would break a search run after it.
    run = user_cluster.run
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"MCP server: http://127.0.0.1:{user_cluster.mcp_port}/mcp/" in run.stdout
    assert '"mcpServers"' in run.stdout
    assert "pkg/storage.py" in run.stdout  # the sample query's hits, printed by run itself
    state = user_cluster.state_dir
    assert state.stat().st_mode & 0o777 == 0o700
    assert (state / "ray-token").stat().st_mode & 0o777 == 0o600
    assert (state / "admin-token").stat().st_mode & 0o777 == 0o600
    leaked = (state / "ray-token").read_text() in run.stdout + run.stderr  # not in the assert: never print it
    assert not leaked
    assert any((state / "data").iterdir())  # the store lives in the state dir given, not the repository's

    found = user_cluster.samespace(
        "search",
        "--address",
        f"http://127.0.0.1:{user_cluster.mcp_port}",
        "--repo",
        "polyglot",
        "-k",
        "3",
        "write a JSON file atomically so readers never see a torn file",
    )
    assert found.returncode == 0, found.stdout + found.stderr
    hits = [line for line in found.stdout.splitlines() if "polyglot:" in line]
    assert hits, found.stdout
    assert "pkg/storage.py" in hits[0]
    assert "write_json_atomically" in found.stdout

    # The admin API, served by the MCP replica under /admin (one replica process for both).
    address = ["--state-dir", str(state), "--address", f"http://127.0.0.1:{user_cluster.mcp_port}"]
    status = user_cluster.samespace("status", *address)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "PROVIDER" in status.stdout and "samespace-embedder-cpu0" in status.stdout  # a table, for a person
    raw = user_cluster.samespace("status", "--json", *address)
    assert raw.returncode == 0 and '"providers"' in raw.stdout, raw.stdout + raw.stderr

    # Index management through the admin API: the sync actor submits the job through Ray's job API,
    # on this token-auth cluster, and `--wait` follows it to its commit.
    second = state.parent / "second"
    shutil.copytree(ROOT / "tests" / "fixtures" / "polyglot", second)
    indexed = user_cluster.samespace("index", str(second), "--wait", *address)
    assert indexed.returncode == 0, indexed.stdout + indexed.stderr
    assert indexed.stdout.rstrip().endswith("second: committed")
    removed = user_cluster.samespace("remove", "second", *address)
    assert removed.returncode == 0 and '"index": "second"' in removed.stdout, removed.stdout + removed.stderr

    record = HeadRecord.read(state / "ray-head.json")
    assert record is not None
    daemons = daemon_pids(record.session)
    assert daemons  # the GCS and the raylet `run` started are up until now
    commands = [_command(pid) for pid in session_members(record.session)]
    modules = sorted(  # the modules' processes are titled "ray-dashboard-<Module>-<n>"
        c.split()[0].removeprefix("ray-dashboard-").rsplit("-", 1)[0]
        for c in commands
        if c.startswith("ray-dashboard-")
    )
    assert modules == ["JobHead", "NodeHead", "ServeHead"]  # the lean head: the Jobs and Serve APIs only
    assert not [c for c in commands if "ray.util.client.server" in c or "/monitor.py" in c or "/log_monitor.py" in c]
    assert not [c for c in commands if "AdminIngress" in c]  # no replica of its own for the admin API
    # Direct ingress: the MCP replica itself listens on the MCP port (no proxy actor in between).
    assert [_command(pid).split()[0] for pid in _listening_on(user_cluster.mcp_port)] == [
        "ray::ServeReplica:mcp:McpIngress"
    ]
    stopped = user_cluster.samespace("stop", "--state-dir", str(state))
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "ray stopped" in stopped.stdout
    assert [pid for pid in daemons if _state(pid) != "Z"] == []
    assert processes_naming(str(user_cluster.temp_dir)) == []
    assert not (state / "ray-head.json").exists()
    assert not (Path(user_cluster.env["HOME"]) / ".ray" / "auth_token").exists()


def _listening_on(port: int) -> list[int]:
    """The PIDs of the processes that accept TCP connections on `port`."""
    import psutil

    return sorted(
        {c.pid for c in psutil.net_connections(kind="tcp") if c.status == "LISTEN" and c.laddr.port == port and c.pid}
    )


def _command(pid: int) -> str:
    """A process's command line, arguments joined by spaces ("" for one that is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _state(pid: int) -> str:
    """A process's state letter; "Z" for one that is gone (or only a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"
