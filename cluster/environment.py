"""Process environment for tests, benchmarks and scripts that start their own local Ray.

`make run` is different: its cluster runs with token authentication (`RAY_AUTH_MODE=token`, the
token read from the file `RAY_AUTH_TOKEN_PATH` names), set by the Makefile for `run` and `stop`.
The throwaway in-process clusters that `tests/conftest.py` and `bench/` start with
`ray.init(address="local")` stay unauthenticated, for speed and so that no token file has to be
managed per run: their Ray ports and Serve proxy listen on 127.0.0.1, but Ray 2.60 binds each Serve
replica's inter-deployment gRPC server to every interface, and without a token nothing guards it
while such a run lasts. Run them on a host whose network you trust.
"""

from __future__ import annotations

import os

LOCAL_ENV = {
    "HF_HUB_OFFLINE": "1",  # a stray hub id fails at once instead of hanging ~70 s
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_USAGE_STATS_ENABLED": "0",  # no usage reporting
    # Explicit, or a stray ~/.ray/auth_token flips auth on (and a plain ray.init() would write one).
    "RAY_AUTH_MODE": "disabled",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # makes Ray choose 127.0.0.1 as the node address
}


def set_local_env_defaults() -> None:
    """Set LOCAL_ENV for this process wherever the caller has not set a value already."""
    for key, value in LOCAL_ENV.items():
        os.environ.setdefault(key, value)
