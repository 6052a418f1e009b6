"""A second Ray node on this machine, on loopback: `python -m tests.support.fakes.ray_worker_node`.

`ray start --address` refuses to join while RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (the knob that
keeps every Ray port on 127.0.0.1 here), and with it set to 1 Ray rewrites 127.0.0.1 to the
eth0 address. This starts the same worker-node processes (raylet, agents) through Ray's own
`Node` class with the node IP pinned to 127.0.0.1, as Ray's cluster_utils does for its tests,
and stops them all on SIGTERM. It exists for tests only.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from types import FrameType

from cluster.environment import set_local_env_defaults


def main(argv: list[str] | None = None) -> int:
    set_local_env_defaults()
    import ray._private.node
    import ray._private.parameter

    parser = argparse.ArgumentParser(prog="python -m tests.support.fakes.ray_worker_node")
    parser.add_argument("--address", required=True, help="GCS address of the head, host:port")
    parser.add_argument("--num-cpus", type=int, default=1)
    parser.add_argument("--resources", default="{}", help="JSON custom resources, e.g. '{\"fake_gpu\": 1}'")
    args = parser.parse_args(argv)
    params = ray._private.parameter.RayParams(  # noqa: SLF001  Ray has no public way to start a loopback worker node
        gcs_address=args.address,
        node_ip_address="127.0.0.1",
        num_cpus=args.num_cpus,
        num_gpus=0,
        resources=json.loads(args.resources),
        object_store_memory=150 * 1024 * 1024,
        min_worker_port=0,
        max_worker_port=0,
        include_log_monitor=False,
        node_manager_port=0,
    )
    params.dashboard_agent_listen_port = None
    node = ray._private.node.Node(  # noqa: SLF001  no public equivalent; ray.cluster_utils does the same
        params, head=False, shutdown_at_exit=False, spawn_reaper=False
    )
    print(f"node {node.unique_id} up at 127.0.0.1", flush=True)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    stop.wait()
    node.kill_all_processes(check_alive=False, allow_graceful=False)
    print("node stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
