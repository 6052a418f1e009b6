"""What one sidecar is told at start-up, validated once: the master, the fronted servers, the timings.

`SidecarSettings` is built by `sidecar.cli.load_settings` from the command line and the environment;
secrets (the fleet token, the upstream key) are `SecretStr` and never appear in a repr or an error.
"""

from __future__ import annotations

import re
from enum import StrEnum
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from sidecar.errors import SettingsError

__all__ = [
    "DEFAULT_HEARTBEAT_S",
    "DEFAULT_POLL_WAIT_S",
    "DEFAULT_WS_RETRY_S",
    "ServeSpec",
    "SidecarSettings",
    "TransportMode",
    "parse_serve",
]

DEFAULT_HEARTBEAT_S = 5.0
DEFAULT_POLL_WAIT_S = 10.0
DEFAULT_WS_RETRY_S = 60.0
DEFAULT_UPSTREAM_TIMEOUT_S = 120.0
DEFAULT_PROBE_TIMEOUT_S = 2.0
DEFAULT_REGISTER_TIMEOUT_S = 10.0
CONTAINER_PREFIX = "ss-"
_ROLE_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


class TransportMode(StrEnum):
    WS = "ws"
    HTTP = "http"
    AUTO = "auto"  # WebSocket, else the HTTP fallback when the handshake is answered with a status


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


def _check_http_url(value: str, what: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} must be an http(s) URL with a host, got {value!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"{what} must not have a query or fragment, got {value!r}")
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise ValueError(f"{what} has a bad port: {value!r}") from exc
    return value.rstrip("/")


class ServeSpec(_Strict):
    """One fronted OpenAI-compatible server: `--serve ROLE=BASE_URL[,model=NAME]`."""

    role: str = Field(description="Role the server fills, e.g. 'code-embedding' (container name ss-<role>).")
    base_url: str = Field(description="OpenAI base URL, e.g. http://127.0.0.1:9201/v1 (no trailing slash).")
    model: str | None = Field(default=None, min_length=1, description="Model name; None = ask GET /models.")

    @field_validator("role")
    @classmethod
    def _role_slug(cls, value: str) -> str:
        if not _ROLE_PATTERN.fullmatch(value):
            raise ValueError(f"role must be a lowercase slug like 'code-embedding', got {value!r}")
        return value

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _check_http_url(value, "base URL")

    @property
    def container_name(self) -> str:
        return f"{CONTAINER_PREFIX}{self.role}"

    @property
    def port(self) -> int:
        parts = urlsplit(self.base_url)
        return parts.port or (443 if parts.scheme == "https" else 80)


def parse_serve(text: str) -> ServeSpec:
    """`code-embedding=http://127.0.0.1:9201/v1,model=all-MiniLM-L6-v2` → ServeSpec (SettingsError if bad)."""
    role, sep, rest = text.partition("=")
    if not sep or not role or not rest:
        raise SettingsError("--serve", f"expected ROLE=BASE_URL[,model=NAME], got {text!r}")
    url, *options = rest.split(",")
    model: str | None = None
    for option in options:
        key, sep, value = option.partition("=")
        if key.strip() != "model" or not sep or not value.strip():
            raise SettingsError("--serve", f"unknown option {option!r} in {text!r}; only model=NAME is accepted")
        model = value.strip()
    try:
        return ServeSpec(role=role.strip(), base_url=url.strip(), model=model)
    except ValueError as exc:  # pydantic ValidationError is a ValueError
        raise SettingsError("--serve", _first_message(exc)) from exc


def _first_message(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors(include_url=False, include_input=False)[0]
        return str(first["msg"]).removeprefix("Value error, ")
    return str(exc)


class SidecarSettings(_Strict):
    """Everything the agent needs; validated when built."""

    master: str = Field(description="Master base URL, e.g. http://127.0.0.1:8000/prefix.")
    agent_url: str = Field(min_length=1, max_length=2048, description="This sidecar's id at the master.")
    hostname: str = Field(min_length=1, max_length=255)
    serves: tuple[ServeSpec, ...] = Field(min_length=1, max_length=64, description="The fronted servers.")
    fleet_token: SecretStr = Field(description="Bearer token for the master (SAMESPACE_FLEET_TOKEN).")
    upstream_key: SecretStr | None = Field(default=None, description="Bearer key for the fronted servers.")
    transport: TransportMode = TransportMode.AUTO
    heartbeat_s: float = Field(default=DEFAULT_HEARTBEAT_S, gt=0, le=3600)
    poll_wait_s: float = Field(default=DEFAULT_POLL_WAIT_S, gt=0, le=600, description="Long-poll wait (HTTP mode).")
    ws_retry_s: float = Field(default=DEFAULT_WS_RETRY_S, gt=0, description="auto: retry WebSocket this often.")
    upstream_timeout_s: float = Field(default=DEFAULT_UPSTREAM_TIMEOUT_S, gt=0, description="Per upstream call.")
    probe_timeout_s: float = Field(default=DEFAULT_PROBE_TIMEOUT_S, gt=0, description="GET /models status check.")
    register_timeout_s: float = Field(default=DEFAULT_REGISTER_TIMEOUT_S, gt=0, description="Wait for 'registered'.")

    @field_validator("master")
    @classmethod
    def _master_url(cls, value: str) -> str:
        return _check_http_url(value, "master URL")

    @field_validator("fleet_token")
    @classmethod
    def _token_present(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().strip():
            raise ValueError("the fleet token is empty")
        return value

    @field_validator("serves")
    @classmethod
    def _unique_roles(cls, value: tuple[ServeSpec, ...]) -> tuple[ServeSpec, ...]:
        roles = [s.role for s in value]
        duplicates = sorted({r for r in roles if roles.count(r) > 1})
        if duplicates:
            raise ValueError(f"each role may be served once; repeated: {', '.join(duplicates)}")
        return value

    @property
    def ws_url(self) -> str:
        """http://h:p/prefix → ws://h:p/prefix/sidecar (https → wss)."""
        scheme, rest = self.master.split("://", 1)
        return f"{'wss' if scheme == 'https' else 'ws'}://{rest}/sidecar"

    def http_url(self, endpoint: str) -> str:
        """'register' → <master>/sidecar/register."""
        return f"{self.master}/sidecar/{endpoint}"
