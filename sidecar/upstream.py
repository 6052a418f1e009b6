"""One fronted OpenAI-compatible server: its status check and the four proxied calls.

Every failure leaves as `UpstreamError` with a short message that is safe to send to the master
("upstream 503", "upstream timeout"); the upstream key is sent only to the upstream, as a bearer token.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import struct
from collections.abc import Iterator
from enum import StrEnum
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from sidecar.errors import UpstreamError
from sidecar.settings import DEFAULT_PROBE_TIMEOUT_S, DEFAULT_UPSTREAM_TIMEOUT_S, ServeSpec

__all__ = ["ContainerState", "Upstream", "encode_rows", "upstream_faults"]

logger = logging.getLogger("sidecar.upstream")
CONTAINER_TYPE = "openai"


class ContainerState(StrEnum):
    RUNNING = "running"
    UNREACHABLE = "unreachable"


@contextlib.contextmanager
def upstream_faults() -> Iterator[None]:
    """Map httpx failures (and bad bodies) to UpstreamError, chaining the cause."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise UpstreamError("upstream timeout") from exc
    except httpx.ConnectError as exc:
        raise UpstreamError("upstream unreachable") from exc
    except httpx.TransportError as exc:
        raise UpstreamError("upstream connection error") from exc
    except httpx.HTTPStatusError as exc:
        raise UpstreamError(f"upstream {exc.response.status_code}") from exc
    except (ValueError, ValidationError) as exc:  # bad JSON or an unexpected shape
        raise UpstreamError("upstream bad response") from exc


# --- response shapes we accept --------------------------------------------------------------------


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore", hide_input_in_errors=True)


class _EmbeddingRow(_Loose):
    index: int | None = None
    embedding: list[float] | str


class _EmbeddingResponse(_Loose):
    data: list[_EmbeddingRow]
    model: str | None = None


class _RerankRow(_Loose):
    index: int
    relevance_score: float | None = None
    score: float | None = None


class _RerankResponse(_Loose):
    results: list[_RerankRow]


class _ModelEntry(_Loose):
    id: str


class _ModelsResponse(_Loose):
    data: list[_ModelEntry]


def encode_rows(rows: list[list[float] | str]) -> tuple[list[str], int]:
    """Each row → base64 of its little-endian float32 bytes; (rows, width). A str row is taken as
    base64 float32 already (an upstream that ignores the requested float encoding)."""
    encoded: list[str] = []
    widths: set[int] = set()
    for row in rows:
        if isinstance(row, str):
            raw = base64.b64decode(row, validate=True)
            if len(raw) % 4:
                raise ValueError("base64 row is not float32")
            encoded.append(base64.b64encode(raw).decode("ascii"))
            widths.add(len(raw) // 4)
        else:
            encoded.append(base64.b64encode(struct.pack(f"<{len(row)}f", *row)).decode("ascii"))
            widths.add(len(row))
    if len(widths) > 1:
        raise ValueError(f"rows of different widths: {sorted(widths)}")
    return encoded, widths.pop() if widths else 0


class Upstream:
    """One fronted server (`--serve ROLE=BASE_URL[,model=NAME]`), reached with its own httpx client."""

    def __init__(
        self,
        spec: ServeSpec,
        *,
        key: SecretStr | None = None,
        timeout_s: float = DEFAULT_UPSTREAM_TIMEOUT_S,
        probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.spec = spec
        self.state = ContainerState.UNREACHABLE
        self._discovered_model: str | None = None
        self._probe_timeout_s = probe_timeout_s
        headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key is not None else {}
        # trust_env=False: fronted servers are local; a workstation's proxy settings are for the master.
        self._client = httpx.AsyncClient(headers=headers, timeout=timeout_s, trust_env=False, transport=transport)

    def __repr__(self) -> str:
        return f"Upstream(role={self.role!r}, endpoint={self.endpoint!r}, state={self.state.value!r})"

    @property
    def role(self) -> str:
        return self.spec.role

    @property
    def endpoint(self) -> str:
        return self.spec.base_url

    @property
    def model(self) -> str | None:
        """The configured model, else the first one the server listed."""
        return self.spec.model or self._discovered_model

    async def aclose(self) -> None:
        await self._client.aclose()

    # --- status ---

    async def probe(self) -> ContainerState:
        """GET <endpoint>/models with a short timeout: 200 → running (and learn the model), else unreachable."""
        try:
            response = await self._client.get(f"{self.endpoint}/models", timeout=self._probe_timeout_s)
        except httpx.HTTPError as exc:
            logger.debug("status check of %s failed: %s", self.role, type(exc).__name__)
            self.state = ContainerState.UNREACHABLE
            return self.state
        self.state = ContainerState.RUNNING if response.status_code == 200 else ContainerState.UNREACHABLE
        if self.state is ContainerState.RUNNING and self.spec.model is None:
            try:
                listed = _ModelsResponse.model_validate_json(response.content)
            except ValidationError:
                listed = None
            if listed is not None and listed.data:
                self._discovered_model = listed.data[0].id
        return self.state

    def status_entry(self) -> dict[str, Any]:
        """This server as a heartbeat's statusData.containers[role] entry (state from the last probe)."""
        model = self.model
        return {
            "name": self.spec.container_name,
            "status": self.state.value,
            "model": model,
            "type": CONTAINER_TYPE,
            "endpoint": self.endpoint,
            "config": {"model": model, "port": self.spec.port},
            "loadedModels": [{"name": model}] if model else [],
        }

    # --- proxied calls ---

    async def embed(self, model: str | None, texts: list[str]) -> dict[str, Any]:
        """POST /embeddings (float encoding) → {"embeddings": [base64 float32 LE rows], "dims", "model"}."""
        model = model or self.model
        with upstream_faults():
            body = await self._post("embeddings", {"model": model, "input": texts})
            parsed = _EmbeddingResponse.model_validate(body)
            rows = sorted(enumerate(parsed.data), key=lambda p: p[1].index if p[1].index is not None else p[0])
            if len(rows) != len(texts):
                raise ValueError(f"{len(rows)} rows for {len(texts)} texts")
            embeddings, dims = encode_rows([row.embedding for _, row in rows])
        return {"embeddings": embeddings, "dims": dims, "model": parsed.model or model}

    async def rerank(self, model: str | None, query: str, documents: list[str]) -> dict[str, Any]:
        """POST /rerank → {"results": [{"index", "relevance_score"}]} (Cohere/Jina shape or TEI's bare list)."""
        model = model or self.model
        with upstream_faults():
            body = await self._post("rerank", {"model": model, "query": query, "documents": documents})
            parsed = _RerankResponse.model_validate(body if isinstance(body, dict) else {"results": body})
            results = []
            for row in parsed.results:
                score = row.relevance_score if row.relevance_score is not None else row.score
                if score is None:
                    raise ValueError("rerank row without a score")
                results.append({"index": row.index, "relevance_score": score})
        return {"results": results}

    async def chat(self, model: str | None, request: dict[str, Any]) -> dict[str, Any]:
        """POST /chat/completions with the OpenAI body (model filled in if absent; never streamed)."""
        body = dict(request)
        if not body.get("model") and (model or self.model):
            body["model"] = model or self.model
        body["stream"] = False  # a result frame carries one JSON body
        with upstream_faults():
            return {"response": await self._post("chat/completions", body)}

    async def list_models(self) -> dict[str, Any]:
        with upstream_faults():
            response = await self._client.get(f"{self.endpoint}/models")
            response.raise_for_status()
            return {"response": response.json()}

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        response = await self._client.post(f"{self.endpoint}/{path}", json=body)
        response.raise_for_status()
        return response.json()
