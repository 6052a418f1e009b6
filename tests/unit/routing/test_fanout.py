"""The fan-out pool on virtual time: lanes "take" n/rate seconds on an event loop whose clock jumps.

`VirtualTimeLoop` never waits: when every task is blocked it moves its clock to the next timer,
so runs are deterministic and instant. The pool gets that clock and a sleep that records what
it was asked to wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from cluster.errors import GateRefused, NoProviderLeft, RateLimited, SpendCapReached, UpstreamUnavailable
from cluster.routing.fanout import BatchDone, FanoutResult, run_fanout
from cluster.routing.lanes import Lane, RateBook
from cluster.settings import (
    DEFAULT_MAX_BATCH,
    DEFAULT_MIN_RATE_RATIO,
    DEFAULT_PROBE_BATCH,
    DEFAULT_REPROBE_EVERY,
    FanoutSettings,
)
from tests.support.fakes.virtual_time import VirtualClock, run_virtual

WIDTH = 4


def texts_of(n: int) -> list[str]:
    return [f"t{i}" for i in range(n)]


def rows_for(texts: list[str], width: int = WIDTH) -> np.ndarray:
    """Row i starts with the text's index, so input order is checkable."""
    rows = np.zeros((len(texts), width), dtype=np.float32)
    rows[:, 0] = [int(t[1:]) for t in texts]
    return rows


@dataclass
class Sim:
    """A simulated provider: each call takes len(texts)/rate seconds of virtual time."""

    name: str
    rate: float
    kind: str = "local"
    width: int = WIDTH
    fail_calls: set[int] = field(default_factory=set)  # 0-based call numbers that raise `error`
    error: Callable[[], Exception] = lambda: UpstreamUnavailable("sim", "down", 503)
    calls: list[tuple[int, int]] = field(default_factory=list)  # (start index, size) per call
    cancelled: int = 0

    async def embed(self, texts: list[str]) -> np.ndarray:
        number = len(self.calls)
        self.calls.append((int(texts[0][1:]), len(texts)))
        try:
            await asyncio.sleep(len(texts) / self.rate)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if number in self.fail_calls:
            raise self.error()
        return rows_for(texts, self.width)

    def lane(self, **extra: Any) -> Lane:
        return Lane(name=self.name, kind=self.kind, embed=self.embed, **extra)  # type: ignore[arg-type]


def fan(
    clock: VirtualClock,
    lanes: list[Lane],
    n: int,
    *,
    settings: FanoutSettings | None = None,
    rates: RateBook | None = None,
    width: int | None = WIDTH,
    on_batch: Callable[[BatchDone], Awaitable[None] | None] | None = None,
) -> Coroutine[Any, Any, FanoutResult]:
    return run_fanout(
        lanes,
        texts_of(n),
        settings=settings or FanoutSettings(),
        rates=rates or RateBook(),
        clock=clock,
        sleep=clock.sleep,
        width=width,
        on_batch=on_batch,
    )


def assert_complete(result: FanoutResult, n: int) -> None:
    assert result.vectors.shape == (n, WIDTH) and result.vectors.dtype == np.float32
    np.testing.assert_array_equal(result.vectors[:, 0], np.arange(n, dtype=np.float32))
    assert sum(result.texts.values()) == n and "" not in result.served_by


def test_results_come_back_in_input_order_with_two_lanes_of_different_speed() -> None:
    fast, slow = Sim("fast", rate=100), Sim("slow", rate=30)
    result = run_virtual(lambda clock: fan(clock, [fast.lane(), slow.lane()], 500))
    assert_complete(result, 500)
    assert set(result.served_by) == {"fast", "slow"}
    for lane in ("fast", "slow"):
        assert result.texts[lane] == result.served_by.count(lane)
    assert result.failures == {"fast": 0, "slow": 0} and result.dropped == {}


def test_the_faster_lane_serves_proportionally_more_batches() -> None:
    fast, slow = Sim("fast", rate=150), Sim("slow", rate=100)  # both at max_batch and full depth
    result = run_virtual(lambda clock: fan(clock, [fast.lane(), slow.lane()], 64 * 60))
    assert_complete(result, 64 * 60)
    assert result.batches["fast"] / result.batches["slow"] == pytest.approx(1.5, rel=0.1)


@pytest.mark.parametrize(
    ("rate", "settings", "steady"),
    [
        (5.0, FanoutSettings(), 15),  # 5 texts/s x 3 s
        (100.0, FanoutSettings(), DEFAULT_MAX_BATCH),  # 300 clamped to 64
        (0.4, FanoutSettings(), 2),  # 1.2 clamped up to min_batch
        (100.0, FanoutSettings(max_batch=20), 20),
    ],
)
def test_batch_size_grows_from_the_probe_toward_rate_times_3s_within_the_clamps(
    rate: float, settings: FanoutSettings, steady: int
) -> None:
    sim = Sim("gpu", rate=rate)
    rates = RateBook()
    n = DEFAULT_PROBE_BATCH + steady * 5
    result = run_virtual(lambda clock: fan(clock, [sim.lane()], n, settings=settings, rates=rates))
    assert_complete(result, n)
    sizes = [size for _, size in sim.calls]
    assert sizes == [DEFAULT_PROBE_BATCH] + [steady] * 5
    assert rates.rate("gpu") == pytest.approx(rate)


def test_a_rate_measured_in_one_call_sizes_the_first_batch_of_the_next() -> None:
    sim = Sim("gpu", rate=5.0)
    rates = RateBook()
    run_virtual(lambda clock: fan(clock, [sim.lane()], 30, rates=rates))
    sim.calls.clear()
    run_virtual(lambda clock: fan(clock, [sim.lane()], 30, rates=rates))
    assert sim.calls[0] == (0, 15)


def test_the_rate_book_is_an_ewma_with_the_new_sample_weighted_by_alpha() -> None:
    rates = RateBook()
    assert "a" not in rates and rates.rate("a") == 0.0
    rates.record("a", texts=10, seconds=1.0)
    rates.record("a", texts=20, seconds=1.0, alpha=0.3)
    assert rates.rate("a") == pytest.approx(13.0) and rates.snapshot() == {"a": pytest.approx(13.0)}
    assert rates.record("b", texts=8, seconds=0.0) > 0  # a zero-length call stays finite


def test_a_lane_that_fails_twice_in_a_row_is_dropped_and_the_other_serves_its_batches() -> None:
    good, bad = Sim("good", rate=50), Sim("bad", rate=50, fail_calls=set(range(100)))
    result = run_virtual(lambda clock: fan(clock, [good.lane(), bad.lane()], 300))
    assert_complete(result, 300)
    assert set(result.served_by) == {"good"}
    assert result.failures["bad"] == 2 and len(bad.calls) == 2
    assert "2 consecutive failures" in result.dropped["bad"] and "UpstreamUnavailable" in result.dropped["bad"]
    assert "good" not in result.dropped


def test_a_single_failure_then_success_does_not_drop_the_lane() -> None:
    flaky = Sim("flaky", rate=20, fail_calls={0})
    result = run_virtual(lambda clock: fan(clock, [flaky.lane()], 100))
    assert_complete(result, 100)
    assert result.failures["flaky"] == 1 and result.dropped == {}
    assert flaky.calls[1][0] == 0  # the failed probe was served on the next try


def test_a_gate_eviction_counts_as_one_failure_drops_the_lane_at_once_and_its_span_goes_to_the_front() -> None:
    evicted = Sim(
        "cloud",
        rate=50,
        kind="cloud",
        fail_calls={0},
        error=lambda: GateRefused("cloud", "vector-incompatible", "spot check: cosine -1.0 < 0.99"),
    )
    local = Sim("local", rate=5)
    result = run_virtual(lambda clock: fan(clock, [local.lane(), evicted.lane()], 60))
    assert_complete(result, 60)
    assert set(result.served_by) == {"local"} and len(evicted.calls) == 1  # never asked again
    assert result.failures["cloud"] == 1 and "vector-incompatible" in result.dropped["cloud"]
    ((start, _),) = evicted.calls
    assert start > 0 and local.calls[1][0] == start  # re-queued at the front: the local lane's next pull


def test_a_cloud_lane_whose_role_reaches_its_spend_cap_is_dropped_at_once_and_local_serves_the_rest() -> None:
    capped = Sim(
        "cloud",
        rate=50,
        kind="cloud",
        fail_calls={2},
        error=lambda: SpendCapReached("code-embedding", 0.5, 0.52, "2026-12-03T00:00:00+00:00"),
    )
    local = Sim("local", rate=5)
    result = run_virtual(lambda clock: fan(clock, [local.lane(), capped.lane()], 200))
    assert_complete(result, 200)  # nothing lost: every text has its vector
    assert result.failures["cloud"] == 1 and "spend cap" in result.dropped["cloud"]
    refused_start, refused_size = capped.calls[2]
    landed = [size for number, (_, size) in enumerate(capped.calls) if number != 2]  # in flight before: kept
    assert result.served_by.count("cloud") == sum(landed) and len(capped.calls) <= 4  # no pull after the drop
    assert set(result.served_by[refused_start : refused_start + refused_size]) == {"local"}  # re-queued


def test_a_failed_spot_check_is_a_failure_that_only_drops_the_lane_after_the_usual_two() -> None:
    flaky = Sim(
        "cloud",
        rate=50,
        kind="cloud",
        fail_calls={0},
        error=lambda: GateRefused("cloud", "probe-failed", "spot check: reference gpu0 could not re-embed"),
    )
    result = run_virtual(lambda clock: fan(clock, [flaky.lane()], 40))
    assert_complete(result, 40)
    assert result.failures["cloud"] == 1 and result.dropped == {}
    assert flaky.calls[1][0] == 0  # the refused batch was re-queued at the front


def test_a_429_requeues_without_a_failure_honours_retry_after_and_never_stalls_the_local_lane() -> None:
    n = 2000
    alone = Sim("local", rate=100)
    baseline = run_virtual(lambda clock: fan(clock, [alone.lane()], n))

    local = Sim("local", rate=100)
    attempts: list[float] = []

    def cloud_lane(clock: VirtualClock) -> Lane:
        async def throttled(texts: list[str]) -> np.ndarray:
            attempts.append(clock.now)
            raise RateLimited("cloud", "slow down", retry_after_s=5.0)

        return Lane(name="cloud", kind="cloud", embed=throttled)

    result = run_virtual(lambda clock: fan(clock, [cloud_lane(clock), local.lane()], n))
    assert_complete(result, n)
    assert result.batches["local"] == baseline.batches["local"]
    assert result.batches["cloud"] == 0 and result.failures["cloud"] == 0 and result.dropped == {}
    assert result.rate_limited["cloud"] == len(attempts) >= 2
    assert np.diff(attempts) == pytest.approx([5.0] * (len(attempts) - 1))


def test_a_429_without_retry_after_cools_down_for_the_configured_time() -> None:
    local = Sim("local", rate=100)

    async def throttled(texts: list[str]) -> np.ndarray:
        raise RateLimited("cloud", "slow down")

    settings = FanoutSettings(rate_limit_cooldown_s=1.5)
    cloud = Lane(name="cloud", kind="cloud", embed=throttled)
    sleeps: list[float] = []

    async def main(clock: VirtualClock) -> FanoutResult:
        result = await fan(clock, [local.lane(), cloud], 1000, settings=settings)
        sleeps.extend(clock.sleeps)
        return result

    result = run_virtual(main)
    assert result.rate_limited["cloud"] >= 2 and sleeps and set(sleeps) == {1.5}


def test_a_cloud_lane_without_a_permit_never_pulls_and_the_local_lane_serves_everything() -> None:
    local, cloud = Sim("local", rate=100), Sim("cloud", rate=1000, kind="cloud")
    asked: list[int] = []
    released: list[int] = []

    async def no_permit() -> bool:
        asked.append(1)
        return False

    async def release() -> None:
        released.append(1)

    lanes = [local.lane(), cloud.lane(admit=no_permit, release=release)]
    result = run_virtual(lambda clock: fan(clock, lanes, 1000))
    assert_complete(result, 1000)
    assert cloud.calls == [] and set(result.served_by) == {"local"}
    assert len(asked) >= 2 and released == []


def test_every_admitted_request_releases_its_permit_whatever_its_outcome() -> None:
    cloud = Sim("cloud", rate=100, kind="cloud", fail_calls={1})
    admitted: list[int] = []
    released: list[int] = []

    async def permit() -> bool:
        admitted.append(1)
        return True

    async def release() -> None:
        released.append(1)

    result = run_virtual(lambda clock: fan(clock, [cloud.lane(admit=permit, release=release)], 500))
    assert_complete(result, 500)
    assert len(released) == len(cloud.calls) == result.batches["cloud"] + 1
    assert len(admitted) >= len(released)


def test_a_wrong_width_result_counts_as_a_failure_and_its_vectors_are_never_used() -> None:
    good, wide = Sim("good", rate=50), Sim("wide", rate=500, width=WIDTH + 1)
    result = run_virtual(lambda clock: fan(clock, [wide.lane(), good.lane()], 200))
    assert_complete(result, 200)
    assert result.failures["wide"] == 2 and "expected vectors of width 4, got 5" in result.dropped["wide"]
    assert set(result.served_by) == {"good"}


def test_without_a_declared_width_the_first_batch_fixes_it_for_the_run() -> None:
    first, other = Sim("first", rate=100), Sim("other", rate=10, width=WIDTH + 2)
    result = run_virtual(lambda clock: fan(clock, [first.lane(), other.lane()], 200, width=None))
    assert_complete(result, 200)
    assert "other" in result.dropped


def test_a_parked_very_slow_lane_is_reprobed_every_20_batches() -> None:
    fast, slow = Sim("fast", rate=1000), Sim("slow", rate=30)  # 30 < 0.05 x 1000
    assert DEFAULT_MIN_RATE_RATIO * 1000 > 30
    order: list[str] = []

    def recording(sim: Sim) -> Lane:
        async def embed(texts: list[str]) -> np.ndarray:
            order.append(sim.name)
            return await sim.embed(texts)

        return Lane(name=sim.name, kind="local", embed=embed)

    result = run_virtual(lambda clock: fan(clock, [recording(fast), recording(slow)], 64 * 80))
    assert_complete(result, 64 * 80)
    positions = [i for i, name in enumerate(order) if name == "slow"]
    assert len(positions) >= 3
    assert all(size == DEFAULT_PROBE_BATCH for _, size in slow.calls)
    gaps = np.diff(positions) - 1  # batches other lanes dispatched in between
    assert list(gaps) == [DEFAULT_REPROBE_EVERY] * len(gaps)
    assert result.batches["slow"] == len(positions) and result.dropped == {}


def test_when_every_lane_fails_no_provider_left_lists_each_reason() -> None:
    down = Sim("down", rate=50, fail_calls=set(range(10)))
    broken = Sim("broken", rate=50, fail_calls=set(range(10)), error=lambda: RuntimeError("boom"))
    with pytest.raises(NoProviderLeft) as caught:
        run_virtual(lambda clock: fan(clock, [down.lane(), broken.lane()], 100))
    assert caught.value.role == "embedding"
    reasons = "\n".join(caught.value.reasons)
    assert "down: dropped after 2 consecutive failures" in reasons and "UpstreamUnavailable" in reasons
    assert "broken: dropped after 2 consecutive failures; last: RuntimeError: boom" in reasons


def test_no_lanes_raise_no_provider_left_and_no_texts_return_an_empty_result() -> None:
    with pytest.raises(NoProviderLeft):
        run_virtual(lambda clock: fan(clock, [], 3))
    sim = Sim("gpu", rate=10)
    empty = run_virtual(lambda clock: fan(clock, [sim.lane()], 0))
    assert empty.vectors.shape == (0, WIDTH) and empty.served_by == [] and sim.calls == []


def test_failed_batches_are_requeued_at_the_front_of_the_queue() -> None:
    # probe [0,8); then three batches of 30 at 10 texts/s: [8,38) [38,68) [68,98); [38,68) fails once
    sim = Sim("gpu", rate=10, fail_calls={2})
    result = run_virtual(lambda clock: fan(clock, [sim.lane()], 100))
    assert_complete(result, 100)
    assert sim.calls == [(0, 8), (8, 30), (38, 30), (68, 30), (38, 30), (98, 2)]


def test_on_batch_sees_each_batch_as_it_lands_one_at_a_time() -> None:
    fast, slow = Sim("fast", rate=100), Sim("slow", rate=60)
    seen: list[BatchDone] = []
    busy: list[bool] = [False]

    async def write(batch: BatchDone) -> None:
        assert not busy[0], "on_batch calls overlap"
        busy[0] = True
        await asyncio.sleep(0.05)
        seen.append(batch)
        busy[0] = False

    result = run_virtual(lambda clock: fan(clock, [fast.lane(), slow.lane()], 400, on_batch=write))
    assert_complete(result, 400)
    assert sorted((b.start, b.end) for b in seen) == sorted(
        (start, start + size) for sim in (fast, slow) for start, size in sim.calls
    )
    for batch in seen:
        np.testing.assert_array_equal(batch.vectors, result.vectors[batch.start : batch.end])
        assert set(result.served_by[batch.start : batch.end]) == {batch.lane}


def test_cancelling_the_call_cancels_every_lane_task_and_request() -> None:
    slow, cloud = Sim("slow", rate=1), Sim("cloud", rate=1, kind="cloud")
    released: list[int] = []

    async def permit() -> bool:
        return True

    async def release() -> None:
        released.append(1)

    async def no_permit() -> bool:
        return False

    async def main(clock: VirtualClock) -> set[asyncio.Task[Any]]:
        lanes = [
            slow.lane(),
            cloud.lane(admit=permit, release=release),
            Lane(name="waiting", kind="cloud", embed=slow.embed, admit=no_permit),
        ]
        call = asyncio.create_task(fan(clock, lanes, 1000))
        await asyncio.sleep(2.0)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]

    leftover = run_virtual(main)
    assert leftover == set()
    assert slow.cancelled == 1 and cloud.cancelled == 1 and released == [1]


def test_settings_reject_negative_sizes_and_min_above_max_naming_the_field() -> None:
    defaults = FanoutSettings()
    assert (defaults.target_batch_s, defaults.min_batch, defaults.max_batch, defaults.probe_batch) == (3.0, 2, 64, 8)
    assert (defaults.depth, defaults.slow_depth_ratio, defaults.min_rate_ratio, defaults.reprobe_every) == (
        3,
        0.5,
        0.05,
        20,
    )
    assert (defaults.max_consecutive_failures, defaults.rate_ewma_alpha, defaults.rate_limit_cooldown_s) == (
        2,
        0.3,
        2.0,
    )
    for field_name, value in [("min_batch", -1), ("max_batch", 0), ("depth", -3), ("target_batch_s", -1.0)]:
        with pytest.raises(ValidationError, match=field_name):
            FanoutSettings(**{field_name: value})
    with pytest.raises(ValidationError, match=r"min_batch \(10\) must not exceed max_batch \(5\)"):
        FanoutSettings(min_batch=10, max_batch=5, probe_batch=5)
    for ratio in ("slow_depth_ratio", "min_rate_ratio", "rate_ewma_alpha"):
        for bad in (0.0, 1.5):
            with pytest.raises(ValidationError, match=ratio):
                FanoutSettings(**{ratio: bad})
    with pytest.raises(ValidationError, match="probe_batch"):
        FanoutSettings(max_batch=4)
    with pytest.raises(ValidationError, match="extra"):
        FanoutSettings(batch=3)  # type: ignore[call-arg]


def test_a_lane_must_be_local_or_cloud_and_names_must_be_unique() -> None:
    sim = Sim("gpu", rate=1)
    with pytest.raises(ValueError, match="kind"):
        Lane(name="gpu", kind="gpu", embed=sim.embed)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unique"):
        run_virtual(lambda clock: fan(clock, [sim.lane(), sim.lane()], 3))


def test_a_plain_on_batch_is_called_and_its_error_fails_the_call_after_cleaning_up() -> None:
    sim = Sim("gpu", rate=10)
    seen: list[int] = []

    def write(batch: BatchDone) -> None:
        seen.append(batch.start)
        if len(seen) == 2:
            raise OSError("disk full")

    async def main(clock: VirtualClock) -> set[asyncio.Task[Any]]:
        with pytest.raises(OSError, match="disk full"):
            await fan(clock, [sim.lane()], 200, on_batch=write)
        return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]

    assert run_virtual(main) == set()
    assert seen == [0, 8]
