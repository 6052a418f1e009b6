"""`ray start`, with only the parts of Ray that `samespace run` uses.

    python -m samespace.ray_head start --head ...     # what `samespace run` runs (samespace/head.py)

Besides the GCS and the raylet, `ray start --head` starts a dashboard that forks nine module
processes (metrics, data, events, jobs, nodes, reports, serve, state, train; about 100 MB each),
and a Ray client server for `ray://` addresses. `samespace run` needs three of the modules: jobs
(`ray job submit`, `ray job logs`), nodes (the Jobs API finds the head's agent through it) and
serve (`serve deploy`, `serve status`, `serve shutdown`), and no `ray://`. Ray's `dashboard.py`
takes `--modules-to-load`, but `ray start` has no option that passes it, so this module runs Ray's
own `ray start` command with two changes made in its process before it starts anything:

- the dashboard's command line gets `--modules-to-load=` the modules in `LEAN_DASHBOARD_MODULES`;
- no client server, unless `--ray-client-server-port` is on the command line.

Everything else is plain `ray start` (its flags, checks, logs and exit codes); samespace/head.py
adds `--no-monitor` and `--include-log-monitor=false` and turns task events off. `samespace run
--full-dashboard` runs `ray` itself instead, with all of it.

Metrics are unaffected: Ray's metrics agent (the Prometheus endpoint on `--metrics-export-port`,
Ray's, Serve's and samespace's series) runs in each node's dashboard *agent*, which this cut does not
touch. What the cut leaves out is the head module that writes Prometheus' file-based discovery
(`ReportHead`: `prom_metrics_service_discovery.json` in the session folder); scrape the fixed port
instead (dashboards/prometheus.yml), or use `--full-dashboard`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["LEAN_DASHBOARD_MODULES", "dashboard_command", "main"]

# The dashboard modules `samespace run` uses: the Jobs API (`ray job submit`), the node table the
# Jobs API finds the head's agent through (NodeHead records the head node's id), and the Serve
# REST API (`serve deploy`). Names as Ray's module classes have them (ray.dashboard.modules.*).
LEAN_DASHBOARD_MODULES = ("JobHead", "NodeHead", "ServeHead")
MODULES_FLAG = "--modules-to-load"
CLIENT_PORT_FLAG = "--ray-client-server-port"


def dashboard_command(command: Sequence[str], modules: Sequence[str] = LEAN_DASHBOARD_MODULES) -> list[str]:
    """The dashboard's command line with only `modules` loaded (one already chosen is kept)."""
    if any(part.startswith(MODULES_FLAG) for part in command):
        return list(command)
    return [*command, f"{MODULES_FLAG}={','.join(modules)}"]


def _lean_start_ray_process(original: Callable[..., Any], dashboard_type: str) -> Callable[..., Any]:
    def start_ray_process(command: list[str], process_type: str, *args: Any, **kwargs: Any) -> Any:
        if process_type == dashboard_type:
            command = dashboard_command(command)
        return original(command, process_type, *args, **kwargs)

    return start_ray_process


def _no_client_server() -> ImportError:
    return ImportError("the Ray client server is not started by samespace run (nothing uses ray://)")


def main(argv: Sequence[str] | None = None) -> int:
    """Ray's `ray` command (argv: `start --head ...`) with the lean dashboard and no client server."""
    import ray._private.ray_constants as ray_constants
    import ray._private.services as services
    import ray.scripts.scripts as scripts

    args = list(sys.argv[1:] if argv is None else argv)
    services.start_ray_process = _lean_start_ray_process(
        services.start_ray_process, ray_constants.PROCESS_TYPE_DASHBOARD
    )
    if not any(arg.startswith(CLIENT_PORT_FLAG) for arg in args):
        # `ray start` starts the client server whenever its dependencies import; this says they do not.
        scripts.get_ray_client_dependency_error = _no_client_server
    sys.argv = ["ray", *args]
    try:
        scripts.main()
    except SystemExit as exc:  # click exits with the command's status
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
