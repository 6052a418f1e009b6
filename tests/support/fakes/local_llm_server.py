"""The local-LLM fake (vLLM-shaped) as a real HTTP server in a subprocess, driven over its control plane.

    with FakeLocalLlmServer(LocalLlmConfig(chat_rules=[...])) as server:
        client = AsyncOpenAI(base_url=server.base_url + "/v1", api_key="none")
        ...
        server.kill()      # a crashed endpoint: the port refuses connections
        server.restart()   # back on the same port, with the last configuration

Run directly (from the repository root): python -m tests.support.fakes.local_llm_server --port 8766
No ML model is loaded: the child answers within a second or two.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .local_llm import LocalLlmConfig, LocalLlmState, LocalLlmStats, build_local_llm_app
from .openrouter_server import LOOPBACK, FakeServerProcess

LOCAL_STARTUP_TIMEOUT_S = 30.0


class FakeLocalLlmServer(FakeServerProcess):
    """Starts `python -m tests.support.fakes.local_llm_server` on 127.0.0.1 and stops it by PID on exit.

    config:            pushed once the server answers (None → a default LocalLlmConfig)
    port:              None → a free port
    base_url:          http://127.0.0.1:<port> — without /v1, as a local endpoint is usually configured
    """

    module = "tests.support.fakes.local_llm_server"
    health_path = "/health"
    name = "fake local LLM"

    def __init__(
        self,
        config: LocalLlmConfig | None = None,
        port: int | None = None,
        *,
        startup_timeout_s: float = LOCAL_STARTUP_TIMEOUT_S,
    ) -> None:
        super().__init__(port=port, startup_timeout_s=startup_timeout_s)
        self.base_url = self.root_url
        self.config = config if config is not None else LocalLlmConfig()

    def __repr__(self) -> str:
        return f"FakeLocalLlmServer(base_url={self.base_url!r}, model={self.config.model!r}, pid={self.pid})"

    def _after_start(self) -> None:
        self._post_json("/_fake/config", self.config)

    # -- control plane --

    def configure(self, config: LocalLlmConfig | None = None, **fields: Any) -> None:
        """Replace the configuration: a LocalLlmConfig, or its fields as keywords (the rest default).

        Rule counts, the chat log and the stats start over. It is kept for restart().
        """
        config = config if config is not None else LocalLlmConfig(**fields)
        self._post_json("/_fake/config", config)
        self.config = config

    def update(self, **fields: Any) -> None:
        """Change some fields of the current configuration (e.g. down=True), keeping the others."""
        self.configure(LocalLlmConfig.model_validate({**self.config.model_dump(), **fields}))

    def stats(self) -> LocalLlmStats:
        return LocalLlmStats.model_validate(self._get_json("/_fake/stats"))


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="vLLM-shaped local LLM fake (tests only).")
    parser.add_argument("--host", default=LOOPBACK)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--config", type=Path, default=None, help="LocalLlmConfig JSON file to start with.")
    args = parser.parse_args(argv)

    config = LocalLlmConfig.model_validate_json(args.config.read_text()) if args.config else LocalLlmConfig()
    app = build_local_llm_app(LocalLlmState(config=config))
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
