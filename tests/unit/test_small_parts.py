"""Progress meter, source reading, and the local encoder's identity (real packaged model)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cluster.errors import ConfigError, ReadRefused
from cluster.index.progress_meter import ProgressMeter
from cluster.ingest.chunking import split_lines
from cluster.ingest.secret_files import SECRET_DENY, DenyList
from cluster.ingest.source import read_source_lines


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


def test_read_source_lines_numbers_lines_as_the_chunker_does(tmp_path: Path) -> None:
    text = "one\r\ntwo\rstill two\nthree\r\n\nfive\n"
    (tmp_path / "mixed.py").write_bytes(text.encode())
    got = read_source_lines("r", tmp_path, "mixed.py", 1, 10, max_lines=400)
    assert got.text.split("\n") == split_lines(text) == ["one", "two\rstill two", "three", "", "five"]
    assert got.total_lines == 5
    (tmp_path / "latin.py").write_bytes(b"# caf\xe9\n" + b"x = 1\n" * 60)
    assert read_source_lines("r", tmp_path, "latin.py", 1, 1, max_lines=5).text == "# caf\ufffd"
    (tmp_path / "blob.bin").write_bytes(b"a\x00b\n")
    with pytest.raises(ReadRefused, match="not a text file"):
        read_source_lines("r", tmp_path, "blob.bin", 1, 1, max_lines=5)


def test_read_source_lines_redacts_a_credential_and_keeps_every_other_line(tmp_path: Path) -> None:
    token = "gh" + "p_" + "Zq7Xk2Rv9Lm4Tp8Wn3Hs6Jd1Gf5Bc0AyQ3ZK"
    pem = "-----BEGIN RSA PRIVATE" + " KEY-----\n" + "QUJD" * 16 + "\n" + "-----END RSA PRIVATE" + " KEY-----"
    lines = ["def connect():", f'    token = "{token}"', "    return token", pem, "after = 1"]
    (tmp_path / "app.py").write_text("\n".join(lines) + "\n")
    got = read_source_lines("r", tmp_path, "app.py", 1, 10, max_lines=400)
    served = got.text.split("\n")
    assert token not in got.text and "QUJD" not in got.text
    assert served[0] == "def connect():" and served[2] == "    return token" and served[-1] == "after = 1"
    assert served[1] == '    token = "[redacted:github-token]"' and served[3] == "[redacted:private-key]"
    assert got.total_lines == 7  # the key's three lines are kept as lines
    assert read_source_lines("r", tmp_path, "app.py", 7, 7, max_lines=5).text == "after = 1"


def test_read_source_lines_refuses_secret_files_even_when_asked_and_never_echoes_them(tmp_path: Path) -> None:
    secret = "canary" + "-" + "d41d8cd98f00b204e980"
    for rel in [".env", "keys/id_rsa", "deploy/server.pem", ".aws/credentials", ".git/config"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"value = {secret}\n")
    (tmp_path / "innocent.txt").symlink_to(tmp_path / ".git" / "config")
    (tmp_path / "env.txt").symlink_to(tmp_path / ".env")
    for rel in [
        ".env",
        "keys/id_rsa",
        "deploy/server.pem",
        ".aws/credentials",
        ".git/config",
        "./.env",
        "keys/../.env",
        "innocent.txt",
        "env.txt",
    ]:
        with pytest.raises(ReadRefused) as caught:
            read_source_lines("r", tmp_path, rel, 1, 1, max_lines=10)
        assert "deny-list" in caught.value.reason and secret not in str(caught.value)
    (tmp_path / ".env.example").write_text("API_KEY=\n")
    with pytest.raises(ReadRefused):
        read_source_lines("r", tmp_path, ".env.example", 1, 1, max_lines=10)
    reincluded = DenyList(SECRET_DENY, reinclude=[".env.example"])
    assert read_source_lines("r", tmp_path, ".env.example", 1, 1, max_lines=10, deny=reincluded).text == "API_KEY="


@pytest.fixture(scope="module")
def encoder():  # type: ignore[no-untyped-def]
    from cluster.local.encoder import LocalEncoder
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
    from cluster.local.encoder import LocalEncoder
    from cluster.settings import EmbeddingSettings

    with pytest.raises(ConfigError, match=r"embedding\.width"):
        LocalEncoder(EmbeddingSettings(width=2560))


def test_a_reindex_waits_for_encoders_still_starting_and_fails_at_once_for_anything_else() -> None:
    from cluster.build import await_reference
    from cluster.errors import NoProviderLeft
    from cluster.space import EncoderIdentity

    identity = EncoderIdentity(model="m", weights_sha256="w", width=4, max_seq_length=8)
    now = [0.0]
    answers: list[object] = [
        NoProviderLeft("code-embedding", ["samespace-embedder-cpu0: ineligible: did not answer: GetTimeoutError"])
    ] * 3 + [identity]
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
