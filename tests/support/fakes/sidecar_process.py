"""The reference sidecar (`python -m sidecar`) as a child process, started and stopped by PID.

    with SidecarProcess(master=master_url, serves=[serve_arg("code-embedding", server.base_url)],
                        fleet_token="t0k", upstream_key="sk-up") as sidecar:
        sidecar.wait_for_log("registered with the master")
        sidecar.kill()         # a crashed workstation: the socket drops without a close frame
        sidecar.restart()      # same arguments, same log file (appended)
        assert sidecar.stop() == 0   # SIGTERM → clean exit 0

Several masters: `masters=[(url_a, token_a), (url_b, token_b)]` (each token in its own environment
variable, named by `--master URL,token-env=VAR`). Virtual containers: `serves=[openrouter_serve_arg(
"code-embedding", "qwen/qwen3-embedding-4b", "nebius")]`, with `openrouter_base_url=` pointing at a fake.
The fleet tokens and the upstream key travel in the child's environment only (never its command line).
The child's stdout and stderr go to one log file; `log()` reads it, `mark()` + `wait_for_log(since=)`
look only at what came after a point.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from .openrouter_server import REPO_ROOT, STOP_GRACE_S

FLEET_TOKEN_ENV = "SAMESPACE_FLEET_TOKEN"
UPSTREAM_KEY_ENV = "SIDECAR_UPSTREAM_KEY"
REGISTERED_LINE = "registered with the master"
_POLL_S = 0.05


def serve_arg(role: str, base_url: str, model: str | None = None) -> str:
    """One --serve value: `code-embedding=http://127.0.0.1:9201/v1[,model=NAME]`."""
    return f"{role}={base_url}" + (f",model={model}" if model else "")


def openrouter_serve_arg(role: str, model: str, upstream: str | None = None) -> str:
    """One --serve value for a virtual container: `code-embedding=openrouter:MODEL[@UPSTREAM]`."""
    return f"{role}=openrouter:{model}" + (f"@{upstream}" if upstream else "")


def master_token_env(index: int) -> str:
    """The environment variable that carries the fleet token of the index-th master (0: the default one)."""
    return FLEET_TOKEN_ENV if index == 0 else f"{FLEET_TOKEN_ENV}_{index}"


class SidecarProcess:
    """`python -m sidecar` with the given options, in a child process of the test.

    master:       master base URL (http://host:port[/prefix]), with fleet_token (SAMESPACE_FLEET_TOKEN); or
    masters:      several (url, fleet token): the first token in SAMESPACE_FLEET_TOKEN, the i-th in
                  SAMESPACE_FLEET_TOKEN_<i> (named by the --master option's token-env)
    serves:       --serve values (see serve_arg, openrouter_serve_arg); may hold virtual ones only
    openrouter_base_url: --openrouter-base-url (None: the default, OpenRouter itself)
    upstream_key: SIDECAR_UPSTREAM_KEY in the child's environment (None: unset)
    extra_args:   any further options, e.g. ["--ws-retry-s", "2"]
    """

    def __init__(
        self,
        *,
        master: str | None = None,
        serves: Sequence[str],
        fleet_token: str | None = None,
        masters: Sequence[tuple[str, str]] = (),
        openrouter_base_url: str | None = None,
        upstream_key: str | None = None,
        agent_url: str | None = None,
        hostname: str = "workstation-1",
        transport: str = "auto",
        heartbeat_s: float = 0.5,
        poll_wait_s: float = 2.0,
        log_level: str = "DEBUG",
        extra_args: Sequence[str] = (),
    ) -> None:
        if (master is None) == (not masters) or (master is not None and fleet_token is None):
            raise ValueError("give master= with fleet_token=, or masters=[(url, token), ...]")
        self.masters: list[tuple[str, str]] = [(master, fleet_token or "")] if master is not None else list(masters)
        self.master = self.masters[0][0]
        self.hostname = hostname
        self.agent_url = agent_url or f"sidecar://{hostname}"
        self.args: list[str] = []
        for index, (url, _) in enumerate(self.masters):
            self.args += ["--master", url if index == 0 else f"{url},token-env={master_token_env(index)}"]
        self.args += [
            "--agent-url", self.agent_url,
            "--hostname", hostname,
            "--transport", transport,
            "--heartbeat-s", str(heartbeat_s),
            "--poll-wait-s", str(poll_wait_s),
            "--log-level", log_level,
        ]  # fmt: skip
        for serve in serves:
            self.args += ["--serve", serve]
        if openrouter_base_url is not None:
            self.args += ["--openrouter-base-url", openrouter_base_url]
        self.args += list(extra_args)
        self._upstream_key = upstream_key
        fd, name = tempfile.mkstemp(prefix="sidecar-", suffix=".log")
        os.close(fd)
        self.log_path = Path(name)
        self._process: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None

    def __repr__(self) -> str:
        urls = [url for url, _ in self.masters]
        return f"SidecarProcess(agent_url={self.agent_url!r}, masters={urls!r}, pid={self.pid})"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # --- lifecycle ---

    def start(self) -> Self:
        """Start the child (it connects on its own; use wait_for_log to wait for registration)."""
        if self.running:
            raise RuntimeError("already started")
        env = dict(os.environ)
        for index, (_, token) in enumerate(self.masters):
            env[master_token_env(index)] = token
        if self._upstream_key is not None:
            env[UPSTREAM_KEY_ENV] = self._upstream_key
        else:
            env.pop(UPSTREAM_KEY_ENV, None)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        with self.log_path.open("ab") as log:  # O_APPEND: the child's writes always land at the end
            self._process = subprocess.Popen(
                [sys.executable, "-m", "sidecar", *self.args],
                cwd=REPO_ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.returncode = None
        return self

    def stop(self) -> int | None:
        """SIGTERM, wait (SIGKILL after STOP_GRACE_S), reap; the exit code (0 for a clean stop)."""
        process, self._process = self._process, None
        if process is None:
            return self.returncode
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.returncode = process.returncode
        return self.returncode

    def kill(self) -> None:
        """SIGKILL now (a crash) and reap."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.kill()
            process.wait()
            self.returncode = process.returncode

    def restart(self) -> Self:
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop the child and delete the log file."""
        self.stop()
        self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- the log ---

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def mark(self) -> int:
        """The log's current length, for wait_for_log(since=...)."""
        return len(self.log())

    def wait_for_log(self, text: str, timeout_s: float = 15.0, *, since: int = 0, count: int = 1) -> str:
        """Block until `text` occurs `count` times in the log after offset `since`; the log then.
        TimeoutError (with the log's tail) if not, RuntimeError if the child exits first."""
        deadline = time.monotonic() + timeout_s
        while True:
            log = self.log()
            if log[since:].count(text) >= count:
                return log
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"sidecar exited with {self._process.returncode} before {text!r}:\n{log[-4000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{text!r} not in the sidecar log within {timeout_s} s:\n{log[-4000:]}")
            time.sleep(_POLL_S)

    def registrations(self) -> int:
        """How many times the child has registered (all runs since the log file was created)."""
        return self.log().count(REGISTERED_LINE)
