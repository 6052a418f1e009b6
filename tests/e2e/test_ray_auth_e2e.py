"""Token authentication on a real Ray head, started and used the way `make run` does.

The head is its own `ray start --head --block` in a new session, with its own temp dir, HOME and
127.0.0.1 ports. Clients are subprocesses: the token mode is process-wide state in Ray, and this
pytest process keeps the suite's unauthenticated local Ray (conftest). `ray stop` is never used
here: it kills every Ray process of the user, the suite's own cluster included. The head is
stopped by signalling the processes of its session, and only those.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from samespace.head import free_port, session_members, stop_session

pytestmark = pytest.mark.slow  # starts its own Ray head

ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))
# What `make run` exports for `ray start`, `serve deploy`, `ray job submit` and `make stop`.
TOKEN_MODE = "token"
START_TIMEOUT_S = 90.0
# The documented job, spelled as the README does: the driver joins the cluster and runs a task.
JOB_SCRIPT = "import ray; ray.init(); print('task says', ray.get(ray.remote(lambda: 41 + 1).remote()))"


@dataclass
class TokenHead:
    gcs_address: str
    dashboard_url: str
    token_file: Path
    home: Path
    base_env: dict[str, str]  # no auth variables: each client adds its own

    def env(self, **extra: str) -> dict[str, str]:
        return {**self.base_env, **extra}

    def token_env(self) -> dict[str, str]:
        return self.env(RAY_AUTH_MODE=TOKEN_MODE, RAY_AUTH_TOKEN_PATH=str(self.token_file))


def _wait_for_job_api(head: TokenHead, token: str, started: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if started.poll() is not None:
            raise RuntimeError(f"ray start exited with {started.returncode}:\n{log.read_text()}")
        try:
            reply = httpx.get(
                f"{head.dashboard_url}/api/jobs/", headers={"Authorization": f"Bearer {token}"}, timeout=5
            )
            if reply.status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"the job API never answered:\n{log.read_text()}")


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenHead]:
    base = tmp_path_factory.mktemp("auth")
    home = base / "home"
    home.mkdir()
    token_file = base / "ray-token"
    old_umask = os.umask(0o077)  # as the Makefile writes it
    try:
        token = os.urandom(32).hex()
        token_file.write_text(token)
    finally:
        os.umask(old_umask)
    gcs_port, dashboard_port = free_port(), free_port()
    base_env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("RAY_") and key not in {"HOME", "PYTEST_CURRENT_TEST"}
    }
    base_env.update(
        HOME=str(home),  # proves nothing lands in ~/.ray: the test owns this home
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # as the Makefile
        RAY_USAGE_STATS_ENABLED="0",
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
        PYTHONPATH=str(ROOT),
    )
    state = TokenHead(
        gcs_address=f"127.0.0.1:{gcs_port}",
        dashboard_url=f"http://127.0.0.1:{dashboard_port}",
        token_file=token_file,
        home=home,
        base_env=base_env,
    )
    log = base / "ray-start.log"
    with log.open("wb") as out:
        started = subprocess.Popen(
            [
                RAY,
                "start",
                "--head",
                "--block",
                "--num-cpus=1",
                "--disable-usage-stats",
                "--node-ip-address=127.0.0.1",
                f"--port={gcs_port}",
                "--dashboard-host=127.0.0.1",
                f"--dashboard-port={dashboard_port}",
                f"--ray-client-server-port={free_port()}",
                f"--node-manager-port={free_port()}",
                f"--object-manager-port={free_port()}",
                f"--dashboard-agent-listen-port={free_port()}",
                f"--dashboard-agent-grpc-port={free_port()}",
                f"--metrics-export-port={free_port()}",
                f"--runtime-env-agent-port={free_port()}",
                f"--temp-dir={base / 'ray'}",
            ],
            env=state.token_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_for_job_api(state, token, started, log)
        yield state
    finally:
        stop_session(started.pid, grace_s=10.0)  # SIGTERM, then SIGKILL: `ray start --block` drains for 30 s
        started.wait(30)
    assert not session_members(started.pid)
    leaked = token in log.read_text()  # not in the assertion: a failure must not print it either
    assert not leaked
    assert not (home / ".ray" / "auth_token").exists()


def _run(args: list[str], env: dict[str, str], timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)


def test_the_token_file_is_private(head: TokenHead) -> None:
    assert head.token_file.stat().st_mode & 0o777 == 0o600


def test_the_job_api_refuses_a_request_without_the_token_or_with_a_wrong_one(head: TokenHead) -> None:
    assert httpx.get(f"{head.dashboard_url}/api/jobs/", timeout=10).status_code == 401
    wrong = {"Authorization": "Bearer " + "0" * 64}
    assert httpx.get(f"{head.dashboard_url}/api/jobs/", headers=wrong, timeout=10).status_code == 403
    submitted = httpx.post(
        f"{head.dashboard_url}/api/jobs/", json={"entrypoint": "echo pwned"}, headers=wrong, timeout=10
    )
    assert submitted.status_code == 403


def test_ray_job_submit_without_the_token_is_refused_and_nothing_runs(head: TokenHead) -> None:
    done = _run(
        [RAY, "job", "submit", "--address", head.dashboard_url, "--", "python", "-c", "print('ran')"],
        env=head.env(RAY_AUTH_MODE="disabled"),
    )
    assert done.returncode != 0
    assert "Unauthorized: Missing authentication token" in done.stdout + done.stderr
    listed = _run([RAY, "job", "list", "--address", head.dashboard_url], env=head.token_env())
    assert listed.returncode == 0, listed.stderr
    assert "print('ran')" not in listed.stdout


def test_a_driver_without_the_token_cannot_join_the_cluster(head: TokenHead) -> None:
    probe = (
        "import ray\n"
        "try:\n"
        f"    ray.init(address={head.gcs_address!r}, log_to_driver=False)\n"
        "except ConnectionError:\n"
        "    print('refused')\n"
        "else:\n"
        "    print('joined', ray.get(ray.remote(lambda: 1).remote()))\n"
    )
    # Ray retries the GCS about 20 times a second apart; two tries show the refusal as well.
    env = head.env(RAY_AUTH_MODE="disabled", RAY_gcs_server_port_wait_time_s="2")
    done = _run([sys.executable, "-c", probe], env=env)
    assert done.stdout.strip() == "refused", done.stdout + done.stderr
    assert "InvalidAuthToken: Authentication token is missing or incorrect" in done.stderr


def test_the_documented_job_submit_line_runs_a_driver_that_joins_and_runs_a_task(head: TokenHead) -> None:
    # README / Makefile: RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=.samespace/ray-token \
    #   ray job submit --address http://127.0.0.1:8265 --working-dir . -- python ...
    done = _run(
        [RAY, "job", "submit", "--address", head.dashboard_url, "--working-dir", ".", "--", "python", "-c", JOB_SCRIPT],
        env=head.token_env(),
        timeout_s=180.0,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "task says 42" in done.stdout
    assert "succeeded" in done.stdout
    leaked = head.token_file.read_text() in done.stdout + done.stderr
    assert not leaked
