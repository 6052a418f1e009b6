"""A second real Ray node on this machine (tests/support/fakes/ray_worker_node.py): a raylet and its agents on
127.0.0.1, with a custom resource `fake_gpu` standing in for a GPU. Stopped politely (`stop`, SIGTERM)
or crashed (`crash`, SIGKILL to every process of the node at once)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.support.process_tree import kill_tree

ROOT = Path(__file__).resolve().parents[2]
NODE_ARGS = ("--num-cpus", "1", "--resources", '{"fake_gpu": 1}')


class SecondNode:
    def __init__(self, gcs_address: str, log: Path) -> None:
        self._log = log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.fakes.ray_worker_node", "--address", gcs_address, *NODE_ARGS],
            cwd=ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def stop(self) -> None:
        """SIGTERM: the node stops its processes and leaves; SIGKILL after 30 s."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log.close()

    def crash(self) -> None:
        """SIGKILL to the node's every process at once: no goodbye to the GCS, nothing left running."""
        kill_tree(self.process)
        self._log.close()
