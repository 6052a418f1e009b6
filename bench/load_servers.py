"""The servers the load benches start and stop, and the corpus both index.

`SamespaceCluster` is the embedded default as `make run` starts it (`python -m samespace run`, the
Makefile's environment, a state folder, free ports and a short Ray temp dir of its own), stopped
with `samespace stop`, after which no process of its Ray session may be left. `SingleProcess` is
`python -m bench.single_process`, the one-process competitor, stopped by PID.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.process_memory import descendants, parent_map
from bench.run import ROOT
from cluster.environment import LOCAL_ENV
from samespace.head import FIXED_PORT_FLAGS, HeadRecord, free_port, processes_naming, session_members

__all__ = [
    "INDEX_NAME",
    "QUERY_CACHE_TTL_S",
    "LoadFailed",
    "SamespaceCluster",
    "SingleProcess",
    "package_corpus",
    "run_env",
    "wait_healthy",
]

INDEX_NAME = "load"
QUERY_CACHE_TTL_S = 1e-6  # the settings refuse 0; a microsecond lets no query vector be reused
RUN_TIMEOUT_S = 1500.0  # a cold head, two model loads and the reindex job on a shared 2-core box
SERVE_WAIT_S = 900.0
SINGLE_START_S = 600.0
STOP_TIMEOUT_S = 120.0
HEALTH_POLL_S = 1.0


class LoadFailed(RuntimeError):
    """Something broke while measuring (a call errored, a server did not start or stop)."""


def run_env(base: Mapping[str, str], state_dir: Path, mcp_port: int) -> dict[str, str]:
    """The environment `make run` gives `samespace run` (the Makefile's exports), with this run's
    state folder for the store and the admin files, and a query-vector cache that never hits."""
    env = {key: value for key, value in base.items() if key != "PYTEST_CURRENT_TEST"}
    env.update(LOCAL_ENV)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["SAMESPACE_STORE__DATA_DIR"] = str(state_dir / "data")
    env["SAMESPACE_SERVE__PORT"] = str(mcp_port)
    env["SAMESPACE_ADMIN__TOKEN_FILE"] = str(state_dir / "admin-token")
    env["SAMESPACE_ADMIN__CONFIG_PATH"] = str(state_dir / "config.json")
    env["SAMESPACE_RLM__QUERY_CACHE_TTL_S"] = repr(QUERY_CACHE_TTL_S)
    return env


def wait_healthy(url: str, timeout_s: float, alive: Callable[[], bool] = lambda: True) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and alive():
        try:
            response = httpx.get(url, timeout=5.0)
            if response.is_success:
                body: dict[str, Any] = response.json()
                return body
        except httpx.TransportError:
            pass
        time.sleep(HEALTH_POLL_S)
    raise LoadFailed(f"{url} did not answer within {timeout_s:.0f} s")


@dataclass
class SamespaceCluster:
    """The embedded default as `make run` starts it, in a state folder and Ray temp dir of its own."""

    state_dir: Path
    temp_dir: Path
    corpus: Path
    mcp_port: int
    log: Path
    session: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.mcp_port}/mcp/"

    @property
    def env(self) -> dict[str, str]:
        return run_env(os.environ, self.state_dir, self.mcp_port)

    def start(self) -> None:
        argv = [
            sys.executable,
            "-m",
            "samespace",
            "run",
            "--state-dir",
            str(self.state_dir),
            "--repo",
            str(self.corpus),
            "--name",
            INDEX_NAME,
            "--query",
            "send a request and follow redirects",
            "--port",
            str(free_port()),
            "--dashboard-port",
            str(free_port()),
            "--mcp-port",
            str(self.mcp_port),
            "--temp-dir",
            str(self.temp_dir),
            "--wait-s",
            str(SERVE_WAIT_S),
            *(f"--ray-arg={flag}={free_port()}" for flag in FIXED_PORT_FLAGS),
        ]
        with self.log.open("wb") as log:
            try:
                done = subprocess.run(
                    argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S
                )
            finally:
                record = HeadRecord.read(self.state_dir / "ray-head.json")
                self.session = record.session if record is not None else None
        if done.returncode != 0:
            raise LoadFailed(f"samespace run exited {done.returncode}; its output: {self.log}\n{_tail(self.log)}")

    def pids(self) -> set[int]:
        if self.session is None:
            return set()
        return descendants(session_members(self.session), parent_map())

    def stop(self) -> list[int]:
        """`samespace stop`; returns the PIDs of the session (or of its temp dir) still alive after it."""
        # Without a record `samespace stop` falls back to `ray stop`, which would stop every Ray of this user.
        if HeadRecord.read(self.state_dir / "ray-head.json") is not None:
            subprocess.run(
                [sys.executable, "-m", "samespace", "stop", "--state-dir", str(self.state_dir)],
                cwd=ROOT,
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=STOP_TIMEOUT_S,
            )
        left = self.pids() | set(processes_naming(str(self.temp_dir)))
        for pid in left:  # ours: this run's session and temp dir only
            _kill(pid)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        return sorted(left)


@dataclass
class SingleProcess:
    corpus: Path
    port: int
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp/"

    def start(self) -> None:
        argv = [sys.executable, "-m", "bench.single_process", "--repo", str(self.corpus), "--port", str(self.port)]
        argv += ["--name", INDEX_NAME]
        env = {**os.environ, **LOCAL_ENV}
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    def wait(self) -> dict[str, Any]:
        process = self.process
        if process is None:
            raise LoadFailed("the single process was never started")
        try:
            return wait_healthy(f"http://127.0.0.1:{self.port}/healthz", SINGLE_START_S, lambda: process.poll() is None)
        except LoadFailed as exc:
            raise LoadFailed(f"{exc}; its output:\n{_tail(self.log)}") from exc

    def pids(self) -> set[int]:
        if self.process is None or self.process.poll() is not None:
            return set()
        return descendants([self.process.pid], parent_map())

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def package_corpus(package: str, work: Path) -> tuple[Path, list[str], dict[str, Any]]:
    """The stripped copy of an installed package under `work`, its docstring queries and its facts
    (version, files), printed."""
    from bench.quality_corpus import build_corpus, corpus_dir, read_facts

    queries = [q.query for q in build_corpus((package,), work / "eval")]
    facts = read_facts(work / "eval")
    print(f"corpus: {package} {facts['packages'][package]}, {facts['files']} files, {len(queries)} queries")
    return corpus_dir(work / "eval"), queries, facts
