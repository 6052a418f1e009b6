"""What one sidecar is told at start-up, validated once: its masters, the fronted servers and the
virtual containers it hosts, the timings.

`SidecarSettings` is built by `sidecar.cli.load_settings` from the command line and the environment;
secrets (each master's fleet token, the upstream key) are `SecretStr` and never appear in a repr or an error.
"""

from __future__ import annotations

import re
from enum import StrEnum
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator

from sidecar.errors import SettingsError
from sidecar.wire import VIRTUAL_ROLE_LABELS, virtual_container_name

__all__ = [
    "DEFAULT_HEARTBEAT_S",
    "DEFAULT_OPENROUTER_BASE_URL",
    "DEFAULT_POLL_WAIT_S",
    "DEFAULT_WS_RETRY_S",
    "OPENROUTER_SCHEME",
    "MasterSpec",
    "ServeSpec",
    "SidecarSettings",
    "TransportMode",
    "VirtualServeSpec",
    "check_http_url",
    "parse_serve",
]

DEFAULT_HEARTBEAT_S = 5.0
DEFAULT_POLL_WAIT_S = 10.0
DEFAULT_WS_RETRY_S = 60.0
DEFAULT_UPSTREAM_TIMEOUT_S = 120.0
DEFAULT_PROBE_TIMEOUT_S = 2.0
DEFAULT_REGISTER_TIMEOUT_S = 10.0
DEFAULT_OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
OPENROUTER_SCHEME = "openrouter:"
CONTAINER_PREFIX = "ss-"
_ROLE_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
# An OpenRouter model slug ('qwen/qwen3-embedding-4b', 'openai/text-embedding-3-small:floor') and an
# upstream provider slug ('nebius', 'deepinfra/fp8'): no spaces, no '@', no ','.
_SLUG_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/+-]{0,254}$")
# The virtual roles that need a pinned upstream (DESIGN §6: embeddings are served by exactly one).
PINNED_ROLES = frozenset({"embedding", "code-embedding"})


class TransportMode(StrEnum):
    WS = "ws"
    HTTP = "http"
    AUTO = "auto"  # WebSocket, else the HTTP fallback when the handshake is answered with a status


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


def check_http_url(value: str, what: str) -> str:
    """An http(s) URL with a host, no query or fragment, a valid port; without a trailing slash."""
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


def _check_role(value: str) -> str:
    if not _ROLE_PATTERN.fullmatch(value):
        raise ValueError(f"role must be a lowercase slug like 'code-embedding', got {value!r}")
    return value


class MasterSpec(_Strict):
    """One master: `--master URL[,token-env=VAR]`, its fleet token read from VAR."""

    url: str = Field(description="Master base URL, e.g. http://127.0.0.1:8000/prefix.")
    fleet_token: SecretStr = Field(description="Bearer token for this master (SAMESPACE_FLEET_TOKEN or its VAR).")

    @field_validator("url")
    @classmethod
    def _master_url(cls, value: str) -> str:
        return check_http_url(value, "master URL")

    @field_validator("fleet_token")
    @classmethod
    def _token_present(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().strip():
            raise ValueError("the fleet token is empty")
        return value

    @property
    def ws_url(self) -> str:
        """http://h:p/prefix → ws://h:p/prefix/sidecar (https → wss)."""
        scheme, rest = self.url.split("://", 1)
        return f"{'wss' if scheme == 'https' else 'ws'}://{rest}/sidecar"

    def http_url(self, endpoint: str) -> str:
        """'register' → <master>/sidecar/register."""
        return f"{self.url}/sidecar/{endpoint}"


class ServeSpec(_Strict):
    """One fronted OpenAI-compatible server: `--serve ROLE=BASE_URL[,model=NAME]`."""

    role: str = Field(description="Role the server fills, e.g. 'code-embedding' (container name ss-<role>).")
    base_url: str = Field(description="OpenAI base URL, e.g. http://127.0.0.1:9201/v1 (no trailing slash).")
    model: str | None = Field(default=None, min_length=1, description="Model name; None = ask GET /models.")

    @field_validator("role")
    @classmethod
    def _role_slug(cls, value: str) -> str:
        return _check_role(value)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_http_url(value, "base URL")

    @property
    def container_name(self) -> str:
        return f"{CONTAINER_PREFIX}{self.role}"

    @property
    def port(self) -> int:
        parts = urlsplit(self.base_url)
        return parts.port or (443 if parts.scheme == "https" else 80)


class VirtualServeSpec(_Strict):
    """One virtual container: `--serve ROLE=openrouter:MODEL[@UPSTREAM]`, served through OpenRouter with
    the key a master pushes. An embedding role without an upstream is accepted (the master refuses it)."""

    role: str = Field(description=f"One of {', '.join(VIRTUAL_ROLE_LABELS)}.")
    model: str = Field(description="OpenRouter model slug, e.g. qwen/qwen3-embedding-4b.")
    upstream: str | None = Field(default=None, description="The one upstream provider pinned, e.g. 'nebius'.")

    @field_validator("role")
    @classmethod
    def _virtual_role(cls, value: str) -> str:
        if value not in VIRTUAL_ROLE_LABELS:
            raise ValueError(f"an openrouter: server fills one of {', '.join(VIRTUAL_ROLE_LABELS)}, got {value!r}")
        return value

    @field_validator("model", "upstream")
    @classmethod
    def _slug(cls, value: str | None) -> str | None:
        if value is not None and not _SLUG_PATTERN.fullmatch(value):
            raise ValueError(f"expected an OpenRouter slug like 'qwen/qwen3-embedding-4b', got {value!r}")
        return value

    @property
    def pinned(self) -> bool:
        """Whether the requests name exactly one upstream (required for embeddings)."""
        return self.upstream is not None

    def container_name(self, hostname: str) -> str:
        return virtual_container_name(hostname, self.role)


def parse_serve(text: str) -> ServeSpec | VirtualServeSpec:
    """`code-embedding=http://127.0.0.1:9201/v1,model=all-MiniLM-L6-v2` → ServeSpec;
    `code-embedding=openrouter:qwen/qwen3-embedding-4b@nebius` → VirtualServeSpec (SettingsError if bad)."""
    role, sep, rest = text.partition("=")
    if not sep or not role or not rest:
        raise SettingsError(
            "--serve", f"expected ROLE=BASE_URL[,model=NAME] or ROLE=openrouter:MODEL[@UPSTREAM], got {text!r}"
        )
    try:
        if rest.strip().startswith(OPENROUTER_SCHEME):
            return _parse_virtual(role.strip(), rest.strip().removeprefix(OPENROUTER_SCHEME), text)
        url, *options = rest.split(",")
        model: str | None = None
        for option in options:
            key, sep, value = option.partition("=")
            if key.strip() != "model" or not sep or not value.strip():
                raise SettingsError("--serve", f"unknown option {option!r} in {text!r}; only model=NAME is accepted")
            model = value.strip()
        return ServeSpec(role=role.strip(), base_url=url.strip(), model=model)
    except ValueError as exc:  # pydantic ValidationError is a ValueError
        if isinstance(exc, SettingsError):
            raise
        raise SettingsError("--serve", _first_message(exc)) from exc


def _parse_virtual(role: str, rest: str, text: str) -> VirtualServeSpec:
    model, at, upstream = rest.partition("@")
    if not model or (at and not upstream):
        raise SettingsError("--serve", f"expected ROLE=openrouter:MODEL[@UPSTREAM], got {text!r}")
    return VirtualServeSpec(role=role, model=model, upstream=upstream or None)


def _first_message(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors(include_url=False, include_input=False)[0]
        return str(first["msg"]).removeprefix("Value error, ")
    return str(exc)


class SidecarSettings(_Strict):
    """Everything the sidecar needs; validated when built."""

    masters: tuple[MasterSpec, ...] = Field(min_length=1, max_length=16, description="One session per master.")
    agent_url: str = Field(min_length=1, max_length=2048, description="This sidecar's id at each master.")
    hostname: str = Field(min_length=1, max_length=255)
    serves: tuple[ServeSpec, ...] = Field(default=(), max_length=64, description="The fronted local servers.")
    virtual: tuple[VirtualServeSpec, ...] = Field(
        default=(),
        max_length=len(VIRTUAL_ROLE_LABELS),
        validate_default=True,  # the check that something is served runs here, after `serves`
        description="The virtual (OpenRouter) containers.",
    )
    openrouter_base_url: str = Field(default=DEFAULT_OPENROUTER_BASE_URL, description="OpenRouter's API base.")
    upstream_key: SecretStr | None = Field(default=None, description="Bearer key for the fronted servers.")
    transport: TransportMode = TransportMode.AUTO
    heartbeat_s: float = Field(default=DEFAULT_HEARTBEAT_S, gt=0, le=3600)
    poll_wait_s: float = Field(default=DEFAULT_POLL_WAIT_S, gt=0, le=600, description="Long-poll wait (HTTP mode).")
    ws_retry_s: float = Field(default=DEFAULT_WS_RETRY_S, gt=0, description="auto: retry WebSocket this often.")
    upstream_timeout_s: float = Field(default=DEFAULT_UPSTREAM_TIMEOUT_S, gt=0, description="Per upstream call.")
    probe_timeout_s: float = Field(default=DEFAULT_PROBE_TIMEOUT_S, gt=0, description="GET /models status check.")
    register_timeout_s: float = Field(default=DEFAULT_REGISTER_TIMEOUT_S, gt=0, description="Wait for 'registered'.")

    @field_validator("masters")
    @classmethod
    def _distinct_masters(cls, value: tuple[MasterSpec, ...]) -> tuple[MasterSpec, ...]:
        urls = [m.url for m in value]
        repeated = sorted({u for u in urls if urls.count(u) > 1})
        if repeated:
            raise ValueError(f"each master may be named once; repeated: {', '.join(repeated)}")
        return value

    @field_validator("openrouter_base_url")
    @classmethod
    def _openrouter_url(cls, value: str) -> str:
        return check_http_url(value, "OpenRouter base URL")

    @field_validator("virtual")
    @classmethod
    def _serves_something_once(
        cls, value: tuple[VirtualServeSpec, ...], info: ValidationInfo
    ) -> tuple[VirtualServeSpec, ...]:
        if "serves" not in info.data:
            return value  # `serves` failed: that error is the one to report
        local: tuple[ServeSpec, ...] = info.data["serves"]
        if not local and not value:
            raise ValueError("at least one ROLE=BASE_URL or ROLE=openrouter:MODEL is required")
        # A role may be served once locally and once through OpenRouter: their commands differ
        # (`embed` vs `virtual-embed`) and so do their containers (ss-<role> vs <PCName>-OR-<Role>).
        for roles in ([s.role for s in local], [v.role for v in value]):
            duplicates = sorted({r for r in roles if roles.count(r) > 1})
            if duplicates:
                raise ValueError(f"each role may be served once; repeated: {', '.join(duplicates)}")
        return value
