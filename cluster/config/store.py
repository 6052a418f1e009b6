"""The durable cluster config: what is safe to persist (DESIGN §8), written atomically, read with recovery.

One JSON file, read-modify-written under an inter-process lock. Every write keeps the previous good
file as `<path>.bak` (copied first), then replaces the primary via temp file + fsync + rename + fsync
of the directory. A torn or corrupt primary is restored from the backup; a file that existed never
turns into an empty config (the peer lost its whole config that way).

The OpenRouter key is never persisted: the model has no field for it and refuses unknown ones.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import ConfigDict, Field, NonNegativeFloat, ValidationError, model_validator

from cluster.config.atomic_file import TEMP_SUFFIX, write_bytes_atomic
from cluster.config.registrations import IndexRegistration
from cluster.errors import ConfigError
from cluster.fleet.agent_registry import HostRecord
from cluster.roles import Policy, Role
from cluster.settings import RoleRoute, SamespaceSettings
from cluster.types import Strict

__all__ = [
    "BACKUP_SUFFIX",
    "LOCK_SUFFIX",
    "ConfigStore",
    "PersistedConfig",
    "PersistedRole",
    "effective_settings",
    "overlay",
]

BACKUP_SUFFIX = ".bak"
LOCK_SUFFIX = ".lock"
CONFIG_VERSION = 1

logger = logging.getLogger(__name__)

# Inputs are hidden in errors (a stray key must not reach a message); instances are revalidated, so a
# `model_copy(update=...)` that skipped validation is checked again before it is written.
_PERSISTED = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True, revalidate_instances="always")


class PersistedRole(Strict):
    """Which model serves a role; for embedding roles the pinned upstream (DESIGN §6) and its width."""

    model_config = _PERSISTED

    model: str = Field(min_length=1, description="OpenRouter model slug.")
    upstream: str | None = Field(default=None, min_length=1, description="Pinned upstream provider slug.")
    dims: int | None = Field(default=None, ge=1, description="Width of the vectors (embedding roles).")


class PersistedConfig(Strict):
    """Everything the cluster persists: cloud routing and the sidecar registry. There is deliberately no key field."""

    model_config = _PERSISTED

    version: int = Field(default=CONFIG_VERSION, description="Schema version of the file.")
    base_url: str | None = Field(
        default=None, min_length=1, description="OpenRouter API base URL as pushed; None = the settings' own."
    )
    roles: dict[Role, PersistedRole] = Field(default_factory=dict, description="Model (and pin) per role.")
    policies: dict[Role, Policy] = Field(default_factory=dict, description="Routing policy per role.")
    budget_override: int | None = Field(default=None, ge=1, le=256, description="Manual cloud permit ceiling.")
    spend_caps: dict[Role, NonNegativeFloat | None] = Field(
        default_factory=dict, description="Daily cloud spend cap per role in credits, as set; None = uncapped."
    )
    key_pushed: bool = Field(default=False, description="Whether a key was ever pushed. Never the key itself.")
    last_pushed_at: float | None = Field(default=None, description="Unix time of the last push.")
    sidecars: dict[str, HostRecord] = Field(
        default_factory=dict,
        description="The sidecar registry, by agent URL: hostname and capabilities, never volatile state.",
    )
    indexes: dict[str, IndexRegistration] = Field(
        default_factory=dict, description="Indexes kept fresh by the sync actor, by name: folder, ref, last signature."
    )

    @model_validator(mode="after")
    def _embedding_roles_are_pinned(self) -> PersistedConfig:
        for role, route in self.roles.items():
            if role.writes_index and route.upstream is None:
                raise ValueError(
                    f"roles.{role.value}.upstream: an embedding role must name an upstream pin (DESIGN §6)"
                )
        return self


class ConfigStore:
    """The config file at `path`, its backup `<path>.bak` and its lock `<path>.lock`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.backup_path = self.path.with_name(self.path.name + BACKUP_SUFFIX)
        self.lock_path = self.path.with_name(self.path.name + LOCK_SUFFIX)

    def read(self) -> PersistedConfig:
        """The stored config; defaults on first run; restored from the backup if the primary is damaged."""
        try:
            return _parse(self.path.read_bytes())
        except FileNotFoundError:
            if not self.backup_path.exists():
                return PersistedConfig()  # first run: nothing was ever written
        except ValueError:
            pass
        with self._locked():  # recovery writes the primary, so it takes the writers' lock
            return self._load_locked()

    def update(self, change: Callable[[PersistedConfig], PersistedConfig]) -> PersistedConfig:
        """Read-modify-write under the lock. An invalid result or a raising `change` changes nothing."""
        with self._locked():
            self._remove_stale_temps()
            current = self._load_locked()
            proposed = change(current)
            if not isinstance(proposed, PersistedConfig):
                raise ConfigError("config", f"an update must return a PersistedConfig, got {type(proposed).__name__}")
            try:
                new = PersistedConfig.model_validate(proposed)
            except ValidationError as exc:
                raise ConfigError("config", f"update refused: {exc}") from exc
            if self.path.exists():
                # _load_locked left a valid primary: it becomes the backup before it is replaced.
                write_bytes_atomic(self.backup_path, self.path.read_bytes())
            write_bytes_atomic(self.path, new.model_dump_json(indent=2).encode("utf-8"))
            return new

    def write(self, config: PersistedConfig) -> None:
        self.update(lambda _: config)

    def read_sidecars(self) -> dict[str, HostRecord]:
        """The sidecar registry as stored (`ConfigError` when the store is unreadable)."""
        return self.read().sidecars

    def save_sidecars(self, records: dict[str, HostRecord]) -> None:
        """Replace the sidecar registry, keeping every other setting: read-modify-write."""
        self.update(lambda config: config.model_copy(update={"sidecars": dict(records)}))

    def read_indexes(self) -> dict[str, IndexRegistration]:
        """The registered indexes as stored (`ConfigError` when the store is unreadable)."""
        return self.read().indexes

    def save_indexes(self, registrations: dict[str, IndexRegistration]) -> None:
        """Replace the registered indexes, keeping every other setting: read-modify-write."""
        self.update(lambda config: config.model_copy(update={"indexes": dict(registrations)}))

    def _load_locked(self) -> PersistedConfig:
        """Read with recovery; the caller holds the lock. Never returns defaults for a file that existed."""
        try:
            return _parse(self.path.read_bytes())
        except FileNotFoundError:
            problem = "is missing"
        except ValueError as exc:
            problem = f"is unreadable ({type(exc).__name__})"
        try:
            backup_bytes = self.backup_path.read_bytes()
        except FileNotFoundError:
            if problem == "is missing":
                return PersistedConfig()
            raise ConfigError("config", f"{self.path} {problem} and there is no backup to restore") from None
        try:
            restored = _parse(backup_bytes)
        except ValueError:
            raise ConfigError(
                "config", f"{self.path} {problem} and its backup {self.backup_path} is unreadable too"
            ) from None
        write_bytes_atomic(self.path, backup_bytes)
        logger.warning("config %s %s: restored from backup %s", self.path, problem, self.backup_path)
        return restored

    def _remove_stale_temps(self) -> None:
        """Temp files of writers that died mid-write; every writer holds the lock, so none is live."""
        for stale in self.path.parent.glob(f".{self.path.name}.*{TEMP_SUFFIX}"):
            stale.unlink(missing_ok=True)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel if the holder dies
            yield
        finally:
            os.close(fd)


def _parse(data: bytes) -> PersistedConfig:
    """ValueError (pydantic's ValidationError) for torn, garbage or invalid content."""
    return PersistedConfig.model_validate_json(data)


def overlay(settings: SamespaceSettings, persisted: PersistedConfig) -> SamespaceSettings:
    """Settings with what the operator pushed on top: policies, routes, base URL, budget override, spend caps.

    Actors apply this when they start, so one restarted after a push comes back with the last
    good config (and without a key, which is never persisted).
    """
    routes = dict(settings.cloud.routes)
    for role, pushed in persisted.roles.items():
        previous = routes.get(role)
        tokens = (
            previous.max_input_tokens if previous is not None else RoleRoute.model_fields["max_input_tokens"].default
        )
        routes[role] = RoleRoute(model=pushed.model, upstream=pushed.upstream, max_input_tokens=tokens)
    cloud_update: dict[str, object] = {"routes": routes}
    if persisted.base_url is not None:  # only a pushed URL overrides the configured one
        cloud_update["base_url"] = persisted.base_url
    cloud = settings.cloud.model_copy(update=cloud_update)
    budget = settings.budget
    if persisted.budget_override is not None:
        budget = budget.model_copy(update={"override": persisted.budget_override})
    if persisted.spend_caps:
        caps = {**budget.daily_caps, **persisted.spend_caps}
        budget = budget.model_copy(update={"daily_caps": {role: cap for role, cap in caps.items() if cap is not None}})
    return settings.model_copy(
        update={"cloud": cloud, "budget": budget, "policies": {**settings.policies, **persisted.policies}}
    )


def effective_settings(settings: SamespaceSettings) -> SamespaceSettings:
    """`overlay` of the store at settings.admin.config_path; the settings alone when nothing was pushed.

    A store that cannot be read is logged and the settings stay in force: never an empty config.
    """
    path = settings.admin.config_path
    if not path.exists() and not Path(f"{path}{BACKUP_SUFFIX}").exists():
        return settings
    try:
        return overlay(settings, ConfigStore(path).read())
    except ConfigError as exc:
        logger.warning("config store unreadable, the settings stay in force: %s", exc)
        return settings
