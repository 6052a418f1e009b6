"""Process environment for running offline on a loopback-only local Ray (Makefile mirrors it)."""

from __future__ import annotations

import os

LOCAL_ENV = {
    "HF_HUB_OFFLINE": "1",  # a stray hub id fails at once instead of hanging ~70 s
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_USAGE_STATS_ENABLED": "0",  # no usage reporting
    "RAY_AUTH_MODE": "disabled",  # explicit everywhere, or a stray ~/.ray/auth_token flips it on
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # makes Ray choose 127.0.0.1 as the node address
}


def set_local_env_defaults() -> None:
    """Set LOCAL_ENV for this process wherever the caller has not set a value already."""
    for key, value in LOCAL_ENV.items():
        os.environ.setdefault(key, value)
