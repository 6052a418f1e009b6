"""The reference sidecar's settings and command line: `--serve` parsing and the master's URLs, bad
options (exit 2), defaults, an import that stays light, and the sidecar as a child process that
registers, serves and exits 0 on SIGTERM.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar import ServeSpec, SettingsError, TransportMode, parse_serve
from sidecar.cli import build_parser, load_settings, main
from tests.support.fakes.sidecar_process import SidecarProcess, serve_arg
from tests.support.sidecar_agents import (
    TOKEN,
    UPSTREAM_CANARY,
    FakeUpstream,
    WsMaster,
    decode_row,
    make_settings,
    row_for,
    wait_until,
)

REPO_ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.timeout(60)


def test_parse_serve_and_urls() -> None:
    spec = parse_serve("code-embedding=http://127.0.0.1:9201/v1/,model=all-MiniLM-L6-v2")
    assert spec == ServeSpec(role="code-embedding", base_url="http://127.0.0.1:9201/v1", model="all-MiniLM-L6-v2")
    assert spec.container_name == "ss-code-embedding" and spec.port == 9201
    assert parse_serve("rlm=https://gpu.lan/v1").port == 443
    for bad in ["code-embedding", "=http://x", "a=ftp://x", "a=http://x,modle=y", "Bad Role=http://x"]:
        with pytest.raises(SettingsError, match="--serve"):
            parse_serve(bad)
    with pytest.raises(ValueError, match="lowercase slug"):
        ServeSpec(role="code-embedding\n", base_url="http://127.0.0.1:9201/v1")  # `$` matched before a newline
    settings = make_settings("https://master.example:8443/api/", ["a=http://127.0.0.1:1/v1"])
    assert settings.masters[0].ws_url == "wss://master.example:8443/api/sidecar"
    assert settings.masters[0].http_url("poll") == "https://master.example:8443/api/sidecar/poll"
    assert make_settings("http://m:80", ["a=http://x/v1"]).masters[0].ws_url == "ws://m:80/sidecar"


def test_cli_rejects_bad_options_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    env = {"SAMESPACE_FLEET_TOKEN": TOKEN}
    cases = [
        (["--master", "http://m", "--serve", "code-embedding"], env, "--serve"),
        (["--master", "http://m"], env, "--serve"),
        (["--master", "m:80", "--serve", "a=http://x/v1"], env, "--master"),
        (["--master", "http://m", "--serve", "a=http://x/v1", "--serve", "a=http://y/v1"], env, "--serve"),
        (["--master", "http://m", "--serve", "a=http://x/v1", "--heartbeat-s", "0"], env, "--heartbeat-s"),
        (["--master", "http://m", "--serve", "a=http://x/v1"], {}, "SAMESPACE_FLEET_TOKEN"),
    ]
    for argv, environ, option in cases:
        with pytest.raises(SystemExit) as exited:
            main(argv, environ)
        assert exited.value.code == 2
        assert f"error: {option}" in capsys.readouterr().err


def test_cli_defaults() -> None:
    args = build_parser().parse_args(["--master", "http://m:1", "--serve", "a=http://x/v1", "--hostname", "box"])
    settings = load_settings(args, {"SAMESPACE_FLEET_TOKEN": TOKEN, "SIDECAR_UPSTREAM_KEY": "k"})
    assert settings.agent_url == "sidecar://box" and settings.transport is TransportMode.AUTO
    assert (settings.heartbeat_s, settings.poll_wait_s, settings.ws_retry_s) == (5.0, 10.0, 60.0)
    assert settings.upstream_key is not None and settings.upstream_key.get_secret_value() == "k"
    args = build_parser().parse_args(
        ["--master", "http://m:1", "--serve", "a=http://x/v1", "--upstream-key-env", "MY_KEY"]
    )
    assert load_settings(args, {"SAMESPACE_FLEET_TOKEN": TOKEN, "SIDECAR_UPSTREAM_KEY": "k"}).upstream_key is None


def test_sidecar_imports_no_heavy_packages() -> None:
    code = (
        "import sys, sidecar, sidecar.cli, sidecar.agent\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules}\n"
        "               & {'torch', 'ray', 'sentence_transformers', 'cluster', 'numpy'})\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30, check=True
    )
    assert out.stdout.strip() == ""


async def test_sidecar_process_registers_serves_and_exits_0_on_sigterm(
    master: WsMaster, upstream: FakeUpstream
) -> None:
    process = SidecarProcess(
        master=master.url,
        serves=[serve_arg("code-embedding", upstream.base_url, "minilm")],
        fleet_token=TOKEN,
        upstream_key=UPSTREAM_CANARY,
        hostname="proc-1",
        transport="ws",
        heartbeat_s=0.2,
    )
    try:
        process.start()
        await wait_until(lambda: master.of_type("heartbeat"), timeout_s=20, what="the child's heartbeat")
        await master.send({"type": "command", "id": "x1", "action": "embed", "role": "code-embedding", "texts": ["z"]})
        assert decode_row((await master.result("x1"))["embeddings"][0]) == row_for(0, "z")
        assert master.frames[0]["agentUrl"] == "sidecar://proc-1"
        code = await asyncio.to_thread(process.stop)
        log = process.log()
    finally:
        process.close()
    assert code == 0
    assert "registered with the master" in log and "sidecar stopped" in log
    assert "command x1 action=embed" in log
    assert TOKEN not in log and UPSTREAM_CANARY not in log
    assert upstream.auth_headers[-1] == f"Bearer {UPSTREAM_CANARY}"
