"""Per-role dispatch: who serves a request under the policy in force, and in which order.

Embedding roles go through the fan-out pool (cluster/routing/fanout.py): the policy's primary
providers pull from one queue; under `backup` the cloud reserve takes over whatever the local
pool could not finish. Query encoding and single-call roles try providers one after another.
Pure asyncio: providers, discovery, clock and sleep are injected.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace
from typing import Any, TypeVar

import numpy as np

from cluster.errors import NoProviderLeft, SamespaceError
from cluster.gate.admission import Embed, Gatekeeper, reference_candidates
from cluster.gate.probe import GateReport
from cluster.gate.sentinel import probe_baseline, sentinel_round
from cluster.providers import ProviderInfo, Selection, select_providers
from cluster.roles import Policy, Role
from cluster.routing.fanout import BatchDone, FanoutResult, run_fanout
from cluster.routing.lanes import Lane, RateBook
from cluster.settings import FanoutSettings
from cluster.space import EncoderIdentity
from cluster.types import Clock

log = logging.getLogger("samespace.dispatch")

T = TypeVar("T")

# Single calls (a query's vector, a rerank, a chat turn) reuse a discovery this young: asking
# every actor on each query cost more than the query itself. Bulk embedding always asks anew,
# and a single call whose providers all fail asks anew before giving up.
SINGLE_CALL_DISCOVERY_MAX_AGE_S = 2.0


@dataclass(frozen=True)
class Provider:
    """A discovered provider and the calls it answers (None where it does not serve that call)."""

    info: ProviderInfo
    embed: Callable[[list[str]], Awaitable[np.ndarray]] | None = None
    rerank: Callable[[str, list[str]], Awaitable[list[float]]] | None = None
    call: Callable[..., Awaitable[Any]] | None = None  # chat-style single calls
    context: Callable[[], Awaitable[int | None]] | None = None  # a chat provider's context window
    # The interactive path: a query's vector, and (as the reference) the gate's spot-check
    # re-embeds. A local actor's query group, which never queues behind its bulk batches and
    # encodes concurrent queries in one model call; None means `embed`.
    query_embed: Callable[[list[str]], Awaitable[np.ndarray]] | None = None


Discover = Callable[[], Awaitable[Sequence[Provider]]]


@dataclass(frozen=True)
class LandedBatch:
    """Rows that just landed: their input indices, vectors, and the provider that wrote them."""

    indices: list[int]
    vectors: np.ndarray
    provider: str
    identity: EncoderIdentity | None


@dataclass
class EmbedOutcome:
    vectors: np.ndarray
    served_by: list[str]
    identities: dict[str, EncoderIdentity]
    reference: EncoderIdentity
    batches: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)


def reference_of(selection: Selection, preferred: str | None = None) -> EncoderIdentity:
    """The space an index built now lives in: a local provider, or under `cloud` a cloud anchor.

    Deterministic, and the same choice the gate makes: the preferred reference, else the first by
    name among those that report an identity (after the gate, only cleared providers remain).
    """
    candidates = [p for p in reference_candidates(selection, preferred) if p.identity is not None]
    if not candidates:
        pool = [p for p in selection.primary + selection.reserve if p.identity is not None]
        candidates = sorted(pool, key=lambda p: p.name)
    identity = candidates[0].identity if candidates else None
    if identity is None:
        raise NoProviderLeft(selection.role.value, [f"{n}: {r}" for n, r in selection.excluded.items()])
    return identity


class Dispatcher:
    """Routes one role's work to its providers, re-discovered on every call."""

    def __init__(
        self,
        role: Role,
        *,
        policy: Callable[[], Policy],
        discover: Discover,
        fanout: FanoutSettings,
        width: int | None,
        clock: Clock,
        sleep: Callable[[float], Awaitable[None]],
        gatekeeper: Gatekeeper | None = None,
        preferred_reference: str | None = None,
    ) -> None:
        self.role = role
        self.gatekeeper = gatekeeper
        self._preferred = preferred_reference
        self._policy = policy
        self._discover = discover
        self._fanout = fanout
        self._width = width
        self._clock = clock
        self._sleep = sleep
        self.rates = RateBook()
        self._recent: tuple[float, Selection, dict[str, Provider]] | None = None
        self._unguarded: dict[str, Embed] = {}

    async def select(self, max_age_s: float = 0.0) -> tuple[Selection, dict[str, Provider]]:
        """Discover and select; a discovery younger than `max_age_s` under the same policy is reused."""
        now = self._clock()
        if self._recent is not None and max_age_s > 0:
            taken, selection, providers = self._recent
            if now - taken <= max_age_s and selection.policy is self._policy():
                return selection, providers
        providers = {p.info.name: p for p in await self._discover()}
        selection = select_providers(self.role, self._policy(), [p.info for p in providers.values()])
        if self.gatekeeper is not None:
            selection, providers = await self._gated(selection, providers)
        self._recent = (now, selection, providers)
        return selection, providers

    def forget_discovery(self) -> None:
        """Drop the discovery single calls reuse: a pushed route changed who a provider is."""
        self._recent = None

    async def _gated(
        self, selection: Selection, providers: dict[str, Provider]
    ) -> tuple[Selection, dict[str, Provider]]:
        """DESIGN §5: only providers the gate cleared serve, each behind a per-batch guard."""
        assert self.gatekeeper is not None
        embeds = {name: p.embed for name, p in providers.items() if p.embed is not None}
        self._unguarded = embeds  # the sentinel probes the raw calls and writes its own verdicts
        admitted = await self.gatekeeper.admit(selection, embeds)
        reference = providers[admitted.reference.name]
        reembed = reference.query_embed or embeds[admitted.reference.name]
        guarded = dict(providers)
        for info in admitted.selection.primary + admitted.selection.reserve:
            embed = embeds[info.name]
            guarded[info.name] = dc_replace(
                providers[info.name],
                embed=self.gatekeeper.guard(info, embed, admitted.regime, admitted.reference, reembed),
            )
        return admitted.selection, guarded

    async def _single_call(
        self,
        pick: Callable[[Selection, dict[str, Provider]], list[Provider]],
        attempt: Callable[[Provider], Awaitable[T]],
    ) -> T:
        """First answer from `pick`'s providers; on total failure, rediscover once and retry."""
        selection, providers = await self.select(SINGLE_CALL_DISCOVERY_MAX_AGE_S)
        candidates = pick(selection, providers)
        try:
            return await first_success(self.role, candidates, attempt)
        except NoProviderLeft:
            if not candidates:
                raise  # nobody serves this role: a fresh look within the window would say the same
        selection, providers = await self.select()
        return await first_success(self.role, pick(selection, providers), attempt)

    async def reference(self) -> EncoderIdentity:
        selection, _ = await self.select()
        return reference_of(selection, self._preferred)

    async def reference_probe(self) -> np.ndarray:
        """The reference's probe vectors: stored with an index so drift can be caught later."""
        selection, providers = await self.select()
        reference = self._reference_info(selection)
        embed = providers[reference.name].embed
        assert embed is not None
        return await probe_baseline(embed)

    async def sentinel(self, stored: np.ndarray | None = None) -> list[GateReport]:
        """One drift-sentinel round (DESIGN §12, `cluster.gate.sentinel`) over the providers serving
        now: against `stored` probe vectors (an index's), or the reference's as first recorded."""
        if self.gatekeeper is None:
            return []
        selection, _ = await self.select()
        reports = await sentinel_round(
            self.gatekeeper,
            selection,
            self._reference_info(selection),
            self._unguarded,
            stored=stored,
            width=self._width,
            clock=self._clock,
        )
        self._recent = None  # evictions take effect on the next call
        return reports

    def _reference_info(self, selection: Selection) -> ProviderInfo:
        identity = reference_of(selection, self._preferred)
        for info in selection.primary + selection.reserve:
            if info.identity == identity:
                return info
        raise NoProviderLeft(self.role.value, ["no reference provider"])

    async def embed(
        self, texts: Sequence[str], on_batch: Callable[[LandedBatch], Awaitable[None] | None] | None = None
    ) -> EmbedOutcome:
        """Embed every text; rows come back in input order with the provider of each row."""
        selection, providers = await self.select()
        reference = reference_of(selection, self._preferred)
        vectors = np.zeros((len(texts), self._width or reference.width), dtype=np.float32)
        served_by = [""] * len(texts)
        batches: dict[str, int] = {}
        dropped: dict[str, str] = dict(selection.excluded)
        remaining = list(range(len(texts)))
        for tier in (selection.primary, selection.reserve):
            lanes = [self._lane(providers[p.name]) for p in tier if providers[p.name].embed is not None]
            if not remaining or not lanes:
                continue
            todo = list(remaining)
            done_mask = [False] * len(todo)

            async def landed(batch: BatchDone, todo: list[int] = todo, done_mask: list[bool] = done_mask) -> None:
                for offset, row in enumerate(batch.vectors):
                    index = todo[batch.start + offset]
                    vectors[index] = row
                    served_by[index] = batch.lane
                    done_mask[batch.start + offset] = True
                batches[batch.lane] = batches.get(batch.lane, 0) + 1  # counted here: an exhausted tier's count too
                if on_batch is not None:
                    indices = todo[batch.start : batch.start + len(batch.vectors)]
                    identity = providers[batch.lane].info.identity
                    maybe = on_batch(LandedBatch(indices, batch.vectors, batch.lane, identity))
                    if maybe is not None:
                        await maybe

            try:
                result: FanoutResult = await run_fanout(
                    lanes,
                    [texts[i] for i in todo],
                    settings=self._fanout,
                    rates=self.rates,
                    clock=self._clock,
                    sleep=self._sleep,
                    width=self._width,
                    role=self.role.value,
                    on_batch=landed,
                )
            except NoProviderLeft as exc:
                log.warning("%s: tier exhausted (%s); %d texts left", self.role.value, exc, done_mask.count(False))
                for reason in exc.reasons:  # "<lane>: <why>", as run_fanout words them: keyed by provider
                    name, _, why = reason.partition(": ")
                    dropped[name] = why or "failed"
            else:
                for name in result.batches:
                    batches.setdefault(name, 0)
                dropped.update(result.dropped)
            remaining = [i for i, done in zip(todo, done_mask, strict=True) if not done]
        if remaining:
            raise NoProviderLeft(self.role.value, [f"{n}: {r}" for n, r in dropped.items()] or ["no provider"])
        identities = {
            name: identity for name in set(served_by) if (identity := providers[name].info.identity) is not None
        }
        return EmbedOutcome(vectors, served_by, identities, reference, batches, dropped)

    def _query_pick(self, selection: Selection, providers: dict[str, Provider]) -> list[Provider]:
        """Who may answer a query's vector, in the order they are tried: the reference space first."""
        ordered = self._by_preference(selection, reference_of(selection, self._preferred))
        return [providers[p.name] for p in ordered if providers[p.name].embed]

    async def query_route(self) -> list[tuple[ProviderInfo, EncoderIdentity]]:
        """The providers `encode_query` would try now, in order, each with the space its vectors are
        in: a caller may reach the first itself (the replica's one-hop query path) and fall back
        to `encode_query` here. Uses the same discovery a single call reuses."""
        selection, providers = await self.select(SINGLE_CALL_DISCOVERY_MAX_AGE_S)
        return [(p.info, self._space_of(p)) for p in self._query_pick(selection, providers)]

    async def encode_query(self, text: str) -> tuple[np.ndarray, EncoderIdentity, str]:
        """One vector, from a provider in the reference space first (so the index guard accepts it)."""

        async def attempt(provider: Provider) -> tuple[np.ndarray, EncoderIdentity, str]:
            assert provider.embed is not None and provider.info.identity is not None
            rows = await (provider.query_embed or provider.embed)([text])
            if self._width is not None and rows.shape != (1, self._width):
                raise SamespaceError(f"{provider.info.name} returned shape {rows.shape}")
            return rows[0], self._space_of(provider), provider.info.name

        return await self._single_call(self._query_pick, attempt)

    async def chat(self, reserve: bool = True, **request: Any) -> tuple[Any, str]:
        """A single chat call (code-assistant, rlm): pool first, then the reserve unless `reserve` is
        False (the RLM's `local-only` fallback mode); (result, provider)."""
        return await self._single_call(self._chat_pick(reserve), lambda p: self._chat_attempt(p, request))

    async def context_window(self, reserve: bool = True) -> int | None:
        """The smallest context window among the chat providers that may serve the next call (a
        request sized for it fits whichever answers); None when none reports one."""
        selection, providers = await self.select(SINGLE_CALL_DISCOVERY_MAX_AGE_S)
        candidates = [p.context for p in self._chat_pick(reserve)(selection, providers) if p.context is not None]
        windows: list[int] = []
        for read in candidates:
            try:
                window = await read()
            except Exception as exc:  # noqa: BLE001 - an unreadable window is an unknown one
                log.info("%s: context window unknown: %s", self.role.value, exc)
                continue
            if window:
                windows.append(window)
        return min(windows) if windows else None

    @staticmethod
    def _chat_pick(reserve: bool) -> Callable[[Selection, dict[str, Provider]], list[Provider]]:
        def pick(selection: Selection, providers: dict[str, Provider]) -> list[Provider]:
            tiers = selection.primary + (selection.reserve if reserve else [])
            return [providers[p.name] for p in tiers if providers[p.name].call]

        return pick

    @staticmethod
    async def _chat_attempt(provider: Provider, request: dict[str, Any]) -> tuple[Any, str]:
        assert provider.call is not None
        return await provider.call(**request), provider.info.name

    async def rerank(self, query: str, documents: list[str]) -> tuple[list[float], str]:
        """Scores in input order, and who scored: the first provider that answers, pool then reserve."""

        def pick(selection: Selection, providers: dict[str, Provider]) -> list[Provider]:
            return [providers[p.name] for p in selection.primary + selection.reserve if providers[p.name].rerank]

        async def attempt(provider: Provider) -> tuple[list[float], str]:
            assert provider.rerank is not None
            scores = await provider.rerank(query, documents)
            if len(scores) != len(documents):
                raise SamespaceError(f"{provider.info.name} scored {len(scores)} of {len(documents)} documents")
            return scores, provider.info.name

        return await self._single_call(pick, attempt)

    def _space_of(self, provider: Provider) -> EncoderIdentity:
        """The space a provider's vectors live in: the reference's once the gate verified it for
        that space (DESIGN §10), else its own identity (which the index guard then refuses)."""
        assert provider.info.identity is not None
        if self.gatekeeper is None or self._recent is None:
            return provider.info.identity
        return reference_of(self._recent[1], self._preferred)

    def _by_preference(self, selection: Selection, reference: EncoderIdentity) -> list[ProviderInfo]:
        def key(p: ProviderInfo) -> tuple[int, float, str]:
            return (0 if p.identity == reference else 1, -self.rates.rate(p.name), p.name)

        return sorted(selection.primary, key=key) + sorted(selection.reserve, key=key)

    def _lane(self, provider: Provider) -> Lane:
        assert provider.embed is not None
        return Lane(name=provider.info.name, kind=provider.info.kind.value, embed=provider.embed)


async def first_success(role: Role, providers: Sequence[Provider], attempt: Callable[[Provider], Awaitable[T]]) -> T:
    """Try providers in order; the first answer wins. Every failure is logged and skipped."""
    reasons = []
    for provider in providers:
        try:
            return await attempt(provider)
        except Exception as exc:  # noqa: BLE001 - a provider's fault is contained to it (DESIGN §11)
            log.warning("%s: %s failed: %s", role.value, provider.info.name, exc)
            reasons.append(f"{provider.info.name}: {type(exc).__name__}")
    raise NoProviderLeft(role.value, reasons or ["no eligible provider"])
