"""Label values that need a rule: a state gauge's series as the state moves, an ask fallback's stage.

Pure; `actors/metrics.py` turns what these return into gauge writes and counter increments.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "FALLBACK_STAGES",
    "OTHER_STAGE",
    "OneHot",
    "failure_kind",
    "fallback_stage",
]

# An ask's fallbacks are sentences (cluster/ask/pipeline.py); the label is the stage that fell back,
# from a closed set, so a reworded sentence never grows the series count.
FALLBACK_STAGES = {
    "rlm": "rlm",
    "retrieval": "retrieval",
    "synthesis": "synthesis",
    "no evidence": "no-evidence",
    "internal error": "internal",
}
OTHER_STAGE = "other"


def fallback_stage(fallback: str) -> str:
    """The stage an ask fallback sentence is about ('rlm: deadline (...) → ...' → 'rlm')."""
    head = fallback.strip().lower()
    for prefix, stage in FALLBACK_STAGES.items():
        if head.startswith(prefix):
            return stage
    return OTHER_STAGE


class OneHot:
    """The series of a gauge that names a state in a label (a provider's verdict, the budget's state):
    1 on the state in force, and 0 on the one it left, so a dashboard never shows two at once."""

    def __init__(self) -> None:
        self._current: dict[tuple[tuple[str, str], ...], str] = {}

    def move(self, key: Mapping[str, str], state: str) -> list[tuple[str, float]]:
        """The (state, value) writes that say `key` is now in `state`: the old state's 0 first."""
        slot = tuple(sorted(key.items()))
        previous = self._current.get(slot)
        self._current[slot] = state
        if previous is None or previous == state:
            return [(state, 1.0)]
        return [(previous, 0.0), (state, 1.0)]

    def current(self, key: Mapping[str, str]) -> str | None:
        return self._current.get(tuple(sorted(key.items())))


def failure_kind(exc: BaseException) -> str:
    """The exception class a failure is counted under: for an error Ray re-raised from an actor (a
    `RayTaskError(RateLimited)`), the class raised there, kept as its `cause`."""
    cause = getattr(exc, "cause", None)
    return type(cause if isinstance(cause, BaseException) else exc).__name__
