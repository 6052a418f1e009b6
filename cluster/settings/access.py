"""The `auth`, `audit` and `quotas` sections: who may call the MCP and admin surfaces, what is written
down about each call, and how much one person may use.

`auth.mode`:
- `none`: no identity; the MCP surface answers loopback only (a non-loopback `serve.host` is refused);
- `token`: one shared bearer (`serve.token`), today's team setup;
- `oauth`: the MCP surface is an OAuth 2.1 resource server (RFC 9728 metadata, JWT access tokens of a
  standard issuer checked against its JWKS), with scopes, per-index access and per-person quotas.
Unset, the mode is `token` when `serve.token` (or `serve.token_file`) is set, else `none`.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "AuditSettings",
    "AuthMode",
    "AuthSettings",
    "QuotaSettings",
    "SubjectQuota",
]

# Every JWS algorithm with a public key (RFC 7518 §3.1, RFC 8037). HS* (a shared secret) and `none`
# are never accepted: a resource server that holds the issuer's signing secret could mint tokens.
ASYMMETRIC_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)


class AuthMode(StrEnum):
    NONE = "none"
    TOKEN = "token"
    OAUTH = "oauth"


class AuthSettings(BaseModel):
    """How callers prove who they are (see the module doc for the modes)."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    mode: AuthMode | None = Field(
        default=None,
        description="none (loopback only), token (serve.token, shared) or oauth (JWT access tokens of "
        "auth.issuer); unset: token when serve.token is set, else none.",
    )
    issuer: str | None = Field(
        default=None, description="The authorization server's issuer URL (the tokens' `iss`); oauth needs it."
    )
    jwks_url: str | None = Field(
        default=None,
        description="Where the issuer's signing keys are (JWKS); unset: `jwks_uri` of the issuer's "
        "/.well-known/openid-configuration, else of /.well-known/oauth-authorization-server (RFC 8414).",
    )
    resource_url: str | None = Field(
        default=None,
        description="The MCP endpoint's public URL, the resource this server protects (RFC 9728 `resource`); "
        "unset: http://<serve.host>:<serve.port>/mcp.",
    )
    audience: str | None = Field(
        default=None, description="The `aud` a token must carry (RFC 8707 resource indicator); unset: resource_url."
    )
    groups_claim: str = Field(default="groups", min_length=1, description="The claim holding the caller's groups.")
    scopes_claim: str = Field(
        default="scope", min_length=1, description="The claim holding the granted scopes (space-separated or a list)."
    )
    algorithms: list[str] = Field(
        default_factory=lambda: list(ASYMMETRIC_ALGORITHMS),
        min_length=1,
        description="Signature algorithms accepted; asymmetric only (HS* and none are refused).",
    )
    clock_skew_s: float = Field(default=60.0, ge=0, le=600, description="Leeway on exp, nbf and iat.")
    jwks_cache_s: float = Field(
        default=300.0, ge=0, description="How long fetched signing keys are trusted before they are fetched again."
    )
    jwks_refresh_min_s: float = Field(
        default=30.0,
        ge=0,
        description="A token signed by an unknown key fetches the keys again at most this often (key rotation).",
    )
    fetch_timeout_s: float = Field(default=5.0, gt=0, le=60, description="Timeout of a metadata or JWKS fetch.")

    @field_validator("algorithms")
    @classmethod
    def _asymmetric_only(cls, algorithms: list[str]) -> list[str]:
        for algorithm in algorithms:
            if algorithm not in ASYMMETRIC_ALGORITHMS:
                raise ValueError(
                    f"auth.algorithms: {algorithm!r} is not an asymmetric JWS algorithm "
                    f"(one of {', '.join(ASYMMETRIC_ALGORITHMS)})"
                )
        return algorithms

    @field_validator("issuer", "jwks_url", "resource_url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("https://", "http://")):
            raise ValueError(f"{url!r} is not an http(s) URL")
        return url


class AuditSettings(BaseModel):
    """One JSON line per MCP tool call and admin action in `<data_dir>/audit.jsonl`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=True, description="Write the audit log.")
    include_queries: bool = Field(
        default=False, description="Also record each call's query text (off: the log never holds a query)."
    )
    max_bytes: int = Field(
        default=16 * 1024 * 1024, ge=4096, description="The log is rotated (audit.jsonl.1, ...) past this size."
    )
    backups: int = Field(default=5, ge=0, le=100, description="Rotated files kept.")


class SubjectQuota(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    requests_per_minute: int | None = Field(default=None, ge=0)
    daily_credits: float | None = Field(default=None, ge=0)


class QuotaSettings(BaseModel):
    """What one caller (a token's subject under oauth) may use; the key-wide budget still holds above."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    requests_per_minute: int = Field(
        default=600, ge=0, description="MCP tool calls one subject may make in any 60 s; 0: no limit."
    )
    daily_credits: float = Field(
        default=5.0, ge=0, description="Cloud credits one subject's calls may spend per UTC day; 0: no limit."
    )
    subjects: dict[str, SubjectQuota] = Field(
        default_factory=dict, description="Per-subject overrides, e.g. {'ci-bot': {'requests_per_minute': 3000}}."
    )

    def for_subject(self, subject: str) -> SubjectQuota:
        """The limits that apply to `subject`: its override's fields, else the defaults."""
        override = self.subjects.get(subject)
        return SubjectQuota(
            requests_per_minute=self.requests_per_minute
            if override is None or override.requests_per_minute is None
            else override.requests_per_minute,
            daily_credits=self.daily_credits
            if override is None or override.daily_credits is None
            else override.daily_credits,
        )
