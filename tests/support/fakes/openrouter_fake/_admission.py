"""An inference request's way in: the key's checks (credits, RPM, in-flight), then the upstream's
latency and scripted faults, then the route's work, counted and charged."""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.responses import JSONResponse, Response

from ..scripted_chat import MalformedResponse
from ._config import KeyConfig, UpstreamBehaviour
from ._state import CounterRow, FakeState, UpstreamRuntime
from ._wire import error_response, priced, retry_after_header

Work = Callable[[UpstreamBehaviour], Awaitable[Response]]


@dataclass
class _Arrival:
    """One inference request on its way in: its key, its counter row and when it arrived."""

    state: FakeState
    key: str
    label: str
    row: CounterRow
    arrived: float

    def fail(self, response: Response) -> Response:
        """Log the refusal as an arrival and count it (a 429 as rate-limited, anything else as an error)."""
        self.state.arrivals.append((self.arrived, self.label, response.status_code))
        if response.status_code == 429:
            self.row.rate_limited += 1
        else:
            self.row.errors += 1
        return response


def _over_credits(state: FakeState, key: str, cfg: KeyConfig) -> Response | None:
    """402 when the key's usage reached its credits or its own limit."""
    usage = cfg.usage + state.usage.get(key, 0.0)
    if usage >= cfg.credits or (cfg.limit is not None and usage >= cfg.limit):
        source = "openrouter_credits" if usage >= cfg.credits else "openrouter_key_limit"
        return error_response(402, "Insufficient credits", metadata={"limit_source": source})
    return None


def _over_rpm(state: FakeState, key: str, cfg: KeyConfig, now: float) -> Response | None:
    """429 when the key's sliding window is full; otherwise the request takes its place in it."""
    rpm = cfg.rpm_limit or state.config.rpm
    if rpm is None:
        return None
    window = state.windows.setdefault(key, deque())
    span = state.config.rpm_window_s
    while window and window[0] <= now - span:
        window.popleft()
    if len(window) >= rpm:
        wait_s = max(1, math.ceil(window[0] + span - now))
        reset_ms = int((time.time() + wait_s) * 1000)
        headers = {
            "Retry-After": str(wait_s),
            "X-RateLimit-Limit": str(rpm),
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": str(reset_ms),
        }
        metadata = {"error_type": "rate_limit_exceeded"}
        return error_response(429, "Rate limit exceeded", metadata=metadata, headers=headers)
    window.append(now)
    return None


def _refused_once_admitted(state: FakeState, cfg: KeyConfig, label: str, upstream: str | None) -> Response | None:
    """402 when the key's in-flight budget is spent; 404 for an unlisted upstream under strict_upstreams."""
    if cfg.in_flight_budget is not None and state.in_flight.get(label, 0) >= cfg.in_flight_budget:
        metadata = {"reason": "in_flight_budget_exhausted", "limit_source": "openrouter_in_flight_budget"}
        headers = retry_after_header(cfg.in_flight_retry_after_s, "seconds")
        return error_response(402, "In-flight spending budget exhausted", metadata=metadata, headers=headers)
    if upstream is not None and state.config.strict_upstreams and upstream not in state.config.upstreams:
        return error_response(404, f"No allowed providers are available for the selected model ({upstream})")
    return None


def _scripted_fault(behaviour: UpstreamBehaviour, runtime: UpstreamRuntime, upstream: str | None) -> Response | None:
    """The upstream's scripted 429 or 5xx for this request, if one is due (draws in field order)."""
    every = behaviour.fail_429_every
    if (every is not None and runtime.requests % every == 0) or runtime.rng.random() < behaviour.fail_rate_429:
        headers = retry_after_header(behaviour.retry_after_s, behaviour.retry_after_format)
        metadata = {"error_type": "rate_limit_exceeded", "provider_name": upstream or "fake"}
        return error_response(429, "Provider returned error: rate limited", metadata=metadata, headers=headers)
    if runtime.requests <= behaviour.fail_5xx_count or runtime.rng.random() < behaviour.fail_5xx_rate:
        status = behaviour.fail_5xx_status
        return error_response(
            status, f"Provider returned error ({status})", metadata={"provider_name": upstream or "fake"}
        )
    return None


async def _answer(arrival: _Arrival, model: str | None, behaviour: UpstreamBehaviour, work: Work) -> Response:
    """A malformed body when the upstream is scripted to send one, else the work's answer, priced and charged."""
    state, row = arrival.state, arrival.row
    if behaviour.malformed == "invalid-json":
        row.errors += 1
        return Response('{"data": [', status_code=200, media_type="application/json")
    if behaviour.malformed == "wrong-shape":
        row.errors += 1
        return JSONResponse({"object": "list", "result": "not the shape you expected"})
    response, cost = priced(await work(behaviour), model, state.config)
    if response.status_code < 400 and not isinstance(response, MalformedResponse):
        row.ok += 1
        state.usage[arrival.key] = state.usage.get(arrival.key, 0.0) + cost + state.config.cost_per_request
    else:
        row.errors += 1
    return response


async def admit_and_run(
    state: FakeState, key: str, path: str, model: str | None, upstream: str | None, work: Work
) -> Response:
    """Key checks (credits, RPM, in-flight), then latency and scripted faults, then `work`."""
    cfg = state.config.keys[key]
    label = state.label(key)
    row = state.row(label, model, upstream, path)
    row.requests += 1
    # one clock reading: the RPM window and the arrivals log must agree to the tick
    arrival = _Arrival(state, key, label, row, arrived=state.clock())
    refused = _over_credits(state, key, cfg)
    if refused is None:
        refused = _over_rpm(state, key, cfg, arrival.arrived)
    if refused is not None:
        return arrival.fail(refused)
    state.arrivals.append((arrival.arrived, label, 200))
    refused = _refused_once_admitted(state, cfg, label, upstream)
    if refused is not None:
        return arrival.fail(refused)

    behaviour = state.behaviour(upstream)
    runtime = state.runtime(upstream, behaviour)
    runtime.requests += 1
    state.in_flight[label] = state.in_flight.get(label, 0) + 1
    state.max_in_flight[label] = max(state.max_in_flight.get(label, 0), state.in_flight[label])
    try:
        if behaviour.latency_s:
            await asyncio.sleep(behaviour.latency_s)
        fault = _scripted_fault(behaviour, runtime, upstream)
        if fault is not None:
            return arrival.fail(fault)
        return await _answer(arrival, model, behaviour, work)
    finally:
        state.in_flight[label] -= 1
