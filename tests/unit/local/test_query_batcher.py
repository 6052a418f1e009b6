"""cluster.local.batcher.QueryBatcher: concurrent single-text encodes share model calls."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from cluster.local.batcher import QueryBatcher


class SlowModel:
    """encode_many: one row per text ([len(text), call number]); the first call blocks until released."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.first_call_started = threading.Event()
        self.release = threading.Event()

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        if len(self.batches) == 1:
            self.first_call_started.set()
            assert self.release.wait(5)
        return np.array([[len(t), len(self.batches)] for t in texts], dtype=np.float32)


def test_texts_waiting_while_the_model_is_busy_are_encoded_in_one_call_and_each_caller_gets_its_row() -> None:
    model = SlowModel()
    batcher = QueryBatcher(model, max_batch=8)
    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(batcher.encode, "a")
        assert model.first_call_started.wait(5)
        later = [pool.submit(batcher.encode, "b" * n) for n in range(2, 6)]  # queue behind the busy model
        while batcher.waiting < 4:  # all four are waiting
            threading.Event().wait(0.01)
        model.release.set()
        assert first.result(5).tolist() == [1, 1]
        rows = [f.result(5).tolist() for f in later]
    assert model.batches == [["a"], ["bb", "bbb", "bbbb", "bbbbb"]]  # two model calls for five queries
    assert rows == [[2, 2], [3, 2], [4, 2], [5, 2]] and batcher.calls == 2
    batcher.close()


def test_a_lone_query_is_encoded_at_once_without_waiting_for_company() -> None:
    calls: list[list[str]] = []
    batcher = QueryBatcher(lambda texts: calls.append(texts) or np.ones((len(texts), 2)), max_batch=4)
    assert batcher.encode("alone").tolist() == [1.0, 1.0]
    assert calls == [["alone"]]
    batcher.close()


def test_max_batch_caps_one_model_call() -> None:
    model = SlowModel()
    batcher = QueryBatcher(model, max_batch=2)
    with ThreadPoolExecutor(6) as pool:
        first = pool.submit(batcher.encode, "x")
        assert model.first_call_started.wait(5)
        later = [pool.submit(batcher.encode, f"q{i}") for i in range(5)]
        while batcher.waiting < 5:
            threading.Event().wait(0.01)
        model.release.set()
        first.result(5)
        for f in later:
            f.result(5)
    assert [len(b) for b in model.batches] == [1, 2, 2, 1]
    batcher.close()


def test_a_failed_model_call_raises_in_every_caller_of_that_batch_and_the_next_call_works() -> None:
    fail = [True]

    def model(texts: list[str]) -> np.ndarray:
        if fail[0]:
            raise RuntimeError("out of memory")
        return np.zeros((len(texts), 2))

    batcher = QueryBatcher(model)
    with pytest.raises(RuntimeError, match="out of memory"):
        batcher.encode("q")
    fail[0] = False
    assert batcher.encode("q").tolist() == [0.0, 0.0]
    batcher.close()


def test_a_model_returning_the_wrong_number_of_rows_is_an_error_not_a_hang() -> None:
    batcher = QueryBatcher(lambda texts: np.zeros((len(texts) + 1, 2)))
    with pytest.raises(ValueError, match="2 rows for 1 texts"):
        batcher.encode("q")
    batcher.close()


def test_a_closed_batcher_refuses_new_texts_and_max_batch_must_be_positive() -> None:
    batcher = QueryBatcher(lambda texts: np.zeros((len(texts), 1)))
    batcher.close()
    with pytest.raises(RuntimeError, match="closed"):
        batcher.encode("q")
    with pytest.raises(ValueError, match="max_batch"):
        QueryBatcher(lambda texts: np.zeros((len(texts), 1)), max_batch=0)
