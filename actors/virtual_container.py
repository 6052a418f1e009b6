"""A virtual container: one OpenRouter actor serving one role, named `<PCName>-OR-<Role>` (DESIGN §4).

Real serving capacity with no GPU behind it. The key lives in this actor's memory only, as a
SecretStr; without one the container is ineligible and says so, and never sends a request.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
from typing import Any

import numpy as np
import ray
from pydantic import SecretStr

from actors.budget import get_budget_actor, request_tag_of, with_permit
from cluster.cloud.budget import KeyFacts
from cluster.cloud.container import cloud_identity, read_key_facts, starting_config
from cluster.cloud.key_readiness import NO_KEY_REASON
from cluster.cloud.openrouter import OpenRouterClient
from cluster.cloud.request_tag import (
    RequestTag,
    collecting_usage,
    hear_usage,
    set_request_tag,
)
from cluster.cloud.spend import CallUsage, Charge, ModelPrice, charge_for
from cluster.cloud.state import ContainerState
from cluster.config import effective_settings
from cluster.errors import AuthFailed, MissingPin, UpstreamError
from cluster.providers import ProviderInfo, ProviderKind
from cluster.roles import Policy, Role
from cluster.settings import RoleRoute, SamespaceSettings

log = logging.getLogger("samespace.cloud")


@ray.remote(num_cpus=0, max_restarts=-1)
class VirtualContainerActor:
    def __init__(self, name: str, role: Role, route: RoleRoute, settings: SamespaceSettings, policy: Policy) -> None:
        # The durable config over the settings, read now: a restarted container comes back with the
        # pushed route, policy and base URL (never the static settings over them), and no key.
        settings = effective_settings(settings)
        route, policy = starting_config(settings, role, route, policy)
        cloud = settings.cloud
        self._name = name
        self._role = role
        self._route = route
        self._settings = settings
        self._cloud = cloud
        self._base_url = cloud.base_url
        self._width = settings.embedding.width
        self._policy = policy
        self._node_id = ray.get_runtime_context().get_node_id()
        self._served = 0
        self._failures = 0
        self._last_error: str | None = None
        self._client: Any = None
        self._key: SecretStr | None = None
        self._context: dict[str, int] = {}
        self._prices: dict[str, ModelPrice | None] = {}
        self._usage: list[CallUsage] = []  # responses' usage not yet booked in the budget actor
        if cloud.key_env and os.environ.get(cloud.key_env):  # the operator chose the node's environment
            self._key = SecretStr(os.environ[cloud.key_env])

    def __repr__(self) -> str:
        return f"VirtualContainerActor({self._name!r})"

    # ---- configuration (the admin API pushes through these) ---------------------------------
    async def set_key(self, key: SecretStr | None) -> None:
        """Hold a new key in memory (None forgets it); the next request uses it."""
        self._key = key
        await self._close_client()
        if key is not None:  # a pushed key is the moment to learn its limits (DESIGN §7)
            get_budget_actor(self._settings).discover.remote()

    async def apply(
        self, route: RoleRoute | None = None, policy: Policy | None = None, base_url: str | None = None
    ) -> ContainerState:
        """Merge a pushed route, policy and base URL into what this container holds (None keeps
        the current one; the key is untouched, DESIGN §8). The next request uses them."""
        if route is not None:
            self._route = route
        if policy is not None:
            self._policy = Policy(policy)
        if base_url is not None and base_url != self._base_url:
            self._base_url = base_url
            await self._close_client()  # the client is bound to one base URL
        return self.state()

    def state(self) -> ContainerState:
        """What this container applies now: route, policy, base URL, and whether it holds a key."""
        return ContainerState(
            name=self._name,
            role=self._role,
            route=self._route,
            policy=self._policy,
            base_url=self._base_url,
            key_held=self._key is not None,
        )

    def describe(self) -> ProviderInfo:
        # A missing pin is the gate's refusal (`no-provider-pin`), and the client's, never a request.
        reason = NO_KEY_REASON if self._key is None else None
        return ProviderInfo(
            name=self._name,
            kind=ProviderKind.CLOUD,
            roles=[self._role],
            node_id=self._node_id,
            host=socket.gethostname(),
            model=self._route.model,
            upstream=self._route.upstream,
            identity=cloud_identity(self._route, self._width) if self._role.writes_index else None,
            policy_applied={self._role: self._policy},
            eligible=reason is None,
            reason=reason,
            served=self._served,
            failures=self._failures,
            last_error=self._last_error,
        )

    # ---- serving ----------------------------------------------------------------------------
    async def embed(
        self,
        texts: list[str],
        project: str | None = None,
        priority: str | None = None,
        subject: str | None = None,
        call_id: str | None = None,
    ) -> np.ndarray:
        if self._route.upstream is None:
            raise MissingPin(self._name, "embedding route without a pinned upstream; refused before sending")
        client = self._require_client()
        upstream = self._route.upstream
        return await self._count(
            request_tag_of(project, priority, subject, call_id),
            lambda _ticket: client.embed(self._route.model, upstream, texts, self._width),
        )

    async def rerank(
        self,
        query: str,
        documents: list[str],
        top_n: int | None = None,
        project: str | None = None,
        priority: str | None = None,
        subject: str | None = None,
        call_id: str | None = None,
    ) -> list[tuple[int, float]]:
        client = self._require_client()
        result: list[tuple[int, float]] = await self._count(
            request_tag_of(project, priority, subject, call_id),
            lambda _ticket: client.rerank(self._route.model, query, documents, top_n),
        )
        return result

    async def chat(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        project: str | None = None,
        priority: str | None = None,
        subject: str | None = None,
        call_id: str | None = None,
    ) -> Any:
        client = self._require_client()
        return await self._count(
            request_tag_of(project, priority, subject, call_id),
            lambda _ticket: client.chat(self._route.model, messages, tools, tool_choice, max_tokens, temperature),
        )

    async def context_window(self) -> int | None:
        """The route model's context length from the catalogue, read once per model; None if unknown."""
        model = self._route.model
        if model not in self._context:
            try:
                self._context[model] = await self._require_client().model_context_length(model)
            except Exception:  # noqa: BLE001 - unknown means the caller's safe default, never a failure
                return None
        return self._context[model]

    async def key_facts(self) -> KeyFacts:
        """What the key says about its limits and funding (read for the BudgetActor, which holds no key)."""
        client = self._require_client()
        info = await client.key_info()
        credits: float | None = None
        with contextlib.suppress(UpstreamError):  # /credits needs a management key; the key's own limit still tells
            credits = (await client.credits()).remaining
        return read_key_facts(info, credits)

    # ---- internals --------------------------------------------------------------------------
    def _require_client(self) -> Any:
        if self._key is None:
            raise AuthFailed(self._name, f"{NO_KEY_REASON}; not sending an unauthenticated request")
        if self._client is None:
            self._client = OpenRouterClient(
                provider_name=self._name,
                key=self._key,
                base_url=self._base_url,
                timeout_s=self._cloud.timeout_s,
                on_usage=self._hear_usage,
            )
        return self._client

    async def _count(self, tag: RequestTag, call: Any) -> Any:
        """One cloud call under a key-wide permit (DESIGN §7), counted for `describe()`; its cost goes
        back with the permit, booked to the role's spend today, and to the tag's subject and tool call,
        before the permit is freed (a role at its daily cap, or a subject over its daily credits, is
        refused before any request). The usage of this call's responses is collected apart from the
        calls running beside it."""
        set_request_tag(tag)
        try:
            with collecting_usage() as heard:
                settle = functools.partial(self._settle_usage, heard)
                result = await with_permit(self._settings, self._name, call, role=self._role, settle=settle)
        except Exception as exc:
            self._failures += 1
            self._last_error = str(exc)[:300]
            raise
        self._served += 1
        return result

    def _hear_usage(self, usage: CallUsage) -> None:
        """A response's usage: to the call it answered (`_count`), else kept for the next settling."""
        hear_usage(usage, self._usage)

    async def _settle_usage(self, heard: list[CallUsage]) -> list[Charge]:
        """What the call's responses cost (and any heard outside a call): `usage.cost`, else tokens ×
        the listed price, else tokens × the unpriced default (both estimates, cluster/cloud/spend.py)."""
        pending = [*heard, *self._usage]
        heard.clear()
        self._usage.clear()
        return [charge_for(usage, await self._price(usage.model) if usage.cost is None else None) for usage in pending]

    async def _price(self, model: str) -> ModelPrice | None:
        """The model's listed price per token, read once per model; None when unknown."""
        if model not in self._prices:
            try:
                self._prices[model] = await self._require_client().model_price(model)
            except Exception as exc:  # noqa: BLE001 - an unknown price is charged the unpriced default, counted
                log.warning("%s: no price for %s: %s", self._name, model, type(exc).__name__)
                return None
        return self._prices[model]

    async def _close_client(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
