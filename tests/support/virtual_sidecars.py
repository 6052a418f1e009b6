"""A sidecar hosting virtual containers, as the master's fleet hub sees it: a fake that answers the
commands and config frames the hub posts to one agent's HTTP outbox (no Ray, no sockets), and the
`containers` rows it reports."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cluster.fleet.hub import FleetHub, http_outbox
from cluster.fleet.identity import credential_digest
from cluster.settings import SamespaceSettings

WIDTH = 4
MODEL = "qwen/qwen3-embedding-8b"
AGENT_URL = "http://ws-7:8098"
Reply = Callable[[dict[str, Any]], dict[str, Any]]


async def sleep_forever(seconds: float) -> None:
    """The liveness loop is not driven: it waits until the hub stops it."""
    await asyncio.Event().wait()


def settings_at(tmp_path: Path, **fleet: Any) -> SamespaceSettings:
    return SamespaceSettings(
        admin={"config_path": tmp_path / "cluster.json"},
        embedding={"width": WIDTH},
        fleet=fleet,
        cloud={"routes": {"code-embedding": {"model": MODEL, "upstream": "deepinfra", "max_input_tokens": 512}}},
    )


def row(role: str = "code-embedding", **fields: Any) -> dict[str, Any]:
    """A `containers` row as a sidecar sends it (camelCase)."""
    label = {"code-embedding": "CodeEmbedding", "embedding": "Embedding", "reranker": "Reranker"}[role]
    base = {"name": f"ws-7-OR-{label}", "role": role, "model": MODEL, "provider": "deepinfra", "keyHeld": True}
    return {**base, **fields}


def b64(vector: list[float]) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()


class FakeSidecar:
    """Answers the commands and config frames the hub posts to one agent's HTTP outbox."""

    def __init__(self, hub: FleetHub, agent: str, digest: str, rows: list[dict[str, Any]]) -> None:
        self.hub, self.agent, self.digest = hub, agent, digest
        self.rows = rows
        self.seen: list[dict[str, Any]] = []
        self.replies: dict[str, Reply] = {}
        self._task: asyncio.Task[None] | None = None

    def answer(self, frame: dict[str, Any]) -> dict[str, Any]:
        if frame["type"] == "config":  # the key: the named containers (or all) now hold one
            if "config" in self.replies:
                return self.replies["config"](frame)
            named = frame["payload"]["openrouter"].get("containers")
            self.rows = [{**r, "keyHeld": r.get("keyHeld") or named is None or r["name"] in named} for r in self.rows]
            return {"ok": True}
        action = frame["action"]
        if action in self.replies:
            return self.replies[action](frame)
        if action == "containers":
            return {"virtualContainers": self.rows}
        if action == "virtual-embed":
            rows = [b64([1.0, 0.0, 0.0, float(i)]) for i in range(len(frame["texts"]))]
            usage = {"promptTokens": 7, "totalTokens": 7, "cost": 0.25}
            return {"source": "openrouter", "embeddings": rows, "dims": WIDTH, "model": MODEL, "usage": usage}
        if action == "virtual-rerank":
            results = [{"index": i, "relevance_score": 0.1 * i} for i in range(len(frame["documents"]))]
            return {"source": "openrouter", "results": results, "model": "r", "usage": {"promptTokens": 3}}
        raise AssertionError(f"unexpected action {action}")

    async def serve(self) -> None:
        while True:
            for frame in await self.hub.desk.take(http_outbox(self.agent), 5.0):
                self.seen.append(frame)
                reply = {"type": "result", "id": frame["id"], **self.answer(frame)}
                status, _ = self.hub.http_result(json.dumps(reply).encode(), self.agent, self.digest)
                assert status == 200

    def __enter__(self) -> FakeSidecar:
        self._task = asyncio.get_running_loop().create_task(self.serve())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()

    def actions(self) -> list[str]:
        return [frame.get("action", frame["type"]) for frame in self.seen]


def register(hub: FleetHub, url: str = AGENT_URL, hostname: str | None = "ws-7.local") -> tuple[str, str]:
    body = {"type": "register", "agentUrl": url, **({"hostname": hostname} if hostname else {})}
    status, answer = hub.http_register(json.dumps(body).encode())
    assert status == 200
    return answer["agentId"], credential_digest(answer["credential"])


async def settled(hub: FleetHub) -> None:
    """Let the discoveries the hub started run to their end."""
    await asyncio.sleep(0)
    await asyncio.wait_for(hub.discovered(), 5)


async def joined(hub: FleetHub, rows: list[dict[str, Any]], **where: Any) -> tuple[FakeSidecar, str]:
    agent, digest = register(hub, **where)
    sidecar = FakeSidecar(hub, agent, digest, rows).__enter__()
    await settled(hub)
    return sidecar, agent
