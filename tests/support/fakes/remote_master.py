"""A second samespace master in its own Ray cluster: `python -m tests.support.fakes.remote_master`.

For the tests of a sidecar that reports to two masters: this process starts a local Ray cluster of
its own (its own GCS, raylet and Serve proxy, on ports apart from the session's), serves the MCP app
(with the admin API and the `/sidecar` routes) on `--port`, and acts as that cluster's driver for
reindexes the test asks for. It talks to the test through files in `--work`:

    ready.json                  written once Serve answers: {"port", "pid", "session_dir"}
    requests/<id>.json          {"op": "reindex", "repo": ..., "index": ...} or {"op": "writers", "build": ...}
    requests/<id>.out.json      the answer: the reindex's record and output lines, or rows by writer

The settings come as the keyword arguments of `SamespaceSettings`, in `--settings` (a JSON file;
secrets as plain strings, as a test writes them). SIGTERM stops Serve and Ray; a test that wants a
master to vanish kills the process group instead. It exists for tests only.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from types import FrameType
from typing import Any

from cluster.environment import set_local_env_defaults
from tests.support.index_rows import rows_by_writer
from tests.support.process_tree import kill_tree

POLL_S = 0.1
ROOT = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 180.0


class RemoteMaster:
    """The test's handle on a master process: start it, ask it for reindexes, stop or kill it by PID."""

    def __init__(self, settings: dict[str, Any], port: int, work: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self._work = work
        self._ids = itertools.count(1)
        work.mkdir(parents=True, exist_ok=True)
        (work / "settings.json").write_text(json.dumps(settings))
        self._log_path = work / "master.log"
        self._log = self._log_path.open("w")
        command = [sys.executable, "-m", "tests.support.fakes.remote_master", "--settings", str(work / "settings.json")]
        self.process = subprocess.Popen(
            [*command, "--port", str(port), "--work", str(work)],
            cwd=ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its Ray processes are its group: a kill takes them all
        )

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not (self._work / "ready.json").exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the second master did not start:\n{self.log()[-4000:]}")
            time.sleep(0.2)

    def session_dir(self) -> Path:
        """The Ray session folder of this master's cluster (logs, events, spilled objects)."""
        return Path(json.loads((self._work / "ready.json").read_text())["session_dir"])

    def log(self) -> str:
        return self._log_path.read_text(errors="replace")

    def ask(self, request: dict[str, Any], timeout_s: float = 300.0) -> dict[str, Any]:
        """Hand the master a request and wait for its answer (an error answer raises)."""
        path = self._work / "requests" / f"r{next(self._ids)}.json"
        path.write_text(json.dumps(request))
        out = path.with_suffix(".out.json")
        deadline = time.monotonic() + timeout_s
        while not out.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no answer to {request['op']}:\n{self.log()[-4000:]}")
            time.sleep(0.2)
        answer: dict[str, Any] = json.loads(out.read_text())
        if not answer.get("ok"):
            raise AssertionError(f"{request['op']} failed on the second master:\n{answer.get('error')}")
        return answer

    def kill(self) -> None:
        """SIGKILL to the master and every Ray process it started, at once: a master that vanishes."""
        kill_tree(self.process)
        self._reap_group()
        self._log.close()

    def stop(self) -> None:
        """SIGTERM: Serve and Ray shut down; then anything left of the group is killed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._reap_group()
        if not self._log.closed:
            self._log.close()

    def _reap_group(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    set_local_env_defaults()
    parser = argparse.ArgumentParser(prog="python -m tests.support.fakes.remote_master")
    parser.add_argument("--settings", type=Path, required=True, help="JSON file: SamespaceSettings keyword arguments")
    parser.add_argument("--port", type=int, required=True, help="Serve's HTTP port on 127.0.0.1")
    parser.add_argument("--work", type=Path, required=True, help="folder for ready.json and requests/")
    args = parser.parse_args(argv)

    import ray
    from ray import serve

    from cluster.settings import SamespaceSettings
    from serve_apps.mcp import McpIngress

    settings = SamespaceSettings(**json.loads(args.settings.read_text()))
    env = {
        "SAMESPACE_STORE__DATA_DIR": str(settings.store.data_dir),
        "SAMESPACE_RAY__NAMESPACE": settings.ray.namespace,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    os.environ.update(env)
    ray.init(
        address="local",
        num_cpus=3,
        namespace=settings.ray.namespace,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=200 * 1024 * 1024,
        runtime_env={"env_vars": env},
    )
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": args.port})
        serve.run(McpIngress.options(num_replicas=1).bind(settings), name="mcp", route_prefix="/")
        requests = args.work / "requests"
        requests.mkdir(parents=True, exist_ok=True)
        session_dir = ray._private.worker._global_node.get_session_dir_path()  # noqa: SLF001  no public accessor
        ready = {"port": args.port, "pid": os.getpid(), "session_dir": session_dir}
        (args.work / "ready.json").write_text(json.dumps(ready))
        print(f"master up on 127.0.0.1:{args.port}", flush=True)
        while not stopping:
            for request in sorted(requests.glob("*.json")):
                if request.name.endswith(".out.json") or request.with_suffix(".out.json").exists():
                    continue
                answer = _answer(settings, json.loads(request.read_text()))
                partial = request.with_suffix(".part")
                partial.write_text(json.dumps(answer))
                partial.rename(request.with_suffix(".out.json"))
            time.sleep(POLL_S)
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()
    return 0


def _answer(settings: Any, request: dict[str, Any]) -> dict[str, Any]:
    try:
        if request["op"] == "reindex":
            from actors.build_ports import run_reindex

            lines: list[str] = []
            record = run_reindex(settings, Path(request["repo"]), request["index"], emit=lines.append)
            return {"ok": True, "record": record.model_dump(mode="json"), "lines": lines}
        if request["op"] == "writers":
            return {"ok": True, "writers": dict(rows_by_writer(settings, request["build"]))}
        return {"ok": False, "error": f"unknown op {request['op']!r}"}
    except Exception:  # noqa: BLE001 - the test reads the traceback; the master keeps serving
        return {"ok": False, "error": traceback.format_exc()}


if __name__ == "__main__":
    sys.exit(main())
