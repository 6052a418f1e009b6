"""An OpenRouter-compatible fake: the same API under /api/v1, scripted upstream faults, a control plane.

Embeddings come from the real packaged MiniLM, so "same" vectors are exactly the local model's.
Every upstream slug gets an `UpstreamBehaviour` (vectors, latency, 429s, 5xx, malformed bodies);
every key gets a `KeyConfig` (a key-wide sliding 60 s RPM window, credits, an in-flight budget).
The fake enforces DESIGN §6 itself: an embeddings request without exactly one pinned upstream and
`allow_fallbacks: false` is answered 400.

Control plane (for driving it from another process):
    POST /_fake/config  body: FakeConfig JSON — replaces the configuration (counters kept; chat-rule counts
                        and the chat log start over)
    GET  /_fake/stats   → FakeStats JSON
    POST /_fake/reset   clears counters, RPM windows, fault and chat-rule counters, the chat log (configuration kept)
    GET  /_fake/chat_log → every chat request body (the last 500), oldest first
    GET  /_fake/health  → {"ok": true}

Chat answers follow `FakeConfig.chat_rules` (see scripted_chat) when one matches; otherwise a tool
call for `CALL:<tool>:<json>` in the last user message, else an echo.

The modules: `_config` (what the control plane sets), `_state` (what the fake counts), `_wire`
(OpenRouter's request, error and model shapes), `_vectors` (MiniLM and each upstream's vectors),
`_admission` (the key's checks and the upstream's faults), `_chat` (the default chat answer),
`_app` (the routes). Import from the package.
"""

from __future__ import annotations

from ._app import API_PREFIX, build_fake_app
from ._config import (
    DEFAULT_MODELS,
    LOCAL_WIDTH,
    RPM_WINDOW_S,
    FakeConfig,
    KeyConfig,
    MalformedMode,
    ModelEntry,
    RetryAfterFormat,
    UpstreamBehaviour,
    VectorMode,
)
from ._state import RECEIVED_BODIES, Clock, CounterRow, FakeState, FakeStats
from ._vectors import encode, shared_encoder
from ._wire import PIN_RULE, error_response

__all__ = [
    "API_PREFIX",
    "DEFAULT_MODELS",
    "LOCAL_WIDTH",
    "PIN_RULE",
    "RECEIVED_BODIES",
    "RPM_WINDOW_S",
    "Clock",
    "CounterRow",
    "FakeConfig",
    "FakeState",
    "FakeStats",
    "KeyConfig",
    "MalformedMode",
    "ModelEntry",
    "RetryAfterFormat",
    "UpstreamBehaviour",
    "VectorMode",
    "build_fake_app",
    "encode",
    "error_response",
    "shared_encoder",
]
