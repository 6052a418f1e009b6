"""A child process and everything it started, killed at once by PID (SIGKILL): a machine that vanishes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

import psutil


def kill_tree(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL to `process` and all its descendants at once, then reap it (no goodbye to anyone)."""
    if process.poll() is not None:
        return
    group = [process.pid, *(child.pid for child in psutil.Process(process.pid).children(recursive=True))]
    for pid in group:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait(10)
