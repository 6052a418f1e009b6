"""Local chat endpoint actor: one OpenAI-compatible server (vLLM, Ray Serve LLM...) serving one chat role.

A Ray shell around cluster.local.chat_client.LocalChatClient, discovered like every other provider.
A server that is asleep or gone stays listed (eligible); its calls fail fast and the caller falls
back (DESIGN §9: null on error).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import ray
from pydantic import SecretStr

from cluster.cloud import ChatResult
from cluster.local.chat_client import LocalChatClient
from cluster.providers import ProviderInfo, ProviderKind
from cluster.roles import Role
from cluster.settings import ChatEndpoint


@ray.remote(num_cpus=0, max_restarts=-1)
class ChatEndpointActor:
    def __init__(self, name: str, role: Role, endpoint: ChatEndpoint) -> None:
        key = os.environ.get(endpoint.key_env) if endpoint.key_env else None
        self._name = name
        self._role = role
        self._endpoint = endpoint
        self._client = LocalChatClient(name, endpoint, SecretStr(key) if key else None)
        self._node_id = ray.get_runtime_context().get_node_id()
        self._context: tuple[float, int] | None = None  # (read at, window)
        self._served = 0
        self._failures = 0
        self._last_error: str | None = None

    def __repr__(self) -> str:
        return f"ChatEndpointActor({self._name!r})"

    def describe(self) -> ProviderInfo:
        return ProviderInfo(
            name=self._name,
            kind=ProviderKind.LOCAL,
            roles=[self._role],
            node_id=self._node_id,
            host=socket.gethostname(),
            model=self._endpoint.model,
            eligible=True,
            served=self._served,
            failures=self._failures,
            last_error=self._last_error,
        )

    async def chat(self, **request: Any) -> ChatResult:
        """messages, tools, tool_choice, max_tokens, temperature → ChatResult."""
        try:
            result = await self._client.chat(**request)
        except Exception as exc:
            self._failures += 1
            self._last_error = str(exc)[:300]
            raise
        self._served += 1
        return result

    async def context_window(self) -> int | None:
        """The server's context window (`max_model_len`), re-read after `context_ttl_s`; None while unknown."""
        now = time.monotonic()
        if self._context is not None and now - self._context[0] < self._endpoint.context_ttl_s:
            return self._context[1]
        try:
            window = await self._client.context_window()
        except Exception as exc:  # noqa: BLE001 - unknown means the caller's safe default
            self._last_error = str(exc)[:300]
            return None
        self._context = (now, window) if window else None
        return window
