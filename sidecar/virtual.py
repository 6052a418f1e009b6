"""Virtual containers: the roles this sidecar serves through OpenRouter (`<PCName>-OR-<Role>`), per master.

A virtual container is no local server: the master discovers it with a `containers` command (never
from a heartbeat), pushes its OpenRouter key in a `config` frame, and sends `virtual-embed` and
`virtual-rerank` commands, each under a `permit` from its budget. Everything is kept per master: the
key a master pushed serves only that master's commands (one OpenRouter client and one set of keys
and counters per master), and a master that pushed none is refused without a call to OpenRouter.
The keys live in memory only, as `SecretStr`; they reach no log line, result, heartbeat or repr.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import SecretStr, ValidationError

from sidecar.errors import OpenRouterError
from sidecar.openrouter import OpenRouterClient
from sidecar.settings import DEFAULT_OPENROUTER_BASE_URL, DEFAULT_UPSTREAM_TIMEOUT_S, VirtualServeSpec
from sidecar.upstream import encode_rows
from sidecar.wire import (
    OPENROUTER_SOURCE,
    Action,
    ConfigPayload,
    ContainersCommand,
    ContainersResult,
    KeyInfoCommand,
    VirtualContainerRow,
    VirtualEmbedCommand,
    VirtualRerankCommand,
    describe_invalid,
    error_result,
    ok_result,
    result_frame,
)

__all__ = ["NO_KEY_MESSAGE", "VIRTUAL_ACTIONS", "VirtualContainers"]

logger = logging.getLogger("sidecar.virtual")

PUSH_HINT = "push it with POST /admin/openrouter"
NO_KEY_MESSAGE = f"no OpenRouter key from this master: {PUSH_HINT}"
VIRTUAL_ACTIONS = frozenset({Action.CONTAINERS, Action.VIRTUAL_EMBED, Action.VIRTUAL_RERANK, Action.VIRTUAL_KEY_INFO})
MAX_ERROR_CHARS = 500


@dataclass
class _Counters:
    """One (master, container): what that master's commands did here."""

    served: int = 0
    failures: int = 0
    last_error: str | None = None
    failing: bool = False
    upstream_calls: int = 0
    permits_used: int = 0
    dims: int | None = None


@dataclass
class _MasterSide:
    """What one master has here: its OpenRouter pool, the keys it pushed (by role), its counters."""

    client: OpenRouterClient
    keys: dict[str, SecretStr] = field(default_factory=dict, repr=False)
    counters: dict[str, _Counters] = field(default_factory=dict)


class VirtualContainers:
    """This sidecar's virtual containers, for each of its masters (by URL)."""

    def __init__(
        self,
        specs: Sequence[VirtualServeSpec],
        *,
        hostname: str,
        masters: Sequence[str],
        base_url: str = DEFAULT_OPENROUTER_BASE_URL,
        timeout_s: float = DEFAULT_UPSTREAM_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.specs: dict[str, VirtualServeSpec] = {spec.role: spec for spec in specs}
        self.names: dict[str, str] = {spec.role: spec.container_name(hostname) for spec in specs}
        self._sides: dict[str, _MasterSide] = {
            master: _MasterSide(
                client=OpenRouterClient(base_url, timeout_s=timeout_s, transport=transport),
                counters={role: _Counters() for role in self.specs},
            )
            for master in masters
        }

    def __repr__(self) -> str:
        return f"VirtualContainers(names={sorted(self.names.values())}, masters={sorted(self._sides)})"

    def __len__(self) -> int:
        return len(self.specs)

    def role_of(self, role_or_name: object) -> str | None:
        """The role a command names, by its role ('code-embedding') or its container name."""
        if role_or_name in self.specs:
            return str(role_or_name)
        return next((role for role, name in self.names.items() if name == role_or_name), None)

    def _hosted(self) -> str:
        return ", ".join(self.names.values()) or "none"

    def has_key(self, master: str, role: str) -> bool:
        return role in self._sides[master].keys

    async def aclose(self) -> None:
        await asyncio.gather(*(side.client.aclose() for side in self._sides.values()), return_exceptions=True)

    # --- what a master is told ---

    def log_waiting(self, master: str) -> None:
        """At registration: one INFO line per container that holds no key from this master."""
        for role, name in self.names.items():
            if not self.has_key(master, role):
                logger.info("%s waits for the OpenRouter key from %s: %s", name, master, PUSH_HINT)

    def rows(self, master: str) -> ContainersResult:
        side = self._sides[master]
        rows = []
        for role, spec in self.specs.items():
            counts = side.counters[role]
            held = role in side.keys
            state = "no-key" if not held else "failing" if counts.failing else "ready"
            rows.append(
                VirtualContainerRow(
                    name=self.names[role],
                    role=role,
                    model=spec.model,
                    provider=spec.upstream,
                    dims=counts.dims,
                    state=state,
                    keyHeld=held,
                    served=counts.served,
                    failures=counts.failures,
                    lastError=counts.last_error,
                    upstreamCalls=counts.upstream_calls,
                    permitsUsed=counts.permits_used,
                )
            )
        return ContainersResult(virtualContainers=rows)

    # --- the key's config frame ---

    def apply_config(self, master: str, config_id: Any, payload: Mapping[str, Any]) -> dict[str, Any]:
        """`openrouter.apiKey` → this master's key for all its virtual containers (or those named);
        `apiKey: null` withdraws it. A payload that does not validate changes nothing."""
        try:
            config = ConfigPayload.model_validate(payload)
        except ValidationError as exc:
            return error_result(config_id, describe_invalid(exc).replace("bad command", "bad config", 1))
        if config.openrouter is None:
            return ok_result(config_id)
        named = config.openrouter.containers
        roles = [self.role_of(n) for n in named] if named is not None else list(self.specs)
        unknown = [str(n)[:80] for n, role in zip(named or (), roles, strict=False) if role is None]
        if unknown:
            problem = f"unknown virtual container {unknown[0]!r}; this sidecar hosts {self._hosted()}"
            return error_result(config_id, f"bad config: openrouter.containers: {problem}")
        key = config.openrouter.api_key
        if key is not None and not key.get_secret_value().strip():
            return error_result(config_id, "bad config: openrouter.apiKey: the key is empty")
        targets = sorted({role for role in roles if role is not None})
        side = self._sides[master]
        for role in targets:
            if key is None:
                side.keys.pop(role, None)
            else:
                side.keys[role] = key
        names = ", ".join(self.names[r] for r in targets) or "(no virtual container)"
        if key is None:
            logger.info("the OpenRouter key from %s was withdrawn for %s", master, names)
        else:
            logger.info("an OpenRouter key arrived from %s for %s", master, names)
        return ok_result(config_id)

    # --- commands ---

    async def execute(self, master: str, command_id: str | int, action: str, frame: dict[str, Any]) -> dict[str, Any]:
        """One virtual command from `master` → its result frame (an error result when refused or failed)."""
        try:
            if action == Action.CONTAINERS:
                ContainersCommand.model_validate(frame)
                return result_frame(command_id, self.rows(master).model_dump(mode="json", by_alias=True))
            if action == Action.VIRTUAL_KEY_INFO:
                KeyInfoCommand.model_validate(frame)
                return result_frame(command_id, await self._key_info(master, frame.get("role")))
            command = (VirtualEmbedCommand if action == Action.VIRTUAL_EMBED else VirtualRerankCommand).model_validate(
                frame
            )
        except ValidationError as exc:
            return error_result(command_id, describe_invalid(exc))
        except OpenRouterError as exc:
            return _failed(command_id, exc)
        return await self._permitted(master, command_id, command)

    async def _permitted(
        self, master: str, command_id: str | int, command: VirtualEmbedCommand | VirtualRerankCommand
    ) -> dict[str, Any]:
        role = self.role_of(command.role)
        if role is None:
            problem = f"unknown virtual container {command.role[:80]!r}; this sidecar hosts {self._hosted()}"
            return error_result(command_id, problem)
        side, spec = self._sides[master], self.specs[role]
        key = side.keys.get(role)
        if key is None:
            return error_result(command_id, NO_KEY_MESSAGE)
        if isinstance(command, VirtualEmbedCommand) and not spec.pinned:
            return error_result(command_id, f"{self.names[role]} names no upstream: embeddings must pin one")
        counts = side.counters[role]
        counts.permits_used += 1
        counts.upstream_calls += 1
        try:
            if isinstance(command, VirtualEmbedCommand):
                answer = await self._embed(side.client, key, spec, command, counts)
            else:
                answer = await self._rerank(side.client, key, spec, command)
        except OpenRouterError as exc:
            counts.failures += 1
            counts.failing = True
            counts.last_error = exc.message[:MAX_ERROR_CHARS]
            return _failed(command_id, exc)
        counts.served += 1
        counts.failing = False
        return result_frame(command_id, answer)

    @staticmethod
    async def _embed(
        client: OpenRouterClient,
        key: SecretStr,
        spec: VirtualServeSpec,
        command: VirtualEmbedCommand,
        counts: _Counters,
    ) -> dict[str, Any]:
        model = command.model or spec.model
        answer = await client.embed(key, model, spec.upstream, command.texts)
        try:
            embeddings, dims = encode_rows(answer.rows)
        except ValueError as exc:
            raise OpenRouterError(f"openrouter bad response: {exc}") from None
        counts.dims = dims
        return {
            "source": OPENROUTER_SOURCE,
            "embeddings": embeddings,
            "dims": dims,
            "model": answer.model,
            "provider": spec.upstream,
            "usage": answer.usage.model_dump(mode="json", by_alias=True),
        }

    @staticmethod
    async def _rerank(
        client: OpenRouterClient, key: SecretStr, spec: VirtualServeSpec, command: VirtualRerankCommand
    ) -> dict[str, Any]:
        model = command.model or spec.model
        answer = await client.rerank(key, model, spec.upstream, command.query, command.documents, command.top_n)
        return {
            "source": OPENROUTER_SOURCE,
            "results": [{"index": index, "relevance_score": score} for index, score in answer.results],
            "model": answer.model,
            "usage": answer.usage.model_dump(mode="json", by_alias=True),
        }

    async def _key_info(self, master: str, role_or_name: object) -> dict[str, Any]:
        """GET /key with the key of the container named, else the first this master pushed."""
        side = self._sides[master]
        role = self.role_of(role_or_name)
        key = side.keys.get(role) if role is not None else next(iter(side.keys.values()), None)
        if key is None:
            raise OpenRouterError(NO_KEY_MESSAGE)
        return {"response": await side.client.key_info(key)}


def _failed(command_id: str | int, exc: OpenRouterError) -> dict[str, Any]:
    return error_result(
        command_id, exc.message, status=exc.status, retry_after_s=exc.retry_after_s, metadata=exc.metadata
    )
