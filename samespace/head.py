"""Start and stop the local Ray head of `samespace run`, and only that one.

`ray start --head` runs in a new session (`setsid`): its daemons (GCS, raylet, dashboard, agents) and
the workers the raylet spawns stay in that session after `ray start` returns, so `stop` signals exactly
the processes of that session. `ray stop` would kill every Ray process of the user, a test suite's or
another checkout's cluster included; it is used only for a head started without a record (an older
`make run`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from samespace.state import StateDir, program

__all__ = [
    "DEFAULT_DASHBOARD_PORT",
    "DEFAULT_GCS_PORT",
    "DEFAULT_METRICS_PORT",
    "FIXED_PORT_FLAGS",
    "LOOPBACK",
    "METRICS_PORT_FLAG",
    "HeadRecord",
    "HeadSpec",
    "daemon_pids",
    "direct_ingress_env",
    "free_port",
    "is_listening",
    "listening_inodes",
    "processes_naming",
    "ray_start_argv",
    "session_listens_on",
    "session_members",
    "start_head",
    "stop_session",
]

LOOPBACK = "127.0.0.1"
DEFAULT_GCS_PORT = 6379
DEFAULT_DASHBOARD_PORT = 8265
# Ray's Prometheus endpoint, http://127.0.0.1:<port>/metrics: Ray's and samespace's series (the metrics
# agent runs in each node's dashboard agent, which the lean head keeps). Ray's own default is a port
# it picks; a scraper needs a fixed one (dashboards/prometheus.yml).
DEFAULT_METRICS_PORT = 8266
METRICS_PORT_FLAG = "--metrics-export-port"
STOP_GRACE_S = 15.0  # SIGTERM, then SIGKILL for what is left (the raylet drains its workers first)
KILL_WAIT_S = 5.0  # SIGKILL again and again, this long at most, until the session has no process left
TCP_LISTEN = "0A"  # the state column of a listening socket in /proc/net/tcp
DAEMONS = frozenset({"gcs_server", "raylet"})  # a session holding one of these is a Ray head's
# `ray start` options whose ports default to fixed numbers (the dashboard agent's 52365, ...): a
# second head on one machine (a test's, a bench's) passes free ones so that it cannot clash.
FIXED_PORT_FLAGS = (
    "--node-manager-port",
    "--object-manager-port",
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    METRICS_PORT_FLAG,
    "--runtime-env-agent-port",
)
TASK_EVENTS_ENV = "RAY_task_events_report_interval_ms"  # 0: workers report no task events
MALLOC_ARENAS_ENV = "MALLOC_ARENA_MAX"


def direct_ingress_env(port: int) -> dict[str, str]:
    """Serve's direct ingress on `port`: the MCP replica serves HTTP on it itself, no proxy actor between
    the client and the app (one hop and one serialisation less a request). The controller hands replicas
    ports from [min, max), so exactly this one; a port a replica gave up is free at once (no quarantine),
    and a stopping replica waits for its requests only (the 30 s default is for a load balancer's
    deregistration, and samespace run has none). The controller and the replica read these at import,
    so they are the head's environment, not the app's."""
    return {
        "RAY_SERVE_ENABLE_DIRECT_INGRESS": "1",
        "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": str(port),
        "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": str(port + 1),
        "RAY_SERVE_PORT_QUARANTINE_S": "0",
        "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "0",
    }


@dataclass(frozen=True)
class HeadSpec:
    """How `ray start --head` is called: every port on 127.0.0.1, usage stats off."""

    num_cpus: int
    port: int = DEFAULT_GCS_PORT
    dashboard_port: int = DEFAULT_DASHBOARD_PORT
    temp_dir: Path | None = None
    extra_args: tuple[str, ...] = field(default=())
    # Every dashboard module, the client server, the autoscaler's monitor (`ray status`), the log
    # monitor (workers' output on the drivers' consoles) and the task table (`ray list tasks`, the
    # dashboard's task views). Off: only what `samespace run` uses (samespace/ray_head.py).
    full_dashboard: bool = False
    # The MCP port when the MCP replica serves it itself (Serve's direct ingress), else None: Serve's
    # proxy serves the port named in the Serve config.
    direct_ingress_port: int | None = None
    # The metrics export port (DEFAULT_METRICS_PORT for a scraper), or None: one Ray picks. A
    # `--metrics-export-port` among `extra_args` wins. Ray binds it to 127.0.0.1, the node's address.
    metrics_port: int | None = None

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """The head's environment (its daemons and every worker inherit it): two malloc arenas a
        process; lean, no task events either (every actor call would report one to the GCS); direct
        ingress on its port when the spec names one."""
        head_env = dict(env)
        if self.direct_ingress_port is not None:
            head_env.update(direct_ingress_env(self.direct_ingress_port))
        if not self.full_dashboard:
            head_env.setdefault(TASK_EVENTS_ENV, "0")
        # glibc gives each thread that allocates an arena of its own, up to 8 per core; Ray's
        # processes run dozens of threads. Two arenas per process hold the same work in less memory.
        head_env.setdefault(MALLOC_ARENAS_ENV, "2")
        return head_env

    @property
    def gcs_address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def dashboard_url(self) -> str:
        return f"http://{LOOPBACK}:{self.dashboard_port}"


@dataclass(frozen=True)
class HeadRecord:
    """What `run` remembers in the state folder so that `stop` finds the head it started."""

    session: int  # the session id of `ray start` and every process it started
    gcs_address: str
    dashboard_url: str
    direct_ingress_port: int | None = None  # HeadSpec.direct_ingress_port of the head it started

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)), encoding="utf-8")

    @classmethod
    def read(cls, path: Path) -> HeadRecord | None:
        try:
            return cls(**json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None


def ray_start_argv(spec: HeadSpec) -> list[str]:
    """The `ray start` command line; it carries no secret (the token is read from RAY_AUTH_TOKEN_PATH).
    Lean (the default): Ray's `ray start` through samespace/ray_head.py; full: `ray` itself."""
    ray = [program("ray")] if spec.full_dashboard else [sys.executable, "-m", "samespace.ray_head"]
    argv = [
        *ray,
        "start",
        "--head",
        f"--num-cpus={spec.num_cpus}",
        "--disable-usage-stats",
        f"--node-ip-address={LOOPBACK}",
        f"--dashboard-host={LOOPBACK}",
        f"--port={spec.port}",
        f"--dashboard-port={spec.dashboard_port}",
    ]
    if not spec.full_dashboard:
        # The autoscaler's monitor (a local head has nothing to autoscale), and the log monitor, which
        # streams every worker's output to the drivers (it stays in the session's log files).
        argv += ["--no-monitor", "--include-log-monitor=false"]
    if spec.temp_dir is not None:
        argv.append(f"--temp-dir={spec.temp_dir}")
    if spec.metrics_port is not None and not any(arg.startswith(METRICS_PORT_FLAG) for arg in spec.extra_args):
        argv.append(f"{METRICS_PORT_FLAG}={spec.metrics_port}")
    return [*argv, *spec.extra_args]


def is_listening(port: int, timeout_s: float = 1.0) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:port."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def start_head(spec: HeadSpec, state: StateDir, env: Mapping[str, str]) -> HeadRecord:
    """Run `ray start --head` in a new session, its output in the state folder; record the session."""
    with state.ray_start_log.open("wb") as log:
        started = subprocess.Popen(
            ray_start_argv(spec),
            env=spec.environment(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        code = started.wait()
    if code != 0:
        stop_session(started.pid)  # whatever it started before failing
        raise SystemExit(
            f"samespace run: ray start failed (exit {code}): read {state.ray_start_log}; "
            "a port already in use takes another --port, --dashboard-port or --mcp-port"
        )
    record = HeadRecord(
        session=started.pid,
        gcs_address=spec.gcs_address,
        dashboard_url=spec.dashboard_url,
        direct_ingress_port=spec.direct_ingress_port,
    )
    record.write(state.head_record)
    return record


def session_members(session: int) -> list[int]:
    """Live PIDs whose session id is `session`."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp session ...
        if int(fields[3]) == session and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def processes_naming(text: str) -> list[int]:
    """Live PIDs (this process aside) whose command line names `text`: every Ray process names its
    session folder, so a temp dir's name finds whatever a head left behind."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if text.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:  # gone meanwhile
            continue
    return found


def listening_inodes(table: str, port: int) -> set[int]:
    """The socket inodes of a /proc/net/tcp(6) table that listen on `port` (any local address)."""
    inodes = set()
    for line in table.splitlines()[1:]:
        fields = line.split()
        # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
        if len(fields) > 9 and fields[3] == TCP_LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
            inodes.add(int(fields[9]))
    return inodes


def session_listens_on(session: int, port: int) -> bool:
    """Whether processes of `session` hold every socket that listens on TCP `port` (and there is one):
    the test that what answers on a port is the head a record names (a pid or a session id alone can
    have been reused by someone else since)."""
    inodes: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            inodes |= listening_inodes(Path(table).read_text(), port)
    wanted = {f"socket:[{inode}]" for inode in inodes}
    held = set()
    for pid in session_members(session):
        with contextlib.suppress(OSError):  # gone meanwhile, or not ours to look into
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    held.add(os.readlink(fd))
    return bool(wanted) and wanted <= held


def daemon_pids(session: int) -> list[int]:
    """The GCS and raylet processes of the session (none: it is not, or no longer, a Ray head's)."""
    return [pid for pid in session_members(session) if _comm(pid) in DAEMONS]


def stop_session(session: int, grace_s: float = STOP_GRACE_S) -> bool:
    """SIGTERM every process of a Ray head's session, SIGKILL what is left after `grace_s` (again, for
    up to KILL_WAIT_S, until no process of the session is left).

    A session with no GCS or raylet is left alone (the record is stale and the id may be reused);
    returns whether there was a head to stop.
    """
    if not daemon_pids(session):
        return False
    _signal_all(session_members(session), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while session_members(session) and time.monotonic() < deadline:
        time.sleep(0.25)
    # SIGKILL until none is left: a process forked after a listing is in none of it (a raylet starting a
    # worker as it stops), and one killed is still listed until it has exited.
    deadline = time.monotonic() + KILL_WAIT_S
    while (left := session_members(session)) and time.monotonic() < deadline:
        _signal_all(left, signal.SIGKILL)
        time.sleep(0.05)
    return True


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
