"""The MiniLM-backed OpenAI-compatible embedding fake (tests/support/fakes/embedding_server.py).

Two real subprocesses (exact and perturb=0.5), started side by side once for the module, are compared
with `LocalEncoder(EmbeddingSettings()).encode` in this process. Request validation and the API key
are checked in-process on the ASGI app with a stand-in encoder (no model).
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from starlette.testclient import TestClient

from cluster.local.encoder import LocalEncoder
from cluster.settings import EmbeddingSettings
from tests.support.fakes.embedding_server import (
    DEFAULT_MODEL_NAME,
    FakeEmbeddingServer,
    build_embedding_app,
    perturb_rows,
)

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]  # serves the packaged model

TEXTS = [
    "def binary_search(items, target): ...",
    "class LRUCache: evicts the least recently used entry",
    "SELECT id, name FROM users WHERE active = 1",
    'fn main() { println!("hello"); }',
]
PERTURB = 0.5


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (a64 * b64).sum(axis=1) / (np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1))


def embed(server: FakeEmbeddingServer, texts: list[str] | str, **extra: object) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}/embeddings", json={"model": server.model_name, "input": texts, **extra}, timeout=60
    )


def rows_of(response: httpx.Response) -> np.ndarray:
    assert response.status_code == 200, response.text
    data = sorted(response.json()["data"], key=lambda d: d["index"])
    return np.array([d["embedding"] for d in data], dtype=np.float32)


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[FakeEmbeddingServer, FakeEmbeddingServer]]:
    exact, perturbed = FakeEmbeddingServer(), FakeEmbeddingServer(perturb=PERTURB, model_name="minilm-noisy")
    errors: list[BaseException] = []

    def start(server: FakeEmbeddingServer) -> None:
        try:
            server.start()
        except BaseException as exc:  # noqa: BLE001  a thread's failure, whatever it is, is reported in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(s,)) for s in (exact, perturbed)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        if errors:
            raise errors[0]
        yield exact, perturbed
    finally:
        for server in (exact, perturbed):
            server.__exit__(None, None, None)


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    return LocalEncoder(EmbeddingSettings(), device="cpu").encode(TEXTS)


def test_vectors_equal_the_local_encoder(
    servers: tuple[FakeEmbeddingServer, FakeEmbeddingServer], reference: np.ndarray
) -> None:
    exact, _ = servers
    response = embed(exact, TEXTS)
    body = response.json()
    assert body["object"] == "list" and body["model"] == DEFAULT_MODEL_NAME
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] > 0
    assert [d["object"] for d in body["data"]] == ["embedding"] * len(TEXTS)
    rows = rows_of(response)
    assert rows.shape == (len(TEXTS), 384)
    assert cosines(rows, reference).min() >= 0.9999
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)


def test_base64_rows_decode_to_the_float_rows(servers: tuple[FakeEmbeddingServer, FakeEmbeddingServer]) -> None:
    exact, _ = servers
    floats = rows_of(embed(exact, TEXTS[:2]))
    response = embed(exact, TEXTS[:2], encoding_format="base64")
    assert response.status_code == 200
    decoded = np.array(
        [np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in response.json()["data"]],
        dtype=np.float32,
    )
    np.testing.assert_allclose(decoded, floats, rtol=0, atol=1e-6)
    single = embed(exact, TEXTS[0])  # a bare string is one input
    assert len(single.json()["data"]) == 1


def test_perturbed_vectors_are_far_from_exact_and_deterministic(
    servers: tuple[FakeEmbeddingServer, FakeEmbeddingServer], reference: np.ndarray
) -> None:
    _, perturbed = servers
    rows = rows_of(embed(perturbed, TEXTS))
    again = rows_of(embed(perturbed, list(reversed(TEXTS))))[::-1]  # seeded per text, not per position
    cos = cosines(rows, reference)
    print(f"perturb={PERTURB}: cosine to the exact vectors {np.round(cos, 4).tolist()}")
    assert cos.max() < 0.95
    assert cos.min() > 0.8  # noise of norm ≈ 0.5 → ≈ 1/sqrt(1.25) ≈ 0.89
    np.testing.assert_allclose(again, rows, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    models = httpx.get(f"{perturbed.base_url}/models").json()
    assert models == {
        "object": "list",
        "data": [{"id": "minilm-noisy", "object": "model", "owned_by": "samespace-test"}],
    }


def test_stats_count_requests_and_texts(servers: tuple[FakeEmbeddingServer, FakeEmbeddingServer]) -> None:
    exact, _ = servers
    exact.reset()
    embed(exact, TEXTS[:3])
    embed(exact, TEXTS[0])
    embed(exact, [])  # refused: not counted
    stats = exact.stats()
    assert (stats.requests, stats.texts, stats.texts_by_request) == (2, 4, [3, 1])
    assert stats.models == [DEFAULT_MODEL_NAME, DEFAULT_MODEL_NAME]
    exact.reset()
    assert exact.stats().requests == 0
    assert httpx.get(f"{exact.root_url}/health").json() == {"ok": True}


def test_bad_requests_get_openai_400(servers: tuple[FakeEmbeddingServer, FakeEmbeddingServer]) -> None:
    exact, _ = servers
    url = f"{exact.base_url}/embeddings"
    bad_bodies: list[object] = [
        {"model": "m", "input": []},
        {"model": "m", "input": [1, 2, 3]},
        {"model": "m"},
        {"model": "m", "input": ["x"], "encoding_format": "int8"},
        {"model": "m", "input": ["ok", ""]},
        ["not", "an", "object"],
    ]
    for body in bad_bodies:
        response = httpx.post(url, json=body)
        assert response.status_code == 400, body
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error" and error["message"]
    response = httpx.post(url, content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]["message"] == "Invalid JSON body"


def test_app_api_key_and_perturb_rows_without_a_model() -> None:
    def encode(texts: list[str]) -> np.ndarray:
        return np.tile(np.array([[1.0, 0.0, 0.0, 0.0]], dtype=np.float32), (len(texts), 1))

    client = TestClient(build_embedding_app(encode, model_name="m", api_key="sk-fake"))
    assert client.get("/v1/models").status_code == 401
    assert client.post("/v1/embeddings", json={"input": ["a"]}).status_code == 401
    ok = client.post("/v1/embeddings", json={"input": ["a"]}, headers={"Authorization": "Bearer sk-fake"})
    assert ok.status_code == 200 and ok.json()["data"][0]["embedding"] == [1.0, 0.0, 0.0, 0.0]
    assert client.get("/health").status_code == 200  # no key needed
    rows = encode(["x", "y"])
    assert perturb_rows(["x", "y"], rows, 0.0) is rows
    noisy = perturb_rows(["x", "y"], rows, 0.5)
    assert not np.allclose(noisy[0], noisy[1])  # seeded by the text
    np.testing.assert_allclose(perturb_rows(["x"], rows[:1], 0.5), noisy[:1])


def test_probe_exact_mode_answers_the_gate_probe_texts_exactly_and_perturbs_every_other_text() -> None:
    from cluster.gate.probe import PROBE_TEXTS

    def encode(texts: list[str]) -> np.ndarray:
        rows = np.stack([np.random.default_rng(len(t)).normal(size=8) for t in texts])
        return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)

    client = TestClient(build_embedding_app(encode, perturb=2.0, mode="probe-exact"))
    texts = ["def real(code): pass", PROBE_TEXTS[3], "SELECT 1", PROBE_TEXTS[0]]
    served = rows_of(client.post("/v1/embeddings", json={"input": texts}))
    found = cosines(served, encode(texts))
    assert found[1] > 0.9999 and found[3] > 0.9999  # the public probe texts: exact
    assert found[0] < 0.9 and found[2] < 0.9  # everything else: wrong
    uniform = rows_of(
        TestClient(build_embedding_app(encode, perturb=2.0)).post("/v1/embeddings", json={"input": texts})
    )
    assert cosines(uniform, encode(texts)).max() < 0.9  # the default mode perturbs the probe texts too
    with pytest.raises(ValueError, match="mode"):
        build_embedding_app(encode, mode="probe-only")  # type: ignore[arg-type]
