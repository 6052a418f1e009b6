"""The ask e2e tests' world: a small shop repository whose answer needs an eleventh chunk, scripted
tool-calling chat endpoints behind real HTTP (two vLLM-style local servers, rlm and code-assistant,
and an OpenRouter fake for the cloud lanes), indexed and served by an `McpIngress` of its own.

Used by test_ask_e2e.py and test_ask_progress_e2e.py, each with its own namespace, route and rules.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray
from pydantic import SecretStr

from tests.support.fakes.local_llm import LocalLlmConfig
from tests.support.fakes.local_llm_server import FakeLocalLlmServer
from tests.support.fakes.openrouter_fake import FakeConfig, KeyConfig, UpstreamBehaviour
from tests.support.fakes.openrouter_server import FakeOpenRouterServer
from tests.support.fakes.scripted_chat import ChatRule, ScriptedToolCall
from tests.support.ray_cluster import McpServer

REPO = "shop"
CANARY_KEY = "sk-or-v1-" + "a5c0de" * 8
CLOUD_CODER = "poolside/laguna-s-2.1"
CLOUD_RLM = "deepseek/deepseek-v4-flash"
QUESTION = "How is the late fee of an overdue invoice computed?"
PLAN = (
    '{"restated": "late fee", "subQuestions": [{"question": "where is the late fee computed", '
    '"tool": "search_code", "query": "late fee overdue invoice"}]}'
)

# The rlm's ordinary ask: plan one search; while a decoy calls zeta_adjust( and its definition is not in
# the evidence, look it up by name; then draft. A test's own rules go before these.
ANSWERING_RLM_RULES = [
    ChatRule(when_all=["subQuestions"], content=PLAN),
    ChatRule(
        requires_tools=True,
        when_all=["zeta_adjust("],
        when_none=["def zeta_adjust"],
        tool_calls=[ScriptedToolCall(name="search_symbols", arguments={"query": "zeta_adjust"})],
    ),
    ChatRule(content="Draft: the late fee comes from {citations}."),
]
ANSWERING_CODER_RULE = ChatRule(content="The late fee is computed here: {citations}.")


def decoy(i: int) -> str:
    return (
        f"def late_fee_region_{i}(invoice):\n"
        f'    """Late fee of an overdue invoice in region {i}: a share of the invoice total."""\n'
        f"    overdue_share = invoice.total * 0.0{i % 10 + 1}\n"
        f"    return zeta_adjust(overdue_share)\n"
    )


def write_shop(root: Path) -> Path:
    billing = root / REPO / "billing"
    billing.mkdir(parents=True)
    for i in range(12):
        (billing / f"fees_{i:02d}.py").write_text(decoy(i))
    (billing / "adjust.py").write_text("def zeta_adjust(amount):\n    return round(amount * 1.0725, 2)\n")
    (root / REPO / "README.md").write_text("# Shop\n\nInvoices, overdue reminders and late fees.\n")
    return root / REPO


@dataclass
class AskEnv:
    settings: Any
    base: str
    mcp_url: str
    rlm: FakeLocalLlmServer
    coder: FakeLocalLlmServer
    cloud: FakeOpenRouterServer
    responses: list[str] = field(default_factory=list)

    def ask(self, question: str, **body: Any) -> dict[str, Any]:
        response = httpx.post(f"{self.base}/rlm/ask", json={"question": question, "repo": REPO, **body}, timeout=120)
        self.responses.append(response.text)
        assert response.status_code == 200, response.text
        return dict(response.json())

    def restart_stopped_endpoints(self) -> None:
        for server in (self.rlm, self.coder, self.cloud):
            if not server.running:
                server.restart()


@contextlib.contextmanager
def ask_env(
    mcp_server: McpServer,
    tmp_path_factory: pytest.TempPathFactory,
    *,
    namespace: str,
    app: str,
    rlm_rules: list[ChatRule],
    coder_rules: list[ChatRule],
    cloud_rules: list[ChatRule],
) -> Iterator[AskEnv]:
    """The shop indexed and served at /<app> (actors in `namespace`); everything is removed afterwards,
    and no response the tests recorded may hold the key."""
    from ray import serve

    from actors import ensure_virtual_containers
    from actors.build_ports import run_reindex
    from cluster.settings import SamespaceSettings
    from serve_apps.mcp import McpIngress

    with contextlib.ExitStack() as stack:
        rlm = stack.enter_context(FakeLocalLlmServer(LocalLlmConfig(model="local/rlm", chat_rules=rlm_rules)))
        coder = stack.enter_context(FakeLocalLlmServer(LocalLlmConfig(model="local/coder", chat_rules=coder_rules)))
        cloud = stack.enter_context(
            FakeOpenRouterServer(
                config=FakeConfig(
                    keys={CANARY_KEY: KeyConfig(label="ask")},
                    upstreams={"ask-exact": UpstreamBehaviour(vectors="same")},
                    chat_rules=cloud_rules,
                )
            )
        )

        def endpoint(server: FakeLocalLlmServer, model: str) -> dict[str, Any]:
            return {"url": server.base_url, "model": model, "timeout_s": 20, "context_ttl_s": 0}

        settings = SamespaceSettings(
            ray={"namespace": namespace},
            store={"data_dir": tmp_path_factory.mktemp(f"{app}-data")},
            llm={
                "endpoints": {"rlm": [endpoint(rlm, "local/rlm")], "code-assistant": [endpoint(coder, "local/coder")]}
            },
            cloud={
                "enabled": True,
                "base_url": cloud.base_url,
                "timeout_s": 20,
                "routes": {
                    "code-embedding": {"model": "sentence-transformers/all-minilm-l6-v2", "upstream": "ask-exact"},
                    "code-assistant": {"model": CLOUD_CODER},
                    "rlm": {"model": CLOUD_RLM},
                },
            },
        )
        containers = ensure_virtual_containers(settings)
        ray.get([c.set_key.remote(SecretStr(CANARY_KEY)) for c in containers])
        run_reindex(settings, write_shop(tmp_path_factory.mktemp(f"{app}-repo")), REPO, emit=lambda line: None)
        serve.run(McpIngress.options(num_replicas=1).bind(settings), name=app, route_prefix=f"/{app}")
        base = f"http://127.0.0.1:{mcp_server.port}/{app}"
        result = AskEnv(settings, base, f"{base}/mcp/", rlm, coder, cloud)
        try:
            yield result
        finally:
            serve.delete(app)
            for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == namespace]:
                ray.kill(ray.get_actor(entry["name"], namespace=namespace))
    assert not any(CANARY_KEY in text for text in result.responses)
