"""Search load for the chaos tests: MCP clients calling `search_code` in a loop on a thread of their own,
every call's outcome recorded with its time, its answer (the hits' places) or the error's name.

Bounded: each client sleeps between calls and every call has a deadline; `stop()` ends the loop.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

CALL_TIMEOUT_S = 30.0
PAUSE_S = 0.1
Answer = tuple[tuple[str, int], ...]
UNNAMED = "tool:unnamed"


@dataclass(frozen=True)
class Outcome:
    client: int
    started: float
    ended: float
    query: str
    answer: Answer | None
    error: str | None


def answer_of(structured: dict[str, Any]) -> Answer:
    """What a search answered, as places: (path, start line) of each hit, in rank order."""
    return tuple((hit["path"], int(hit["start_line"])) for hit in structured["hits"])


def error_name(exc: BaseException) -> str:
    """An exception's name, unwrapping the task groups the SDK's client raises from."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return type(exc).__name__


def tool_error_name(text: str) -> str:
    """A tool error's name: the error class the server names, else the message's first words."""
    body = text.removeprefix("Error executing tool search_code").lstrip(": ")
    if not body:
        return UNNAMED  # the SDK's answer to a crash: nothing says what failed
    named = re.search(r"\b([A-Z][A-Za-z]+(?:Error|Exception|Unavailable|Died|Refused|NotFound))\b", body)
    return f"tool:{named.group(1)}" if named else f"tool:{' '.join(body.split()[:6])}"


@dataclass
class SearchLoad:
    url: str
    queries: Sequence[str]
    repo: str
    clients: int = 3
    outcomes: list[Outcome] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), name="chaos-load", daemon=True)

    def start(self) -> SearchLoad:
        self._thread.start()
        return self

    def stop(self) -> list[Outcome]:
        self._stop.set()
        self._thread.join(CALL_TIMEOUT_S + 10)
        assert not self._thread.is_alive(), "the search load did not stop"
        return list(self.outcomes)

    def errors(self) -> Counter[str]:
        return Counter(o.error for o in self.outcomes if o.error is not None)

    async def _run(self) -> None:
        await asyncio.gather(*(self._client(n) for n in range(self.clients)))

    async def _client(self, n: int) -> None:
        i = n
        while not self._stop.is_set():
            query = self.queries[i % len(self.queries)]
            i += 1
            started = time.monotonic()
            answer, error = await self._call(query)
            self.outcomes.append(Outcome(n, started, time.monotonic(), query, answer, error))
            await asyncio.sleep(PAUSE_S)

    async def _call(self, query: str) -> tuple[Answer | None, str | None]:
        from mcp import Client

        try:
            async with asyncio.timeout(CALL_TIMEOUT_S), Client(self.url) as client:
                result = await client.call_tool("search_code", {"query": query, "k": 5, "repo": self.repo})
        except Exception as exc:  # noqa: BLE001  every failure a client sees is counted by name
            return None, error_name(exc)
        if result.is_error:
            return None, tool_error_name("\n".join(getattr(block, "text", "") for block in result.content))
        return answer_of(result.structured_content or {}), None


def recovery_s(outcomes: Sequence[Outcome], killed_at: float) -> float:
    """Seconds from the kill until the first success after the last error (0 when nothing failed)."""
    failures = [o for o in outcomes if o.error is not None]
    if not failures:
        return 0.0
    last = max(o.ended for o in failures)
    after = [o.ended for o in outcomes if o.error is None and o.started >= last]
    assert after, "no search succeeded after the last error"
    return min(after) - killed_at
