"""The reference sidecar's settings and command line: `--serve` parsing (local servers and `openrouter:`
virtual containers), repeated `--master` with each its token variable, bad options (exit 2), defaults,
an import that stays light, and the sidecar as a child process that registers (with one master, or
two), serves and exits 0 on SIGTERM.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from sidecar import ServeSpec, SettingsError, TransportMode, VirtualServeSpec, parse_serve
from sidecar.cli import build_parser, load_settings, main
from tests.support.fakes.sidecar_process import SidecarProcess, openrouter_serve_arg, serve_arg
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

TOKEN_B = "fleet-token-of-master-b-51aa"

REPO_ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.timeout(60)


def test_parse_serve_and_urls() -> None:
    spec = parse_serve("code-embedding=http://127.0.0.1:9201/v1/,model=all-MiniLM-L6-v2")
    assert spec == ServeSpec(role="code-embedding", base_url="http://127.0.0.1:9201/v1", model="all-MiniLM-L6-v2")
    assert isinstance(spec, ServeSpec) and spec.container_name == "ss-code-embedding" and spec.port == 9201
    rlm = parse_serve("rlm=https://gpu.lan/v1")
    assert isinstance(rlm, ServeSpec) and rlm.port == 443
    for bad in ["code-embedding", "=http://x", "a=ftp://x", "a=http://x,modle=y", "Bad Role=http://x"]:
        with pytest.raises(SettingsError, match="--serve"):
            parse_serve(bad)
    with pytest.raises(ValueError, match="lowercase slug"):
        ServeSpec(role="code-embedding\n", base_url="http://127.0.0.1:9201/v1")  # `$` matched before a newline
    settings = make_settings("https://master.example:8443/api/", ["a=http://127.0.0.1:1/v1"])
    assert settings.masters[0].ws_url == "wss://master.example:8443/api/sidecar"
    assert settings.masters[0].http_url("poll") == "https://master.example:8443/api/sidecar/poll"
    assert make_settings("http://m:80", ["a=http://x/v1"]).masters[0].ws_url == "ws://m:80/sidecar"


def test_parse_serve_openrouter_forms() -> None:
    spec = parse_serve("code-embedding=openrouter:qwen/qwen3-embedding-4b@nebius")
    assert spec == VirtualServeSpec(role="code-embedding", model="qwen/qwen3-embedding-4b", upstream="nebius")
    assert isinstance(spec, VirtualServeSpec) and spec.pinned
    assert spec.container_name("ws17.local") == "ws17-OR-CodeEmbedding"
    rerank = parse_serve("reranker=openrouter:cohere/rerank-v3.5")
    assert rerank == VirtualServeSpec(role="reranker", model="cohere/rerank-v3.5", upstream=None)
    unpinned = parse_serve("embedding=openrouter:openai/text-embedding-3-small")  # the master refuses it
    assert isinstance(unpinned, VirtualServeSpec) and not unpinned.pinned
    assert parse_serve("embedding=openrouter:a/b:floor@deepinfra/fp8") == VirtualServeSpec(
        role="embedding", model="a/b:floor", upstream="deepinfra/fp8"
    )
    bad = [
        ("rlm=openrouter:qwen/qwen3@nebius", "an openrouter: server fills one of embedding, code-embedding"),
        ("code-embedding=openrouter:", "expected ROLE=openrouter:MODEL[@UPSTREAM]"),
        ("code-embedding=openrouter:@nebius", "expected ROLE=openrouter:MODEL[@UPSTREAM]"),
        ("code-embedding=openrouter:m@", "expected ROLE=openrouter:MODEL[@UPSTREAM]"),
        ("code-embedding=openrouter:m@a@b", "OpenRouter slug"),
        ("code-embedding=openrouter:m@n,model=x", "OpenRouter slug"),
        ("code-embedding=openrouter:my model@n", "OpenRouter slug"),
        ("Code-Embedding=openrouter:m@n", "an openrouter: server fills one of"),
    ]
    for text, problem in bad:
        with pytest.raises(SettingsError, match="--serve") as refused:
            parse_serve(text)
        assert problem in str(refused.value), text


def test_cli_masters_each_with_its_token_and_virtual_only_serves() -> None:
    argv = [
        "--master", "http://a:1/pfx/",
        "--master", "https://b:2,token-env=B_TOKEN",
        "--serve", "code-embedding=openrouter:m@n",
        "--serve", "code-embedding=http://127.0.0.1:9/v1",  # the same role, once local and once virtual
        "--hostname", "ws17.local",
    ]  # fmt: skip
    settings = load_settings(build_parser().parse_args(argv), {"SAMESPACE_FLEET_TOKEN": TOKEN, "B_TOKEN": TOKEN_B})
    assert [(m.url, m.fleet_token.get_secret_value()) for m in settings.masters] == [
        ("http://a:1/pfx", TOKEN),
        ("https://b:2", TOKEN_B),
    ]
    assert settings.masters[1].ws_url == "wss://b:2/sidecar"
    assert [s.role for s in settings.serves] == [v.role for v in settings.virtual] == ["code-embedding"]
    assert settings.openrouter_base_url == "https://openrouter.ai/api/v1"
    assert TOKEN not in repr(settings) and TOKEN_B not in repr(settings)
    only_virtual = [
        "--master",
        "http://a:1",
        "--serve",
        "reranker=openrouter:r",
        "--openrouter-base-url",
        "http://f/v1/",
    ]
    settings = load_settings(build_parser().parse_args(only_virtual), {"SAMESPACE_FLEET_TOKEN": TOKEN})
    assert settings.serves == () and settings.virtual[0].role == "reranker"
    assert settings.openrouter_base_url == "http://f/v1"


def test_cli_rejects_bad_masters_and_openrouter_options_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    env = {"SAMESPACE_FLEET_TOKEN": TOKEN, "B_TOKEN": TOKEN_B}
    serve = ["--serve", "code-embedding=openrouter:m@n"]
    cases = [
        (["--master", "http://a", "--master", "http://b,token-env=NOPE", *serve], "NOPE: is not set"),
        (["--master", "http://a", "--master", "http://a/", *serve], "--master: each master may be named once"),
        (["--master", "http://a,token=B_TOKEN", *serve], "--master: unknown option 'token=B_TOKEN'"),
        (["--master", "http://a,token-env=1X", *serve], "--master: unknown option"),
        (["--master", "http://a", *serve, "--serve", "code-embedding=openrouter:x@y"], "--serve: each role"),
        (["--master", "http://a", *serve, "--openrouter-base-url", "openrouter.ai"], "--openrouter-base-url:"),
        (["--master", "http://a", "--serve", "chat=openrouter:x"], "--serve: an openrouter: server fills"),
    ]
    for argv, error in cases:
        with pytest.raises(SystemExit) as exited:
            main(argv, env)
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert f"error: {error}" in err, err
        assert TOKEN not in err and TOKEN_B not in err


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


async def test_sidecar_process_with_two_masters_and_only_a_virtual_container() -> None:
    a = await WsMaster(TOKEN, agent_id="id-of-a").start()
    b = await WsMaster(TOKEN_B, agent_id="id-of-b").start()
    process = SidecarProcess(
        masters=[(a.url, TOKEN), (b.url, TOKEN_B)],
        serves=[openrouter_serve_arg("code-embedding", "qwen/qwen3-embedding-4b", "nebius")],
        openrouter_base_url="http://127.0.0.1:9/api/v1",
        hostname="ws17.local",
        transport="ws",
        heartbeat_s=0.2,
    )
    try:
        process.start()
        await wait_until(lambda: a.of_type("heartbeat") and b.of_type("heartbeat"), timeout_s=20, what="both")
        await b.send({"type": "command", "id": "c1", "action": "containers"})
        (row,) = (await b.result("c1"))["virtualContainers"]
        await asyncio.to_thread(process.wait_for_log, f"from {b.url}: push it", 10.0)
        code = await asyncio.to_thread(process.stop)
        log = process.log()
    finally:
        process.close()
        await a.stop()
        await b.stop()
    assert code == 0
    assert (row["name"], row["provider"], row["state"]) == ("ws17-OR-CodeEmbedding", "nebius", "no-key")
    assert a.frames[0]["containers"] == b.frames[0]["containers"] == []
    assert f"registered with the master {a.url}" in log and f"registered with the master {b.url}" in log
    waiting = f"ws17-OR-CodeEmbedding waits for the OpenRouter key from {a.url}: push it with POST /admin/openrouter"
    assert waiting in log
    assert TOKEN not in " ".join(process.args) and TOKEN_B not in " ".join(process.args)
    assert f"{b.url},token-env=SAMESPACE_FLEET_TOKEN_1" in process.args
    assert TOKEN not in log and TOKEN_B not in log
