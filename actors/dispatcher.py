"""Dispatcher actors, one per role: a Ray shell around cluster.routing.dispatch.Dispatcher.

Discovery runs on every call (new nodes join, vanished ones drop out); lanes call the provider
actors through the transport of their kind (actors/transports.py); a provider actor's error
arrives as its own type (RateLimited, ...).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace as dc_replace
from typing import Any

import numpy as np
import ray
from ray.actor import ActorHandle

from actors.discovery import LiveProvider, discover_providers
from actors.handles import get_or_start
from actors.metrics import gate_metrics_loop, metered_embed, record_landed
from actors.query_path import DirectRoute
from actors.registry import ensure_providers
from actors.transports import TRANSPORTS, RayActorTransport
from cluster.cloud.budget import Priority
from cluster.cloud.request_tag import DEFAULT_PROJECT, RequestTag, caller_kwargs, set_request_tag
from cluster.config import effective_settings
from cluster.gate.admission import Gatekeeper, SpotCheckStats
from cluster.gate.ledger import GateLedger
from cluster.gate.probe import GateReport
from cluster.gate.sentinel import sentinel_loop
from cluster.naming import dispatcher_actor_name
from cluster.providers import ProviderView, provider_views
from cluster.roles import Policy, Role
from cluster.routing.dispatch import Dispatcher, EmbedOutcome, LandedBatch, Provider
from cluster.settings import SamespaceSettings
from cluster.space import EncoderIdentity


def _calls(live: LiveProvider, role: Role) -> Provider:
    """The calls a discovered actor answers, through the transport of its kind (none if it did not answer);
    its embedding calls timed and their failures counted (actors/metrics.py)."""
    if live.handle is None:
        return Provider(info=live.info)
    transport = TRANSPORTS[live.info.kind, live.info.hosted]
    provider = transport(live.handle).provider(live.info)
    if provider.embed is None:
        return provider
    embed = metered_embed(provider.embed, role.value, live.info.name, live.info.lane_kind)
    return dc_replace(provider, embed=embed)


log = logging.getLogger("samespace.dispatch")


@ray.remote(num_cpus=0, max_restarts=-1)
class DispatcherActor:
    def __init__(self, settings: SamespaceSettings, role: Role) -> None:
        settings = effective_settings(settings)  # a restarted dispatcher keeps the pushed policy
        self._settings = settings
        self._role = role
        self._policy = settings.policy(role)
        gatekeeper = None
        if role.writes_index:  # DESIGN §5: no setting turns the gate off
            gatekeeper = Gatekeeper(
                GateLedger(time.monotonic),
                expected_width=settings.embedding.width,
                preferred_reference=settings.gate.reference,
                clock=time.monotonic,
                probe_timeout_s=settings.gate.probe_timeout_s,
                rng=random.SystemRandom(),  # which batches and texts are spot-checked: unguessable
                spot_check_rate=settings.gate.spot_check_rate,
                spot_check_texts=settings.gate.spot_check_texts,
            )
        self._sentinel_task: asyncio.Task[None] | None = None
        self._metrics_task: asyncio.Task[None] | None = None
        self._kinds: dict[str, str] = {}  # provider name -> the metrics' provider_kind, from the last discovery
        self._live: list[LiveProvider] = []  # the last discovery: every provider actor, every role
        self._dispatcher = Dispatcher(
            role,
            policy=lambda: self._policy,
            discover=self._discover,
            fanout=settings.fanout,
            width=settings.embedding.width if role.writes_index else None,
            clock=time.monotonic,
            sleep=asyncio.sleep,
            gatekeeper=gatekeeper,
            preferred_reference=settings.gate.reference,
        )

    async def _discover(self) -> list[Provider]:
        ensure_providers(self._settings)
        self._live = await discover_providers(self._settings)
        self._kinds = {live.info.name: live.info.lane_kind for live in self._live}
        return [_calls(live, self._role) for live in self._live]

    async def _sentinel_loop(self) -> None:
        """DESIGN §12: re-probe the serving encoders every period while serving."""
        period_s = self._settings.gate.sentinel_period_s
        await sentinel_loop(self._dispatcher.sentinel, period_s=period_s, sleep=asyncio.sleep, role=self._role.value)

    def _ensure_sentinel(self) -> None:
        gatekeeper = self._dispatcher.gatekeeper
        if gatekeeper is not None and self._sentinel_task is None:
            self._sentinel_task = asyncio.get_running_loop().create_task(self._sentinel_loop())
        if gatekeeper is not None and self._metrics_task is None:  # the verdicts as gauges, while this lives
            loop = asyncio.get_running_loop()
            self._metrics_task = loop.create_task(gate_metrics_loop(self._role.value, gatekeeper.ledger.reports))

    def _landed(self, provider: str, texts: int, batches: int, project: str) -> None:
        """Metrics of embedded rows that landed: `batches` batches, `texts` rows in all."""
        kind = self._kinds.get(provider, "unknown")
        record_landed(self._role.value, provider, kind, self._policy.value, project, texts, batches)

    async def sentinel(self, stored: np.ndarray | None = None) -> list[GateReport]:
        """One sentinel round now (the reindex job runs one against the serving index's probes)."""
        return await self._dispatcher.sentinel(stored)

    async def reference_probe(self) -> np.ndarray:
        return await self._dispatcher.reference_probe()

    def gate_reports(self) -> list[GateReport]:
        """Every verdict the gate holds for this role (for the admin API and `jobs.show_providers`)."""
        gatekeeper = self._dispatcher.gatekeeper
        return gatekeeper.ledger.reports() if gatekeeper is not None else []

    def spot_checks(self) -> SpotCheckStats | None:
        """The gate's spot checks for this role so far: their cost and what they caught (None: ungated role)."""
        gatekeeper = self._dispatcher.gatekeeper
        return gatekeeper.spot_stats() if gatekeeper is not None else None

    def set_policy(self, policy: Policy) -> Policy:
        """Switch the policy in force; an invalid value is refused and the current one kept."""
        self._policy = Policy(policy)
        return self._policy

    def forget_discovery(self) -> None:
        """A pushed route changed a provider's model or pin: the next call discovers afresh."""
        self._dispatcher.forget_discovery()

    async def providers(self) -> list[ProviderView]:
        """Every provider of this role, with the policy in force beside the one it applies."""
        live = await discover_providers(self._settings)
        return provider_views(self._role, self._policy, [p.info for p in live])

    async def reference(self) -> EncoderIdentity:
        return await self._dispatcher.reference()

    async def embed(
        self,
        texts: list[str],
        project: str = DEFAULT_PROJECT,
        priority: Priority = Priority.BULK,
        subject: str | None = None,
        call_id: str | None = None,
    ) -> EmbedOutcome:
        self._ensure_sentinel()
        set_request_tag(RequestTag(project, Priority(priority), subject, call_id))
        outcome = await self._dispatcher.embed(texts)
        for provider, rows in Counter(outcome.served_by).items():
            self._landed(provider, rows, outcome.batches.get(provider, 0), project)
        return outcome

    async def embed_stream(
        self,
        texts: list[str],
        project: str = DEFAULT_PROJECT,
        priority: Priority = Priority.BULK,
        subject: str | None = None,
        call_id: str | None = None,
    ) -> AsyncIterator[LandedBatch]:
        """Yield each batch as it lands (call with `.options(num_returns="streaming")`)."""
        self._ensure_sentinel()
        set_request_tag(RequestTag(project, Priority(priority), subject, call_id))
        queue: asyncio.Queue[LandedBatch | None] = asyncio.Queue()

        def landed(batch: LandedBatch) -> None:
            self._landed(batch.provider, len(batch.indices), 1, project)
            queue.put_nowait(batch)

        async def run() -> EmbedOutcome:
            try:
                return await self._dispatcher.embed(texts, on_batch=landed)
            finally:
                queue.put_nowait(None)

        task = asyncio.create_task(run())
        try:
            while (batch := await queue.get()) is not None:
                yield batch
            await task  # re-raises NoProviderLeft when the work could not be finished
        finally:
            task.cancel()

    async def encode_query(
        self, text: str, project: str = DEFAULT_PROJECT, subject: str | None = None, call_id: str | None = None
    ) -> tuple[np.ndarray, EncoderIdentity, str]:
        self._ensure_sentinel()
        set_request_tag(RequestTag(project, Priority.INTERACTIVE, subject, call_id))
        return await self._dispatcher.encode_query(text)

    async def direct_query_route(self) -> DirectRoute:
        """For a replica's one-hop query path (`actors.query_path`): when the provider `encode_query`
        would try first is a local actor of this cluster, the space of its vectors, its name and its
        handle (else None: cloud or sidecar first, with their budget, tags and fleet: ask here); and
        whether any provider discovered serves reranking."""
        self._ensure_sentinel()
        route = await self._dispatcher.query_route()
        rerankers = any(Role.RERANKER in live.info.roles for live in self._live)
        if not route or TRANSPORTS[route[0][0].kind, route[0][0].hosted] is not RayActorTransport:
            return DirectRoute(encoder=None, rerankers=rerankers)
        info, space = route[0]
        handle = next((live.handle for live in self._live if live.info.name == info.name), None)
        return DirectRoute(encoder=(space, info.name, handle) if handle is not None else None, rerankers=rerankers)

    async def chat(
        self,
        project: str = DEFAULT_PROJECT,
        reserve: bool = True,
        subject: str | None = None,
        call_id: str | None = None,
        **request: Any,
    ) -> tuple[Any, str]:
        """messages, tools, tool_choice, max_tokens, temperature → (ChatResult, provider name)."""
        set_request_tag(RequestTag(project, Priority.INTERACTIVE, subject, call_id))
        return await self._dispatcher.chat(reserve, **request)

    async def context_window(self, reserve: bool = True) -> int | None:
        return await self._dispatcher.context_window(reserve)

    async def rerank(
        self,
        query: str,
        documents: list[str],
        project: str = DEFAULT_PROJECT,
        subject: str | None = None,
        call_id: str | None = None,
    ) -> tuple[list[float], str]:
        set_request_tag(RequestTag(project, Priority.INTERACTIVE, subject, call_id))
        return await self._dispatcher.rerank(query, documents)


def get_dispatcher(settings: SamespaceSettings, role: Role) -> ActorHandle:
    return get_or_start(DispatcherActor, settings, dispatcher_actor_name(role), settings, role)


class LazyDispatcher:
    """A role's dispatcher, found or started at its first call (`handle.method.remote(...)` as on
    the handle itself): a replica whose clients never ask a question never starts the RLM's and
    the code assistant's dispatcher processes (about 125 MB each).

    Its calls that may reach the cloud (`CALLER_TAGGED`) carry the replica's current caller and tool
    call (`caller_kwargs`: the subject whose quotas they count against, the call their credits go to),
    as `project` is carried: an argument of the call."""

    def __init__(self, settings: SamespaceSettings, role: Role) -> None:
        self._settings = settings
        self._role = role
        self._handle: ActorHandle | None = None

    def __getattr__(self, method: str) -> Any:
        if method.startswith("_"):
            raise AttributeError(method)
        if self._handle is None:
            self._handle = get_dispatcher(self._settings, self._role)
        bound = getattr(self._handle, method)
        return CallerTagged(bound) if method in CALLER_TAGGED else bound


# The dispatcher's calls that may take a cloud permit (and so count against the caller's quotas).
CALLER_TAGGED = frozenset({"embed", "encode_query", "chat", "rerank"})


class CallerTagged:
    """A dispatcher method whose `.remote(...)` adds the replica's current subject and call id."""

    def __init__(self, method: Any) -> None:
        self._method = method

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self._method.remote(*args, **{**caller_kwargs(), **kwargs})

    def __getattr__(self, name: str) -> Any:  # `.options(...)` and the rest, as on the method itself
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._method, name)
