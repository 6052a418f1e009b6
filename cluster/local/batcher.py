"""Micro-batching of concurrent single-text encodes: one model call for every query waiting.

A query's vector is one short text. Encoded one by one, N concurrent queries cost N model calls,
each paying the whole per-call overhead (and, on CPU, a thread team woken for a 1-row matrix).
`QueryBatcher` gives every caller its own row but runs the model once for all texts that are
waiting when the model comes free: no timer, so a lone query never waits for company.

Plain threads: callers block in `encode(text)` (the embedder actor's query group runs them on
its own threads); one worker thread owns the model calls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = ["DEFAULT_MAX_BATCH", "QueryBatcher"]

DEFAULT_MAX_BATCH = 32  # queries are short: 32 of them pad to little and fit one call comfortably


@dataclass
class _Waiting:
    text: str
    done: threading.Event = field(default_factory=threading.Event)
    row: np.ndarray | None = None
    error: BaseException | None = None


class QueryBatcher:
    """Coalesces concurrent `encode(text)` calls into `encode_many(texts)` calls of at most `max_batch`."""

    def __init__(self, encode_many: Callable[[list[str]], np.ndarray], *, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self._encode_many = encode_many
        self._max_batch = max_batch
        self._waiting: list[_Waiting] = []
        self._ready = threading.Condition()
        self._closed = False
        self.calls = 0  # model calls made
        self._worker = threading.Thread(target=self._run, name="query-batcher", daemon=True)
        self._worker.start()

    def encode(self, text: str) -> np.ndarray:
        """This text's row, encoded together with whatever other texts are waiting."""
        waiting = _Waiting(text)
        with self._ready:
            if self._closed:
                raise RuntimeError("the query batcher is closed")
            self._waiting.append(waiting)
            self._ready.notify()
        waiting.done.wait()
        if waiting.error is not None:
            raise waiting.error
        assert waiting.row is not None
        return waiting.row

    @property
    def waiting(self) -> int:
        """Texts waiting for the model now (not counting the batch it is encoding)."""
        with self._ready:
            return len(self._waiting)

    def close(self) -> None:
        """Stop the worker once the texts already waiting are encoded."""
        with self._ready:
            self._closed = True
            self._ready.notify()
        self._worker.join()

    def _take(self) -> list[_Waiting] | None:
        with self._ready:
            while not self._waiting and not self._closed:
                self._ready.wait()
            if not self._waiting:
                return None
            batch, self._waiting = self._waiting[: self._max_batch], self._waiting[self._max_batch :]
            return batch

    def _run(self) -> None:
        while (batch := self._take()) is not None:
            self.calls += 1
            try:
                rows = self._encode_many([w.text for w in batch])
                if len(rows) != len(batch):
                    raise ValueError(f"encoded {len(rows)} rows for {len(batch)} texts")
            except BaseException as exc:  # noqa: BLE001 - handed to every caller of this batch, who re-raises it
                for waiting in batch:
                    waiting.error = exc
                    waiting.done.set()
                continue
            for waiting, row in zip(batch, rows, strict=True):
                waiting.row = row
                waiting.done.set()
