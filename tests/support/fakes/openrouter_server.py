"""The OpenRouter fake as a real HTTP server in a subprocess, driven over its control plane.

    with FakeOpenRouterServer(config=FakeConfig(keys={"sk-test": KeyConfig()})) as server:
        client = OpenRouterClient(provider_name="p", key=SecretStr("sk-test"), base_url=server.base_url)
        ...
        assert server.stats().total(path="/embeddings") == 1

Run directly (from the repository root): python -m tests.support.fakes.openrouter_server --port 8765

`FakeServerProcess` is the subprocess lifecycle shared with the other fake servers (local_llm_server).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self

import httpx
from pydantic import BaseModel

from samespace.head import free_port

from .openrouter_fake import FakeConfig, FakeState, FakeStats, build_fake_app, shared_encoder

REPO_ROOT = Path(__file__).resolve().parents[3]
LOOPBACK = "127.0.0.1"
DEFAULT_STARTUP_TIMEOUT_S = 90.0  # the child loads MiniLM before it answers
STOP_GRACE_S = 5.0
_POLL_S = 0.1


class FakeServerProcess:
    """A fake's ASGI server in a child process (`python -m <module>`) on 127.0.0.1, stopped by PID.

    Shared lifecycle of the fake servers: start and wait for `health_path`, push configuration
    (`_after_start`), stop (SIGTERM, then SIGKILL after STOP_GRACE_S), kill (SIGKILL at once, like a
    crash), restart on the same port. Subclasses set `module`, `health_path`, `name`.
    """

    module: ClassVar[str]
    health_path: ClassVar[str]
    name: ClassVar[str] = "fake server"

    def __init__(self, *, port: int | None = None, startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S) -> None:
        self.port = port or free_port()
        self.root_url = f"http://{LOOPBACK}:{self.port}"
        self._startup_timeout_s = startup_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        self._http = httpx.Client(base_url=self.root_url, timeout=10.0)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # -- hooks --

    def _extra_args(self) -> list[str]:
        """Command-line arguments after --host/--port."""
        return []

    def _after_start(self) -> None:
        """Runs once the child answers (push the configuration)."""

    # -- lifecycle --

    def start(self) -> Self:
        if self._process is not None:
            raise RuntimeError("already started")
        env = dict(os.environ)
        env["HF_HUB_OFFLINE"] = "1"
        env["TRANSFORMERS_OFFLINE"] = "1"
        env["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        command = [sys.executable, "-m", self.module, "--host", LOOPBACK, "--port", str(self.port), *self._extra_args()]
        self._log = tempfile.TemporaryFile()  # noqa: SIM115  outlives this call: the child writes it, stop() closes it
        self._process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_until_answering()
            self._after_start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Terminate the child, kill it after STOP_GRACE_S, and reap it."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._close_log()

    def kill(self) -> None:
        """SIGKILL the child now (a crashed endpoint) and reap it: its port then refuses connections."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        self._close_log()

    def restart(self) -> Self:
        """Stop the child if it still runs, then start a fresh one on the same port."""
        self.stop()
        return self.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        self._http.close()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def _wait_until_answering(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self._startup_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self._process.returncode}:\n{self._log_tail()}")
            try:
                if self._http.get(self.health_path, timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(_POLL_S)
        raise TimeoutError(f"{self.name} did not answer within {self._startup_timeout_s} s:\n{self._log_tail()}")

    def _log_tail(self, limit: int = 4000) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-limit:]

    # -- control plane helpers --

    def _post_json(self, path: str, model: BaseModel) -> None:
        response = self._http.post(path, content=model.model_dump_json(), headers={"content-type": "application/json"})
        response.raise_for_status()

    def _get_json(self, path: str) -> Any:
        response = self._http.get(path)
        response.raise_for_status()
        return response.json()

    def chat_log(self) -> list[dict[str, Any]]:
        """Every chat request body the fake received (the last 500), oldest first."""
        return list(self._get_json("/_fake/chat_log"))

    def reset(self) -> None:
        self._http.post("/_fake/reset").raise_for_status()


class FakeOpenRouterServer(FakeServerProcess):
    """Starts `python -m tests.support.fakes.openrouter_server` on 127.0.0.1 and stops it by PID on exit.

    config:            pushed once the server answers (None → an empty FakeConfig: no keys)
    port:              None → a free port
    startup_timeout_s: how long to wait for /_fake/health
    preload:           load MiniLM in the child before it answers (first embed is then fast)
    """

    module = "tests.support.fakes.openrouter_server"
    health_path = "/_fake/health"
    name = "fake OpenRouter"

    def __init__(
        self,
        *,
        config: FakeConfig | None = None,
        port: int | None = None,
        startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
        preload: bool = True,
    ) -> None:
        super().__init__(port=port, startup_timeout_s=startup_timeout_s)
        self.base_url = f"{self.root_url}/api/v1"
        self._config = config
        self._preload = preload

    def __repr__(self) -> str:
        return f"FakeOpenRouterServer(base_url={self.base_url!r}, pid={self.pid})"

    def _extra_args(self) -> list[str]:
        return [] if self._preload else ["--no-preload"]

    def _after_start(self) -> None:
        if self._config is not None:
            self.configure(self._config)

    # -- control plane --

    def configure(self, config: FakeConfig | None = None, **fields: Any) -> None:
        """Replace the fake's configuration: a FakeConfig, or its fields as keywords."""
        config = config if config is not None else FakeConfig(**fields)
        self._post_json("/_fake/config", config)
        self._config = config

    def arrivals(self) -> list[tuple[float, str, int]]:
        """(monotonic time, key label, status at admission) of every inference request, oldest first."""
        return [(float(t), str(label), int(status)) for t, label, status in self._get_json("/_fake/arrivals")]

    def stats(self) -> FakeStats:
        return FakeStats.model_validate(self._get_json("/_fake/stats"))

    def seen(self, needles: list[str]) -> list[str]:
        """Which of `needles` occur in any request body the fake received (embeddings, rerank, chat)."""
        response = self._http.post("/_fake/seen", json={"needles": needles})
        response.raise_for_status()
        return list(response.json()["seen"])


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="OpenRouter-compatible fake (tests only).")
    parser.add_argument("--host", default=LOOPBACK)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--config", type=Path, default=None, help="FakeConfig JSON file to start with.")
    parser.add_argument("--no-preload", action="store_true", help="Load MiniLM on the first embedding request.")
    args = parser.parse_args(argv)

    config = FakeConfig.model_validate_json(args.config.read_text()) if args.config else FakeConfig()
    if not args.no_preload:
        shared_encoder()
    app = build_fake_app(FakeState(config=config))
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
