"""`python -m sidecar`: parse the command line and the environment, then run the sidecar until a signal.

    SAMESPACE_FLEET_TOKEN=... python -m sidecar --master http://master:8000 \\
        --serve code-embedding=http://127.0.0.1:9201/v1,model=all-MiniLM-L6-v2 [--serve ...]
    # two masters, each with its own fleet token; a virtual container served through OpenRouter
    SAMESPACE_FLEET_TOKEN=... OTHER_TOKEN=... python -m sidecar \\
        --master http://master:8000 --master https://other:8443,token-env=OTHER_TOKEN \\
        --serve code-embedding=openrouter:qwen/qwen3-embedding-4b@nebius

Exit codes: 0 after SIGTERM/SIGINT, 2 for a bad option or a missing token.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import re
import signal
import socket
import sys
from collections.abc import Mapping, Sequence

from pydantic import SecretStr, ValidationError

from sidecar._version import __version__
from sidecar.errors import SettingsError
from sidecar.host import Sidecar
from sidecar.settings import (
    DEFAULT_HEARTBEAT_S,
    DEFAULT_OPENROUTER_BASE_URL,
    DEFAULT_POLL_WAIT_S,
    DEFAULT_UPSTREAM_TIMEOUT_S,
    DEFAULT_WS_RETRY_S,
    MasterSpec,
    ServeSpec,
    SidecarSettings,
    TransportMode,
    VirtualServeSpec,
    parse_serve,
)

__all__ = ["FLEET_TOKEN_ENV", "build_parser", "load_settings", "main", "parse_master"]

logger = logging.getLogger("sidecar")

FLEET_TOKEN_ENV = "SAMESPACE_FLEET_TOKEN"
DEFAULT_UPSTREAM_KEY_ENV = "SIDECAR_UPSTREAM_KEY"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_OPTION_OF_FIELD = {
    "masters": "--master",
    "agent_url": "--agent-url",
    "hostname": "--hostname",
    "serves": "--serve",
    "virtual": "--serve",
    "openrouter_base_url": "--openrouter-base-url",
    "transport": "--transport",
    "heartbeat_s": "--heartbeat-s",
    "poll_wait_s": "--poll-wait-s",
    "ws_retry_s": "--ws-retry-s",
    "upstream_timeout_s": "--upstream-timeout-s",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sidecar",
        description="Samespace reference sidecar: fronts OpenAI-compatible servers (and OpenRouter models) "
        f"for one or more masters. Each master's fleet token is read from ${FLEET_TOKEN_ENV} or its token-env.",
    )
    parser.add_argument(
        "--master",
        action="append",
        required=True,
        metavar="URL[,token-env=VAR]",
        help=f"A master's base URL, e.g. http://master:8000 (may have a prefix); repeatable. Its fleet token "
        f"is read from $VAR (default ${FLEET_TOKEN_ENV}).",
    )
    parser.add_argument("--agent-url", default=None, help="This sidecar's id (default sidecar://<hostname>).")
    parser.add_argument("--hostname", default=None, help="Reported hostname (default: this machine's).")
    parser.add_argument(
        "--serve",
        action="append",
        default=[],
        metavar="ROLE=BASE_URL[,model=NAME] | ROLE=openrouter:MODEL[@UPSTREAM]",
        help="A fronted server, e.g. code-embedding=http://127.0.0.1:9201/v1, or a virtual container served "
        "through OpenRouter with the key a master pushes, e.g. "
        "code-embedding=openrouter:qwen/qwen3-embedding-4b@nebius "
        "(roles embedding, code-embedding, reranker; embeddings need the @UPSTREAM). Repeatable, at least one.",
    )
    parser.add_argument("--openrouter-base-url", default=DEFAULT_OPENROUTER_BASE_URL, help="OpenRouter's API base URL.")
    parser.add_argument("--transport", choices=[m.value for m in TransportMode], default=TransportMode.AUTO.value)
    parser.add_argument("--heartbeat-s", type=float, default=DEFAULT_HEARTBEAT_S)
    parser.add_argument("--poll-wait-s", type=float, default=DEFAULT_POLL_WAIT_S, help="HTTP fallback long-poll wait.")
    parser.add_argument(
        "--ws-retry-s", type=float, default=DEFAULT_WS_RETRY_S, help="auto: retry WebSocket this often."
    )
    parser.add_argument("--upstream-timeout-s", type=float, default=DEFAULT_UPSTREAM_TIMEOUT_S)
    parser.add_argument(
        "--upstream-key-env",
        default=DEFAULT_UPSTREAM_KEY_ENV,
        help="Env var holding the fronted servers' bearer key (optional; never sent to the master).",
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--version", action="version", version=f"samespace-sidecar {__version__}")
    return parser


def parse_master(text: str, environ: Mapping[str, str]) -> MasterSpec:
    """`http://m:8000[,token-env=VAR]` → MasterSpec with the token from $VAR (default SAMESPACE_FLEET_TOKEN)."""
    url, *options = text.split(",")
    token_env = FLEET_TOKEN_ENV
    for option in options:
        key, sep, value = option.partition("=")
        if key.strip() != "token-env" or not sep or not _ENV_NAME.fullmatch(value.strip()):
            raise SettingsError("--master", f"unknown option {option!r}; only token-env=VAR is accepted")
        token_env = value.strip()
    token = environ.get(token_env, "")
    if not token.strip():
        raise SettingsError(token_env, f"is not set; the master {url.strip()} needs the fleet token")
    try:
        return MasterSpec(url=url.strip(), fleet_token=SecretStr(token))
    except ValidationError as exc:
        raise SettingsError("--master", _message(exc)) from exc


def load_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> SidecarSettings:
    """The validated settings, or SettingsError naming the option (or variable) at fault."""
    if not args.serve:
        raise SettingsError("--serve", "at least one ROLE=BASE_URL or ROLE=openrouter:MODEL is required")
    specs = [parse_serve(text) for text in args.serve]
    masters = tuple(parse_master(text, environ) for text in args.master)
    key = environ.get(args.upstream_key_env) or None
    hostname = args.hostname or socket.gethostname()
    try:
        return SidecarSettings(
            masters=masters,
            agent_url=args.agent_url or f"sidecar://{hostname}",
            hostname=hostname,
            serves=tuple(s for s in specs if isinstance(s, ServeSpec)),
            virtual=tuple(s for s in specs if isinstance(s, VirtualServeSpec)),
            openrouter_base_url=args.openrouter_base_url,
            upstream_key=SecretStr(key) if key else None,
            transport=TransportMode(args.transport),
            heartbeat_s=args.heartbeat_s,
            poll_wait_s=args.poll_wait_s,
            ws_retry_s=args.ws_retry_s,
            upstream_timeout_s=args.upstream_timeout_s,
        )
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        raise SettingsError(_OPTION_OF_FIELD.get(field, field or "settings"), _message(exc)) from exc


def _message(exc: ValidationError) -> str:
    first = exc.errors(include_url=False, include_input=False)[0]
    return str(first["msg"]).removeprefix("Value error, ")


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per request otherwise
    logging.getLogger("httpcore").setLevel(logging.WARNING)


async def serve(settings: SidecarSettings) -> int:
    """Run the sidecar until SIGTERM or SIGINT; then close cleanly and return 0."""
    sidecar = Sidecar(settings)
    task = asyncio.ensure_future(sidecar.run())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    logger.info(
        "sidecar %s starting: agent %s, master%s %s, transport %s",
        __version__,
        settings.agent_url,
        "s" if len(settings.masters) > 1 else "",
        ", ".join(m.url for m in settings.masters),
        settings.transport.value,
    )
    with contextlib.suppress(asyncio.CancelledError):
        await task
    logger.info("sidecar stopped")
    return 0


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args, os.environ if environ is None else environ)
    except SettingsError as exc:
        parser.error(str(exc))  # exits 2
    configure_logging(args.log_level)
    return asyncio.run(serve(settings))
