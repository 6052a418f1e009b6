"""The key-wide cloud budget (DESIGN §7): how many OpenRouter requests may run, and when.

One state machine per module, composed by `BudgetController`:
- `queue.py`: `FairQueue`, interactive before bulk, round-robin across projects, FIFO within one;
- `aimd.py`: `Aimd`, a 429 halves the permits and starts a jittered cooldown, clean intervals add back;
- `window.py`: `StartWindow`, a credible or learned rate enforced as a sliding window of starts (each
  counted until a window after its answer);
- `learning.py`: `RateLearner`, the key's rate measured at a 429, and probes above it.
`ceiling.py` holds the rules for the ceiling and the gate; `model.py` the defaults, limits and snapshot.
"""

from __future__ import annotations

from cluster.cloud.budget.controller import BudgetController
from cluster.cloud.budget.model import (
    CREDIT_PERMITS,
    DEFAULT_PERMITS,
    INITIAL_LATENCY_S,
    LATENCY_FLOOR_S,
    MAX_PERMITS,
    RAMP_INTERVAL_S,
    BudgetLimits,
    BudgetSnapshot,
    BudgetState,
    CeilingSource,
    KeyFacts,
    Outcome,
    Priority,
)

__all__ = [
    "CREDIT_PERMITS",
    "DEFAULT_PERMITS",
    "INITIAL_LATENCY_S",
    "LATENCY_FLOOR_S",
    "MAX_PERMITS",
    "RAMP_INTERVAL_S",
    "BudgetController",
    "BudgetLimits",
    "BudgetSnapshot",
    "BudgetState",
    "CeilingSource",
    "KeyFacts",
    "Outcome",
    "Priority",
]
