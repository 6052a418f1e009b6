"""The fake's state: its configuration plus everything it counts (requests, RPM windows, in-flight, spend)."""

from __future__ import annotations

import hashlib
import random
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..scripted_chat import ChatRule, RequestLog, ScriptRunner
from ._config import FakeConfig, UpstreamBehaviour
from ._vectors import seed_for

Clock = Callable[[], float]

RECEIVED_BODIES = 20_000  # request bodies kept for `seen` (leak checks: did a canary reach the cloud?)


class CounterRow(BaseModel):
    key: str
    model: str | None
    upstream: str | None
    path: str
    requests: int = 0
    ok: int = 0
    rate_limited: int = 0
    errors: int = 0


class FakeStats(BaseModel):
    counters: list[CounterRow] = Field(default_factory=list)
    max_in_flight: dict[str, int] = Field(default_factory=dict, description="Per key label.")
    in_flight: dict[str, int] = Field(default_factory=dict)
    unauthorized: int = 0
    total_requests: int = Field(default=0, description="Every /api/v1 hit, authorised or not.")

    def total(
        self,
        counter: Literal["requests", "ok", "rate_limited", "errors"] = "requests",
        *,
        key: str | None = None,
        model: str | None = None,
        upstream: str | None = None,
        path: str | None = None,
    ) -> int:
        """Sum one counter over the rows matching every filter given (key = label)."""
        rows = self.counters
        return sum(
            getattr(r, counter)
            for r in rows
            if (key is None or r.key == key)
            and (model is None or r.model == model)
            and (upstream is None or r.upstream == upstream)
            and (path is None or r.path == path)
        )


@dataclass
class UpstreamRuntime:
    requests: int = 0
    rng: random.Random = field(default_factory=random.Random)


@dataclass
class FakeState:
    """Configuration plus everything the fake counts. Pass one to build_fake_app to inspect it in-process."""

    config: FakeConfig = field(default_factory=FakeConfig)
    clock: Clock = time.monotonic
    counters: dict[tuple[str, str | None, str | None, str], CounterRow] = field(default_factory=dict)
    windows: dict[str, deque[float]] = field(default_factory=dict)
    in_flight: dict[str, int] = field(default_factory=dict)
    max_in_flight: dict[str, int] = field(default_factory=dict)
    upstream_runtime: dict[str, UpstreamRuntime] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)
    unauthorized: int = 0
    total_requests: int = 0
    arrivals: deque[tuple[float, str, int]] = field(default_factory=lambda: deque(maxlen=100_000))
    chat_log: RequestLog = field(default_factory=RequestLog)
    script: ScriptRunner = field(default_factory=ScriptRunner)
    received: deque[bytes] = field(default_factory=lambda: deque(maxlen=RECEIVED_BODIES))
    _ids: int = 0

    def configure(self, config: FakeConfig) -> None:
        self.config = config
        self.upstream_runtime.clear()
        self.script.configure(config.chat_rules)
        self.chat_log.clear()

    def match_chat_rule(self, body: dict[str, Any]) -> ChatRule | None:
        """The first chat rule that applies to `body` (counted), following `config.chat_rules`."""
        self.script.follow(self.config.chat_rules)  # also when config was assigned without configure()
        return self.script.match(body)

    def seen(self, needles: list[str]) -> list[str]:
        """The needles that occur in any request body received (the last RECEIVED_BODIES bodies)."""
        encoded = [(needle, needle.encode("utf-8")) for needle in needles]
        return [needle for needle, raw in encoded if any(raw in body for body in self.received)]

    def reset(self) -> None:
        self.received.clear()
        self.chat_log.clear()
        self.script.reset_counts()
        self.arrivals.clear()
        self.counters.clear()
        self.windows.clear()
        self.in_flight.clear()
        self.max_in_flight.clear()
        self.upstream_runtime.clear()
        self.usage.clear()
        self.unauthorized = 0
        self.total_requests = 0

    def stats(self) -> FakeStats:
        return FakeStats(
            counters=[row.model_copy() for row in self.counters.values()],
            max_in_flight=dict(self.max_in_flight),
            in_flight=dict(self.in_flight),
            unauthorized=self.unauthorized,
            total_requests=self.total_requests,
        )

    # -- helpers used by the routes --

    def label(self, key: str) -> str:
        cfg = self.config.keys[key]
        return cfg.label or f"key-{hashlib.sha256(key.encode()).hexdigest()[:8]}"

    def row(self, label: str, model: str | None, upstream: str | None, path: str) -> CounterRow:
        ident = (label, model, upstream, path)
        if ident not in self.counters:
            self.counters[ident] = CounterRow(key=label, model=model, upstream=upstream, path=path)
        return self.counters[ident]

    def behaviour(self, upstream: str | None) -> UpstreamBehaviour:
        if upstream is not None and upstream in self.config.upstreams:
            return self.config.upstreams[upstream]
        return self.config.default_behaviour

    def runtime(self, upstream: str | None, behaviour: UpstreamBehaviour) -> UpstreamRuntime:
        name = upstream or ""
        if name not in self.upstream_runtime:
            seed = behaviour.seed if behaviour.seed is not None else self.config.seed
            rng = random.Random(seed_for("faults", seed, name)) if seed is not None else random.Random()
            self.upstream_runtime[name] = UpstreamRuntime(rng=rng)
        return self.upstream_runtime[name]

    def next_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}-{self._ids:06d}-{uuid.uuid4().hex[:8]}"
