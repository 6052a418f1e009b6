"""When a registered index is reindexed on its own: its folder's change signature moved away from the
one its last build saw and then stayed put for the debounce period (an edit in progress waits)."""

from __future__ import annotations

from dataclasses import dataclass

from cluster.config import IndexRegistration

__all__ = ["SyncWatch"]


@dataclass(frozen=True)
class _Pending:
    signature: str
    since: float


class SyncWatch:
    """Debounce per index. Pure: the caller reads signatures and the clock."""

    def __init__(self, debounce_s: float) -> None:
        self._debounce_s = debounce_s
        self._pending: dict[str, _Pending] = {}

    def due(self, registration: IndexRegistration, signature: str, now: float) -> bool:
        """Whether the index should be reindexed now, seeing `signature` at `now`."""
        name = registration.name
        if registration.signature == signature:
            self._pending.pop(name, None)  # back to what was built: nothing to do
            return False
        pending = self._pending.get(name)
        if pending is None or pending.signature != signature:
            self._pending[name] = _Pending(signature, now)  # a new change: wait for it to settle
            return self._debounce_s <= 0
        return now - pending.since >= self._debounce_s

    def submitted(self, name: str) -> None:
        self._pending.pop(name, None)

    def forget(self, name: str) -> None:
        self._pending.pop(name, None)
