"""Rate learning (DESIGN §7): when no credible rpm is known, a 429 is a measurement.

The requests started in the window before the rejected one (and not rejected themselves) are the
key's rate, and the window gate is armed at it. Like a reported rpm, a measured one below 60/min is
believed only for a key known to be unfunded. A clean window with the gate full probes max(1, 5%)
higher; a 429 on a probing request steps back to the measured rate (our own experiment answered,
so the caller does not halve) and doubles the clean stretch the next probe waits for (up to 8
windows); any other 429 re-learns. One congestion event is one measurement: the 429s of requests
granted before the last measurement was taken answer the same question and are not measured again
(each of a burst's refusals counts a different share of that burst, 21 to 29 of a limit of 30).
"""

from __future__ import annotations

from collections import deque

from cluster.cloud.budget.ceiling import round_half_up

__all__ = ["MAX_PROBE_WINDOWS", "RateLearner"]

MAX_PROBE_WINDOWS = 8  # a refused probe doubles the clean stretch the next one waits for, up to this


class RateLearner:
    """The key's rate as measured at 429s, and the probes above it.

    window_s:                 the rate window; a learned rate is requests per window_s.
    probe_step_fraction:      a probe raises the rate by max(1, this × rate).
    min_plausible_rpm_funded: a measured rate below this is believed only for a key known to be unfunded.
    now:                      clock time at construction; the first probe's clean stretch starts here.
    """

    def __init__(
        self, *, window_s: float, probe_step_fraction: float, min_plausible_rpm_funded: float, now: float
    ) -> None:
        self._window_s = window_s
        self._probe_step_fraction = probe_step_fraction
        self._min_plausible_rpm_funded = min_plausible_rpm_funded
        self._learned: int | None = None  # requests per window_s, measured at a 429
        self._note = ""
        self._probe_mark = now  # last 429 or probe step: the clean stretch a probe waits for starts here
        self._probe_windows = 1  # windows a probe waits; doubles per refused probe, up to MAX_PROBE_WINDOWS
        self._probe_seq: int | None = None  # grant seq when the current probe step began; None = not probing
        self._saturated = False  # the gate's window filled since the last 429 / probe
        self._history: deque[tuple[float, int]] = deque()  # (start, grant seq) over two windows
        self._rejected: set[int] = set()  # grant seqs answered 429, still in history
        self._measured_through = 0  # the latest grant seq when the last measurement was taken

    @property
    def learned(self) -> int | None:
        """Requests per window_s the key allowed at the last 429 (or the probe above it); None = not learned."""
        return self._learned

    @property
    def note(self) -> str | None:
        """One line saying how the rate was learned; None while nothing is learned."""
        return self._note if self._learned is not None else None

    @property
    def probe_windows(self) -> int:
        """Windows of clean saturation the next probe waits for."""
        return self._probe_windows

    def record(self, now: float, seq: int) -> None:
        """A request started (granted as `seq`)."""
        self._history.append((now, seq))

    def expire(self, now: float) -> None:
        """Forget starts older than two windows (a measurement looks one window back from a start)."""
        while self._history and self._history[0][0] + 2 * self._window_s <= now:
            _, seq = self._history.popleft()
            self._rejected.discard(seq)

    def mark_saturated(self) -> None:
        """The window gate is full: a clean stretch from here on earns a probe."""
        self._saturated = True

    def probe_pending(self, *, reported: bool) -> bool:
        """A probe waits for its clean stretch; `reported`: a credible rpm gates instead, so nothing probes."""
        return self._learned is not None and not reported and self._saturated

    def probe_due_at(self) -> float:
        return self._probe_mark + self._probe_windows * self._window_s

    def step_probe(self, now: float, latest_seq: int, *, reported: bool) -> None:
        """A clean window at the learned cap probes one step higher."""
        learned = self._learned
        if learned is None or not self.probe_pending(reported=reported) or self.probe_due_at() > now:
            return
        if self._probe_seq is not None:
            self._probe_windows = 1  # the previous step held: probe again at full pace
        self._learned = learned + max(1, round_half_up(learned * self._probe_step_fraction))
        self._note = f"probing {self._learned} req/{self._window_s:g}s after a clean saturated window"
        self._probe_mark = now
        self._probe_seq = latest_seq
        self._saturated = False

    def on_rate_limited(self, now: float, started_at: float, seq: int, *, learn: bool, known_unfunded: bool) -> bool:
        """The request granted as `seq` at `started_at` was answered 429. True if it refused our own probe.

        learn:          learning is on and no credible rpm is known.
        known_unfunded: discovery found the key unfunded, so a low measured rate is believed.
        """
        self._rejected.add(seq)
        # The requests started in the window before the rejected one, and not themselves rejected, are
        # what the key allowed: a measured rate.
        window_start = started_at - self._window_s
        allowed = sum(1 for t, s in self._history if s < seq and t > window_start and s not in self._rejected)
        measured = max(1, allowed)
        if not (learn and self._plausible(measured, known_unfunded)):
            return False
        refused_probe = self._probe_seq is not None and seq > self._probe_seq
        if not refused_probe and seq <= self._measured_through:
            return False  # the same congestion event as the last measurement
        self._measured_through = self._history[-1][1] if self._history else seq
        if refused_probe:
            how = f"at a 429 (a probe of {self._learned} was refused)"
            self._probe_windows = min(MAX_PROBE_WINDOWS, self._probe_windows * 2)
        else:
            how = "from the first 429" if self._learned is None else "at a later 429"
        if self._learned != measured:  # a cascade of 429s at the same rate keeps the first note
            self._learned = measured
            self._note = f"learned {measured} req/{self._window_s:g}s {how}"
        self._probe_mark = now
        self._probe_seq = None
        self._saturated = False
        return refused_probe

    def _plausible(self, measured: int, known_unfunded: bool) -> bool:
        """A rate measured at a 429 is believed like a reported one: below the funded floor only for a
        key known to be unfunded. Otherwise so few requests cannot be the key's limit (an upstream
        hiccup, a burst): arming on it would hold the fan-out to a trickle, so AIMD alone answers it.
        """
        if measured * 60.0 / self._window_s >= self._min_plausible_rpm_funded:
            return True
        return known_unfunded
