"""The fan-out pool (DESIGN §4): one queue of texts, one pulling worker lane per provider.

Every lane pulls the next contiguous span of the shared queue when it has capacity, sized by
its own measured rate, so a slow, throttled or refused provider only slows itself. Pure
asyncio: providers are `Lane` callables and the clock and sleep are injected, so the same
logic runs inside a Ray actor and in unit tests on virtual time.

The constants are the peer system's (DESIGN §4 "starting values"). One of its rules is not taken
over: a slow lane refusing a batch that would outlast the pool's ETA.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cluster.errors import MalformedResponse, NoProviderLeft, RateLimited, WidthMismatch
from cluster.routing.lanes import Lane, LaneState, RateBook, count_failure, next_size
from cluster.settings import FanoutSettings
from cluster.types import Clock

__all__ = [
    "BatchDone",
    "FanoutResult",
    "OnBatch",
    "run_fanout",
]

log = logging.getLogger("samespace.fanout")

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class BatchDone:
    """One landed batch: rows `start .. start + len(vectors)` of the input, served by `lane`."""

    lane: str
    start: int
    vectors: np.ndarray

    @property
    def end(self) -> int:
        return self.start + len(self.vectors)


@dataclass(frozen=True)
class FanoutResult:
    """Rows in input order, who served each, and per-lane counters (every lane is a key)."""

    vectors: np.ndarray
    served_by: list[str]
    batches: dict[str, int]
    texts: dict[str, int]
    failures: dict[str, int]
    rate_limited: dict[str, int]
    dropped: dict[str, str]


OnBatch = Callable[[BatchDone], Awaitable[None] | None]


async def run_fanout(
    lanes: Sequence[Lane],
    texts: Sequence[str],
    *,
    settings: FanoutSettings,
    rates: RateBook,
    clock: Clock,
    sleep: Sleep = asyncio.sleep,
    width: int | None = None,
    role: str = "embedding",
    on_batch: OnBatch | None = None,
) -> FanoutResult:
    """Embed `texts` across `lanes`, each pulling from one shared queue (DESIGN §4).

    A lane's fault stays with the lane; only when every lane is dropped with work left (or there
    is no lane) does the call fail, with `NoProviderLeft`. `on_batch` is awaited, serialized,
    as each batch lands; an exception it raises fails the call. Cancelling the call cancels
    every lane and request it started.
    """
    names = [lane.name for lane in lanes]
    if len(set(names)) != len(names):
        raise ValueError(f"lane names must be unique within a run, got {names}")
    if not texts:
        empty = np.empty((0, width or 0), dtype=np.float32)
        zero = dict.fromkeys(names, 0)
        return FanoutResult(empty, [], dict(zero), dict(zero), dict(zero), dict(zero), {})
    if not lanes:
        raise NoProviderLeft(role, [])
    return await _Run(lanes, texts, settings, rates, clock, sleep, width, role, on_batch).run()


@dataclass
class _Run:
    """The state of one `run_fanout` call."""

    lanes: Sequence[Lane]
    texts: Sequence[str]
    settings: FanoutSettings
    rates: RateBook
    clock: Clock
    sleep: Sleep
    width: int | None
    role: str
    on_batch: OnBatch | None
    _queue: deque[tuple[int, int]] = field(init=False)
    _states: list[LaneState] = field(init=False)
    _vectors: np.ndarray | None = field(init=False)
    _served_by: list[str] = field(init=False)
    _done: int = field(init=False, default=0)
    _dispatched: int = field(init=False, default=0)
    _changed: asyncio.Event = field(init=False)
    _outcome: asyncio.Future[None] = field(init=False)
    _write_lock: asyncio.Lock = field(init=False)
    _tasks: set[asyncio.Task[None]] = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.texts)
        self._queue = deque([(0, n)])  # contiguous spans of input indices, front first
        self._states = [LaneState(lane) for lane in self.lanes]
        self._vectors = None if self.width is None else np.empty((n, self.width), dtype=np.float32)
        self._served_by = [""] * n
        self._changed = asyncio.Event()
        self._outcome = asyncio.get_running_loop().create_future()
        self._write_lock = asyncio.Lock()
        self._tasks = set()

    async def run(self) -> FanoutResult:
        # Local lanes start first, so the head of the queue goes to the GPUs (and a cloud 429's
        # re-queued span rejoins the untouched rest of the queue).
        for state in sorted(self._states, key=lambda s: s.lane.kind != "local"):
            self._spawn(self._lane_loop(state), f"fanout-{self.role}-{state.lane.name}")
        try:
            await self._outcome
        finally:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        assert self._vectors is not None  # every text landed, so some batch set the width
        return FanoutResult(
            vectors=self._vectors,
            served_by=self._served_by,
            batches={s.lane.name: s.batches for s in self._states},
            texts={s.lane.name: s.texts for s in self._states},
            failures={s.lane.name: s.failures for s in self._states},
            rate_limited={s.lane.name: s.rate_limited for s in self._states},
            dropped={s.lane.name: s.dropped for s in self._states if s.dropped is not None},
        )

    # -- the lane's worker loop ------------------------------------------------------------

    async def _lane_loop(self, state: LaneState) -> None:
        lane = state.lane
        while not self._outcome.done() and state.dropped is None:
            now = self.clock()
            if state.paused_until > now:
                await self.sleep(state.paused_until - now)
                continue
            if self._next_size(state) is None:
                await self._wait_for_change()
                continue
            admitted = False
            if lane.admit is not None:
                try:
                    admitted = await lane.admit()
                except Exception as exc:  # noqa: BLE001 - the budget's fault is this lane's, counted
                    self._count_failure(state, exc)
                    self._notify()
                    continue
                if not admitted:  # no permit now: this lane does not pull; the others carry on
                    state.paused_until = self.clock() + self.settings.admit_retry_s
                    self._notify()
                    continue
            size = self._next_size(state)  # the pool may have moved while we waited for a permit
            if size is None or self._outcome.done() or state.dropped is not None:
                if admitted:
                    await self._release(state)
                continue
            self._dispatch(state, self._take(size), admitted)
            await asyncio.sleep(0)  # let the others see every dispatch (parked lanes count them)

    def _next_size(self, state: LaneState) -> int | None:
        """Texts this lane may pull now, or None: nothing queued, no capacity, or parked."""
        if not self._queue:
            return None
        return next_size(
            state, self._states, rates=self.rates, settings=self.settings, dispatched=self._dispatched, clock=self.clock
        )

    def _take(self, size: int) -> tuple[int, int]:
        start, end = self._queue[0]
        if end - start <= size:
            self._queue.popleft()
            return start, end
        self._queue[0] = (start + size, end)
        return start, start + size

    def _requeue(self, span: tuple[int, int]) -> None:
        """A failed span goes back to the FRONT (DESIGN §4), merged with its neighbour if they touch."""
        start, end = span
        if self._queue and self._queue[0][0] == end:
            self._queue[0] = (start, self._queue[0][1])
        else:
            self._queue.appendleft(span)

    def _dispatch(self, state: LaneState, span: tuple[int, int], admitted: bool) -> None:
        self._dispatched += 1
        state.last_dispatch = self._dispatched
        state.in_flight += 1
        self._spawn(self._serve(state, span, admitted), f"fanout-{self.role}-{state.lane.name}-{span[0]}")
        self._notify()

    # -- one request -----------------------------------------------------------------------

    async def _serve(self, state: LaneState, span: tuple[int, int], admitted: bool) -> None:
        start, end = span
        began = self.clock()
        try:
            raw = await state.lane.embed(list(self.texts[start:end]))
            elapsed = self.clock() - began
        except RateLimited as exc:  # DESIGN §4: re-queued, not a failure; the lane cools down
            self._rate_limited(state, span, exc)
            return
        except Exception as exc:  # noqa: BLE001 - a lane's fault stays with the lane (counted, maybe dropped)
            self._failed(state, span, exc)
            return
        finally:
            if admitted:
                await self._release(state)
        try:
            vectors = self._checked(state.lane.name, raw, end - start)
        except (WidthMismatch, MalformedResponse) as exc:  # its vectors are never used
            self._failed(state, span, exc)
            return
        await self._landed(state, span, vectors, elapsed)

    def _checked(self, lane: str, raw: np.ndarray, rows: int) -> np.ndarray:
        vectors = np.asarray(raw, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != rows:
            raise MalformedResponse(lane, f"expected {rows} vectors, got an array of shape {vectors.shape}")
        expected = self.width if self._vectors is None else self._vectors.shape[1]
        if expected is not None and vectors.shape[1] != expected:
            raise WidthMismatch(lane, expected, vectors.shape[1])
        return vectors

    async def _landed(self, state: LaneState, span: tuple[int, int], vectors: np.ndarray, elapsed: float) -> None:
        start, end = span
        state.in_flight -= 1
        state.consecutive_failures = 0
        state.batches += 1
        state.texts += end - start
        self.rates.record(state.lane.name, end - start, elapsed, alpha=self.settings.rate_ewma_alpha)
        if self._vectors is None:  # no declared width: the first batch fixes it for the run
            self._vectors = np.empty((len(self.texts), vectors.shape[1]), dtype=np.float32)
        self._vectors[start:end] = vectors
        self._served_by[start:end] = [state.lane.name] * (end - start)
        self._notify()  # the lane may pull again while the caller writes these rows
        if self.on_batch is not None:
            async with self._write_lock:
                if self._outcome.done():  # the call already failed: no more writes
                    return
                maybe = self.on_batch(BatchDone(lane=state.lane.name, start=start, vectors=vectors))
                if inspect.isawaitable(maybe):
                    await maybe
        self._done += end - start
        if self._done == len(self.texts) and not self._outcome.done():
            self._outcome.set_result(None)

    def _rate_limited(self, state: LaneState, span: tuple[int, int], exc: RateLimited) -> None:
        state.in_flight -= 1
        state.rate_limited += 1
        self._requeue(span)
        cooldown = exc.retry_after_s if exc.retry_after_s is not None else self.settings.rate_limit_cooldown_s
        state.paused_until = max(state.paused_until, self.clock() + cooldown)
        log.info("%s: %s rate-limited, cooling down %.1fs", self.role, state.lane.name, cooldown)
        self._notify()

    def _failed(self, state: LaneState, span: tuple[int, int], exc: Exception) -> None:
        state.in_flight -= 1
        self._requeue(span)
        self._count_failure(state, exc)
        self._notify()

    def _count_failure(self, state: LaneState, exc: Exception) -> None:
        limit = self.settings.max_consecutive_failures
        if count_failure(state, exc, max_consecutive_failures=limit, role=self.role) and all(
            s.dropped is not None for s in self._states
        ):
            reasons = [f"{s.lane.name}: {s.dropped}" for s in self._states]
            self._fail(NoProviderLeft(self.role, reasons))

    async def _release(self, state: LaneState) -> None:
        if state.lane.release is None:
            return
        try:
            await state.lane.release()
        except Exception as exc:  # noqa: BLE001 - the budget's fault is this lane's, counted
            self._count_failure(state, exc)

    # -- plumbing ----------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(self._guarded(coro), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guarded(self, coro: Coroutine[Any, Any, None]) -> None:
        try:
            await coro
        except Exception as exc:  # noqa: BLE001 - not a lane's fault (on_batch, or a bug): it fails the call
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        if not self._outcome.done():
            self._outcome.set_exception(exc)
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_for_change(self) -> None:
        await self._changed.wait()
