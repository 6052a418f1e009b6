"""The state folder of a local cluster (`.samespace/`) and the environment its commands run with.

The folder is 0700: it holds the Ray cluster token (`ray-token`, 0600), the admin token (`admin-token`,
0600), the admin config store and, by default, the embedded store's data (source text). Both tokens are
generated here, in Python, under umask 077: they never appear in argv or output. Ray reads its token from
the file `RAY_AUTH_TOKEN_PATH` names, so no command line ever carries it.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cluster.environment import LOCAL_ENV

__all__ = ["ADMIN_TOKEN_FILE_ENV", "ROOT", "StateDir", "cluster_env", "program"]

# The repository checkout this package is installed from (editable): serve_config.yaml, jobs/ and the
# default state folder live there, as they do for `make run`.
ROOT = Path(__file__).resolve().parents[1]
RAY_TOKEN_BYTES = 32  # hex-encoded: 64 characters
ADMIN_TOKEN_BYTES = 32  # url-safe base64
ADMIN_TOKEN_FILE_ENV = "SAMESPACE_ADMIN__TOKEN_FILE"  # where the admin token's file is named, for every command


def program(name: str) -> str:
    """The `ray` / `serve` executable beside this interpreter (the venv's), else the one on PATH."""
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else name


@dataclass(frozen=True)
class StateDir:
    """Paths inside the state folder; nothing is created until `ensure()` or a token is asked for."""

    path: Path

    @property
    def ray_token(self) -> Path:
        return self.path / "ray-token"

    @property
    def admin_token(self) -> Path:
        return self.path / "admin-token"

    @property
    def config_json(self) -> Path:
        return self.path / "config.json"

    @property
    def data_dir(self) -> Path:
        return self.path / "data"

    @property
    def ray_start_log(self) -> Path:
        return self.path / "ray-start.log"

    @property
    def head_record(self) -> Path:
        return self.path / "ray-head.json"

    @property
    def serve_config(self) -> Path:
        return self.path / "serve_config.yaml"

    def ensure(self) -> None:
        """Create the folder 0700 (and make an existing one 0700)."""
        old = os.umask(0o077)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        finally:
            os.umask(old)
        self.path.chmod(0o700)

    def ensure_ray_token(self) -> bool:
        """Make the Ray cluster token once (0600); True when it was made now."""
        if self.ray_token.exists():
            return False
        _write_secret(self.ray_token, secrets.token_hex(RAY_TOKEN_BYTES))
        return True

    def ensure_admin_token(self) -> bool:
        """Make the admin API's bearer token unless a non-blank one exists (blank is unset, as the admin
        app reads it); True when it was made now."""
        if self.admin_token.is_file() and self.admin_token.read_text(encoding="utf-8").strip():
            return False
        _write_secret(self.admin_token, secrets.token_urlsafe(ADMIN_TOKEN_BYTES) + "\n")
        return True


def _write_secret(path: Path, text: str) -> None:
    StateDir(path.parent).ensure()
    old = os.umask(0o077)
    try:
        path.write_text(text, encoding="utf-8")
    finally:
        os.umask(old)
    path.chmod(0o600)


def cluster_env(
    state: StateDir, base: Mapping[str, str], *, mcp_port: int | None = None, data_dir: Path | None = None
) -> dict[str, str]:
    """The environment of every command that starts or talks to the token-guarded local cluster.

    What `make run` exported: offline model loading, no usage stats, this venv first on PATH (the
    cluster's job drivers run `python` from it), the store and admin files in the state folder unless
    the caller's environment names others, and token auth with the token read from its file.
    """
    env = dict(base)
    env.update(LOCAL_ENV)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if data_dir is not None:
        env["SAMESPACE_STORE__DATA_DIR"] = str(data_dir)
    env.setdefault("SAMESPACE_STORE__DATA_DIR", str(state.data_dir))
    env.setdefault(ADMIN_TOKEN_FILE_ENV, str(state.admin_token))
    env.setdefault("SAMESPACE_ADMIN__CONFIG_PATH", str(state.config_json))
    if mcp_port is not None:
        env["SAMESPACE_SERVE__PORT"] = str(mcp_port)
    env["RAY_AUTH_MODE"] = "token"
    env["RAY_AUTH_TOKEN_PATH"] = str(state.ray_token)
    return env
