"""Progress meter, source reading, and the local encoder's identity (real packaged model)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cluster.errors import ConfigError, ReadRefused
from cluster.progress import ProgressMeter
from cluster.source import read_source_lines


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_reports_rate_and_eta_from_the_injected_clock() -> None:
    clock = FakeClock()
    meter = ProgressMeter(files_total=4, chunks_total=100, clock=clock)
    clock.now += 10
    meter.advance(chunks=25, files=1)
    snap = meter.snapshot()
    assert (snap.chunks_per_s, snap.eta_s) == (2.5, 30.0)
    assert meter.line() == "progress: files 1/4 chunks 25/100 (25.0%) 2.5 chunks/s ETA 30s"


def test_read_source_lines_is_exact_bounded_and_confined(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("\n".join(f"line {i}" for i in range(1, 11)))
    got = read_source_lines("r", tmp_path, "a.py", 2, 4, max_lines=400)
    assert got.text == "line 2\nline 3\nline 4" and not got.truncated and got.total_lines == 10
    capped = read_source_lines("r", tmp_path, "a.py", 1, 10, max_lines=3)
    assert capped.end_line == 3 and capped.truncated
    for path, start, end in [("../x", 1, 1), ("a.py", 11, 12), ("a.py", 3, 2), ("missing.py", 1, 1)]:
        with pytest.raises(ReadRefused):
            read_source_lines("r", tmp_path, path, start, end, max_lines=10)


@pytest.fixture(scope="module")
def encoder():  # type: ignore[no-untyped-def]
    from cluster.encoder import LocalEncoder
    from cluster.settings import EmbeddingSettings

    return LocalEncoder(EmbeddingSettings(cpu_threads=2))


def test_the_packaged_model_loads_offline_with_a_stable_identity(encoder) -> None:  # type: ignore[no-untyped-def]
    identity = encoder.identity
    assert identity.width == 384 and identity.normalized and len(identity.weights_sha256) == 64
    vectors = encoder.encode(["hello world", "def f(): pass"])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(vectors[0][:3], [-0.03447721, 0.03102321, 0.00673498], atol=1e-5)


def test_a_width_that_disagrees_with_the_model_is_a_config_error() -> None:
    from cluster.encoder import LocalEncoder
    from cluster.settings import EmbeddingSettings

    with pytest.raises(ConfigError, match="embedding.width"):
        LocalEncoder(EmbeddingSettings(width=2560))


def test_a_reindex_waits_for_encoders_still_starting_and_fails_at_once_for_anything_else() -> None:
    from cluster.errors import NoProviderLeft
    from cluster.space import EncoderIdentity
    from jobs.reindex import await_reference

    identity = EncoderIdentity(model="m", weights_sha256="w", width=4, max_seq_length=8)
    now = [0.0]
    answers: list[object] = [NoProviderLeft("code-embedding", ["samespace-embedder-cpu0: ineligible: did not answer: "
                                                               "GetTimeoutError"])] * 3 + [identity]
    lines: list[str] = []

    def ask() -> EncoderIdentity:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[return-value]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    assert await_reference(ask, 300, lines.append, lambda: now[0], sleep) == identity
    assert len(lines) == 3 and "waiting for encoders to start" in lines[0]
    final = NoProviderLeft("code-embedding", ["pc-OR-CodeEmbedding: ineligible: no OpenRouter key pushed"])
    answers[:] = [final]
    with pytest.raises(NoProviderLeft):
        await_reference(ask, 300, lines.append, lambda: now[0], sleep)
    answers[:] = [NoProviderLeft("code-embedding", ["x: did not answer: GetTimeoutError"])] * 200
    with pytest.raises(NoProviderLeft):  # still starting after the timeout: give up
        await_reference(ask, 10, lines.append, lambda: now[0], sleep)
