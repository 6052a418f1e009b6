"""One settings model for the whole cluster (env prefix SAMESPACE_, optional YAML file).

Read once at an entry point (job, Serve app builder, CLI) and passed down; actors receive
the parsed model, never the environment.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, YamlConfigSettingsSource

from cluster.errors import ConfigError
from cluster.roles import DEFAULT_POLICY, Policy, Role, fill_policies
from cluster.settings.access import AuditSettings, AuthMode, AuthSettings, QuotaSettings
from cluster.settings.bearer import bearer_token
from cluster.settings.indexing import IndexSettings
from cluster.settings.limits import LimitsSettings
from cluster.settings.sections import (
    CONFIG_FILE_ENV,
    AdminSettings,
    BudgetSettings,
    ChunkingSettings,
    CloudSettings,
    EmbeddingSettings,
    FanoutSettings,
    FleetSettings,
    GateSettings,
    IngestSettings,
    LlmSettings,
    RaySettings,
    RerankerSettings,
    RlmSettings,
    ServeSettings,
)
from cluster.settings.store import StoreSettings
from cluster.types import FusionParams

LOOPBACK_ADDRESSES = ("127.0.0.1", "localhost", "::1")


class SamespaceSettings(BaseSettings):
    """Everything configurable. Precedence: init args > SAMESPACE_* env > YAML file > defaults."""

    model_config = SettingsConfigDict(
        env_prefix="SAMESPACE_", env_nested_delimiter="__", extra="forbid", frozen=True, hide_input_in_errors=True
    )

    ray: RaySettings = Field(default_factory=RaySettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    chunking: ChunkingSettings = Field(default_factory=ChunkingSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    reranker: RerankerSettings = Field(default_factory=RerankerSettings)
    search: FusionParams = Field(
        default_factory=FusionParams, description="Hybrid search: candidates per leg and the weights of the scores."
    )
    cloud: CloudSettings = Field(default_factory=CloudSettings)
    fanout: FanoutSettings = Field(default_factory=FanoutSettings)
    gate: GateSettings = Field(default_factory=GateSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    admin: AdminSettings = Field(default_factory=AdminSettings)
    llm: LlmSettings = Field(default_factory=LlmSettings)
    rlm: RlmSettings = Field(default_factory=RlmSettings)
    fleet: FleetSettings = Field(default_factory=FleetSettings)
    fleet_token: Annotated[SecretStr | None, bearer_token("fleet_token")] = Field(
        default=None,
        description="Bearer token every sidecar of the fleet presents (SAMESPACE_FLEET_TOKEN); blank is unset, "
        "under 16 bytes refused.",
    )
    auth: AuthSettings = Field(default_factory=AuthSettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    quotas: QuotaSettings = Field(default_factory=QuotaSettings)
    policies: dict[Role, Policy] = Field(
        default_factory=dict, description=f"Routing policy per role; a missing role means {DEFAULT_POLICY.value!r}."
    )

    def policy(self, role: Role) -> Policy:
        return fill_policies(self.policies)[role]

    @property
    def auth_mode(self) -> AuthMode:
        """`auth.mode`, or when unset: `token` with a serve token configured, else `none`."""
        if self.auth.mode is not None:
            return self.auth.mode
        has_token = self.serve.token is not None or self.serve.token_file is not None
        return AuthMode.TOKEN if has_token else AuthMode.NONE

    @property
    def resource_url(self) -> str:
        """The MCP endpoint's public URL: `auth.resource_url`, else http://<serve.host>:<serve.port>/mcp."""
        if self.auth.resource_url is not None:
            return self.auth.resource_url
        host = f"[{self.serve.host}]" if ":" in self.serve.host else self.serve.host
        return f"http://{host}:{self.serve.port}/mcp"

    @property
    def audience(self) -> str:
        """The `aud` an access token must carry: `auth.audience`, else the resource URL."""
        return self.auth.audience or self.resource_url

    @model_validator(mode="after")
    def _auth_mode_is_complete(self) -> SamespaceSettings:
        mode = self.auth_mode
        if mode is AuthMode.OAUTH and self.auth.issuer is None:
            raise ValueError("auth.issuer (SAMESPACE_AUTH__ISSUER) is required when auth.mode is oauth")
        if mode is AuthMode.TOKEN and self.serve.token is None and self.serve.token_file is None:
            raise ValueError("auth.mode token needs serve.token (SAMESPACE_SERVE__TOKEN) or serve.token_file")
        if mode is AuthMode.NONE and self.serve.host not in LOOPBACK_ADDRESSES:
            raise ValueError(
                f"auth.mode none serves loopback only, and serve.host is {self.serve.host!r}: "
                "set serve.token (auth.mode token) or auth.mode oauth"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get(CONFIG_FILE_ENV)
        if config_file:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=Path(config_file)))
        return tuple(sources)


def load_settings(**overrides: Any) -> SamespaceSettings:
    """The one place settings are read (env + optional YAML named by SAMESPACE_CONFIG_FILE)."""
    config_file = os.environ.get(CONFIG_FILE_ENV)
    if config_file and not Path(config_file).is_file():
        raise ConfigError(CONFIG_FILE_ENV, f"file {config_file!r} does not exist")
    return SamespaceSettings(**overrides)
