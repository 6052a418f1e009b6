"""The fake as an ASGI app: OpenRouter's routes under /api/v1 and the control plane under /_fake."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio.to_thread
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..scripted_chat import chat_log_endpoint, config_endpoint, log_json_body, scripted_response
from ._admission import admit_and_run
from ._chat import chat_answer
from ._config import FakeConfig, UpstreamBehaviour
from ._state import FakeState
from ._vectors import encode, shape_vectors
from ._wire import (
    PIN_RULE,
    _ChatRequest,
    _EmbeddingsRequest,
    _RerankRequest,
    error_response,
    loose_upstream,
    model_card,
    pinned_upstream,
)

API_PREFIX = "/api/v1"

BodyT = TypeVar("BodyT", bound=BaseModel)


class _Routes:
    """The route handlers over one FakeState."""

    def __init__(self, state: FakeState) -> None:
        self.state = state

    # -- what every authorised route does first --

    def authorise(self, request: Request) -> str | Response:
        """The request's key, or the 401 OpenRouter answers (counted as unauthorised)."""
        state = self.state
        state.total_requests += 1
        header = request.headers.get("authorization", "")
        scheme, _, key = header.partition(" ")
        if not header:
            state.unauthorized += 1
            return error_response(401, "No auth credentials found")
        if scheme.lower() != "bearer" or key not in state.config.keys:
            state.unauthorized += 1
            return error_response(401, "User not found.")
        return key

    async def read_body(self, request: Request, model: type[BodyT]) -> BodyT | Response:
        raw = await request.body()
        self.state.received.append(raw)
        try:
            return model.model_validate(json.loads(raw))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return error_response(400, "Invalid JSON body")
        except ValidationError as exc:
            first = exc.errors()[0]
            return error_response(400, f"Invalid request: {'.'.join(map(str, first['loc']))}: {first['msg']}")

    def keyed(self, answer: Callable[[str], Response]) -> Callable[[Request], Awaitable[Response]]:
        """An endpoint that authorises the request, then answers for its key."""

        async def endpoint(request: Request) -> Response:
            key = self.authorise(request)
            return key if isinstance(key, Response) else answer(key)

        return endpoint

    async def open_inference(self, request: Request, model: type[BodyT], path: str) -> tuple[str, BodyT] | Response:
        """The key and the parsed body of an inference request, or its 401/400 (a 400 counted as an error)."""
        key = self.authorise(request)
        if isinstance(key, Response):
            return key
        body = await self.read_body(request, model)
        if isinstance(body, Response):
            self.state.row(self.state.label(key), None, None, path).errors += 1
            return body
        return key, body

    # -- API routes --

    async def embeddings(self, request: Request) -> Response:
        opened = await self.open_inference(request, _EmbeddingsRequest, "/embeddings")
        return opened if isinstance(opened, Response) else await self._embed(*opened)

    async def _embed(self, key: str, body: _EmbeddingsRequest) -> Response:
        state = self.state
        upstream = pinned_upstream(body.provider)
        if upstream is None or body.provider is None or body.provider.allow_fallbacks is not False:
            row = state.row(state.label(key), body.model, upstream, "/embeddings")
            row.requests += 1
            row.errors += 1
            return error_response(400, f"fake OpenRouter: {PIN_RULE}")
        texts = [body.input] if isinstance(body.input, str) else body.input
        pinned: str = upstream

        async def work(behaviour: UpstreamBehaviour) -> Response:
            vectors = await anyio.to_thread.run_sync(encode, texts)
            vectors = shape_vectors(vectors, behaviour, pinned, texts, state.config)
            rows = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
            if behaviour.malformed == "missing-row" and rows:
                rows = rows[:-1]
            tokens = sum(len(t.split()) for t in texts)
            return JSONResponse(
                {
                    "id": state.next_id("gen-emb"),
                    "object": "list",
                    "data": rows,
                    "model": body.model,
                    "provider": pinned,
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                }
            )

        return await admit_and_run(state, key, "/embeddings", body.model, upstream, work)

    async def rerank(self, request: Request) -> Response:
        opened = await self.open_inference(request, _RerankRequest, "/rerank")
        return opened if isinstance(opened, Response) else await self._rerank(*opened)

    async def _rerank(self, key: str, body: _RerankRequest) -> Response:
        state = self.state
        docs = [d if isinstance(d, str) else d.text for d in body.documents]
        upstream = loose_upstream(body.provider)

        async def work(behaviour: UpstreamBehaviour) -> Response:
            vectors = await anyio.to_thread.run_sync(encode, [body.query, *docs])
            scores = vectors[1:] @ vectors[0]
            order = sorted(range(len(docs)), key=lambda i: -float(scores[i]))[: body.top_n or len(docs)]
            results = [{"index": i, "relevance_score": float(scores[i]), "document": {"text": docs[i]}} for i in order]
            tokens = len(body.query.split()) + sum(len(d.split()) for d in docs)
            return JSONResponse(
                {
                    "id": state.next_id("gen-rerank"),
                    "model": body.model,
                    "provider": upstream or "fake",
                    "results": results,
                    "usage": {"search_units": 1, "total_tokens": tokens},
                }
            )

        return await admit_and_run(state, key, "/rerank", body.model, upstream, work)

    async def chat(self, request: Request) -> Response:
        raw = await log_json_body(request, self.state.chat_log)  # logged first: unauthorised requests too
        opened = await self.open_inference(request, _ChatRequest, "/chat/completions")
        return opened if isinstance(opened, Response) else await self._chat(*opened, raw)

    async def _chat(self, key: str, body: _ChatRequest, raw: dict[str, Any]) -> Response:
        state = self.state
        upstream = loose_upstream(body.provider)

        async def work(behaviour: UpstreamBehaviour) -> Response:
            completion_id = state.next_id("gen")
            rule = state.match_chat_rule(raw)
            if rule is not None:
                return await scripted_response(
                    rule, raw, completion_id, body.model, extra={"provider": upstream or "fake"}
                )
            return JSONResponse(chat_answer(body, completion_id))

        return await admit_and_run(state, key, "/chat/completions", body.model, upstream, work)

    def key_info(self, key: str) -> Response:
        state = self.state
        cfg = state.config.keys[key]
        usage = cfg.usage + state.usage.get(key, 0.0)
        row = state.row(state.label(key), None, None, "/key")
        row.requests += 1
        row.ok += 1
        data = {
            "label": state.label(key),
            "limit": cfg.limit,
            "limit_remaining": None if cfg.limit is None else max(0.0, cfg.limit - usage),
            "limit_reset": None,
            "include_byok_in_limit": False,
            "usage": usage,
            "usage_daily": usage,
            "usage_weekly": usage,
            "usage_monthly": usage,
            "is_free_tier": cfg.is_free_tier,
            "is_management_key": cfg.management,
            "rate_limit": {"requests": -1, "interval": "10s", "note": "This field is deprecated and safe to ignore."},
            "expires_at": None,
        }
        return JSONResponse({"data": data})

    def credits(self, key: str) -> Response:
        state = self.state
        cfg = state.config.keys[key]
        row = state.row(state.label(key), None, None, "/credits")
        row.requests += 1
        if not cfg.management:
            row.errors += 1
            return error_response(403, "Only management keys can fetch credits")
        row.ok += 1
        return JSONResponse(
            {"data": {"total_credits": cfg.credits, "total_usage": cfg.usage + state.usage.get(key, 0.0)}}
        )

    async def models(self, request: Request) -> Response:
        self.state.total_requests += 1  # no auth, as upstream
        data = [model_card(entry) for entry in self.state.config.models]
        return JSONResponse({"data": data})

    # -- control plane --

    async def get_arrivals(self, request: Request) -> Response:
        """Inference requests as they arrived: [clock time, key label, status at admission (200 = admitted)]."""
        return JSONResponse([list(row) for row in self.state.arrivals])

    async def get_stats(self, request: Request) -> Response:
        return JSONResponse(self.state.stats().model_dump(mode="json"))

    async def seen(self, request: Request) -> Response:
        """POST {"needles": [...]} → {"seen": [the needles found in any request body received]}."""
        body = json.loads(await request.body())
        return JSONResponse({"seen": self.state.seen([str(n) for n in body.get("needles", [])])})

    async def reset(self, request: Request) -> Response:
        self.state.reset()
        return JSONResponse({"ok": True})

    async def health(self, request: Request) -> Response:
        return JSONResponse({"ok": True})


def build_fake_app(state: FakeState | None = None) -> Starlette:
    """The fake as an ASGI app. Without `state` it starts with an empty FakeConfig (no keys)."""
    state = state if state is not None else FakeState()
    api = _Routes(state)
    routes = [
        Route(f"{API_PREFIX}/embeddings", api.embeddings, methods=["POST"]),
        Route(f"{API_PREFIX}/rerank", api.rerank, methods=["POST"]),
        Route(f"{API_PREFIX}/chat/completions", api.chat, methods=["POST"]),
        Route(f"{API_PREFIX}/key", api.keyed(api.key_info), methods=["GET"]),
        Route(f"{API_PREFIX}/credits", api.keyed(api.credits), methods=["GET"]),
        Route(f"{API_PREFIX}/models", api.models, methods=["GET"]),
        Route("/_fake/config", config_endpoint(FakeConfig, state.configure), methods=["POST"]),
        Route("/_fake/stats", api.get_stats, methods=["GET"]),
        Route("/_fake/arrivals", api.get_arrivals, methods=["GET"]),
        Route("/_fake/chat_log", chat_log_endpoint(state.chat_log), methods=["GET"]),
        Route("/_fake/seen", api.seen, methods=["POST"]),
        Route("/_fake/reset", api.reset, methods=["POST"]),
        Route("/_fake/health", api.health, methods=["GET"]),
    ]
    app = Starlette(routes=routes)
    app.state.fake = state
    return app
