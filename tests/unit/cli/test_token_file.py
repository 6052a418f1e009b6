"""The user's path under auth.mode oauth: `samespace search` / `ask` / `mcp-config` take `--token-file`
(the token on its first line, a secret from then on, sent as `Authorization: Bearer`, never printed),
and `samespace run` ends by saying how to get a token instead of searching without one. Against a real
HTTP endpoint on 127.0.0.1 that records the header it gets and answers 401, as an OAuth resource
server does to a token it does not accept."""

from __future__ import annotations

import contextlib
import json
import shlex
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from samespace.cli import build_parser, main, run_plan
from samespace.clients import oauth_advice, read_token_file
from samespace.cluster_commands import sample_search, served_settings
from samespace.failures import CommandFailed
from samespace.state import ROOT

TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLWZvci10aGUtdGVzdA"
ISSUER = "https://idp.example.com/realms/team"


class RecordingEndpoint(BaseHTTPRequestHandler):
    """Records each request's Authorization header; answers 401 with the RFC 9728 challenge (or, with
    `scope` set, 403 insufficient_scope naming it)."""

    seen: ClassVar[list[str]] = []
    scope: ClassVar[str | None] = None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.seen.append(self.headers.get("Authorization", ""))
        metadata = f"http://{self.headers['Host']}/.well-known/oauth-protected-resource/mcp"
        if self.scope is None:
            self.send_response(401)
            self.send_header("WWW-Authenticate", f'Bearer resource_metadata="{metadata}"')
        else:
            self.send_response(403)
            challenge = f'Bearer error="insufficient_scope", scope="{self.scope}", resource_metadata="{metadata}"'
            self.send_header("WWW-Authenticate", challenge)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def recording_endpoint() -> Iterator[str]:
    RecordingEndpoint.seen, RecordingEndpoint.scope = [], None
    server = HTTPServer(("127.0.0.1", 0), RecordingEndpoint)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def endpoint() -> Iterator[str]:
    with recording_endpoint() as url:
        yield url


@pytest.fixture(autouse=True)
def _no_ambient_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SAMESPACE_SERVE__TOKEN", "SAMESPACE_SERVE__TOKEN_FILE", "SAMESPACE_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("MODE", "ISSUER", "AUDIENCE", "RESOURCE_URL"):
        monkeypatch.delenv(f"SAMESPACE_AUTH__{name}", raising=False)


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(f"  {TOKEN}  \nsecond line, never read\n", encoding="utf-8")
    return path


def _oauth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAMESPACE_AUTH__MODE", "oauth")
    monkeypatch.setenv("SAMESPACE_AUTH__ISSUER", ISSUER)


def _one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 1
    printed = capsys.readouterr()
    assert printed.err.count("\n") == 1 and "Traceback" not in printed.err, printed.err
    assert TOKEN not in printed.out + printed.err
    return printed.err


def test_the_token_is_the_first_line_and_a_secret_from_then_on(token_file: Path) -> None:
    token = read_token_file(token_file)
    assert token.get_secret_value() == TOKEN
    assert TOKEN not in repr(token) and TOKEN not in str(token)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "no token file"),
        ("", "is empty"),
        ("\n" + TOKEN + "\n", "is empty"),
        (b"\xff\xfe" + b"x" * 8, "not text"),
    ],
)
def test_a_missing_empty_or_unreadable_token_file_is_one_line_naming_the_file(
    tmp_path: Path, content: str | bytes | None, problem: str
) -> None:
    path = tmp_path / "token"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(CommandFailed) as failed:
        read_token_file(path)
    message = str(failed.value)
    assert problem in message and str(path) in message and "first line" in message and "\n" not in message
    assert TOKEN not in message and "\\xff" not in message


@pytest.mark.parametrize("command", [["search", "where do we retry"], ["ask", "how is a reindex switched?"]])
def test_search_and_ask_send_the_token_file_as_a_bearer_and_never_print_it(
    command: list[str], endpoint: str, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _one_line([*command, "--address", endpoint, "--token-file", str(token_file)], capsys)
    assert RecordingEndpoint.seen and set(RecordingEndpoint.seen) == {f"Bearer {TOKEN}"}
    assert line.startswith(f"samespace {command[0]}: the MCP endpoint refused the token (401)")
    assert "--token-file" in line  # what to do: a fresh access token


def test_a_token_without_the_scope_is_one_line_naming_the_scope(
    endpoint: str, token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    RecordingEndpoint.scope = "samespace:read"
    line = _one_line(["search", "q", "--address", endpoint, "--token-file", str(token_file)], capsys)
    assert line.startswith("samespace search: the MCP endpoint refused the call (403): ")
    assert line.endswith(": the token lacks the scope samespace:read: ask for it\n")


def test_without_a_token_file_nothing_is_sent_and_a_missing_one_fails_before_any_request(
    endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _one_line(["search", "where do we retry", "--address", endpoint], capsys)
    assert RecordingEndpoint.seen and set(RecordingEndpoint.seen) == {""}
    RecordingEndpoint.seen.clear()
    missing = tmp_path / "nope"
    for command in (["search", "q"], ["ask", "q"], ["mcp-config"]):
        line = _one_line([*command, "--address", endpoint, "--token-file", str(missing)], capsys)
        assert line == (
            f"samespace {command[0]}: no token file {missing}: put an access token on its first line "
            "(`samespace run` under auth.mode oauth says where to get one; see docs/auth.md)\n"
        )
    assert RecordingEndpoint.seen == []


def test_mcp_config_with_a_token_file_names_a_variable_and_never_the_token(
    token_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mcp-config", "--token-file", str(token_file)]) == 0
    printed = capsys.readouterr()
    server = json.loads(printed.out)["mcpServers"]["samespace"]
    assert server == {
        "type": "http",
        "url": "http://127.0.0.1:8000/mcp/",
        "headers": {"Authorization": "Bearer ${SAMESPACE_ACCESS_TOKEN}"},
    }
    assert f"export SAMESPACE_ACCESS_TOKEN=$(head -n 1 {token_file})" in printed.err
    assert TOKEN not in printed.out + printed.err


def test_mcp_config_under_oauth_has_no_header_the_client_runs_the_login(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _oauth(monkeypatch)
    assert main(["mcp-config"]) == 0
    printed = capsys.readouterr()
    assert json.loads(printed.out)["mcpServers"]["samespace"] == {"type": "http", "url": "http://127.0.0.1:8000/mcp/"}
    assert "run the login themselves" in printed.err
    assert "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp" in printed.err


def _plan(tmp_path: Path, *extra: str) -> Any:
    args = build_parser().parse_args(
        ["run", "--repo", str(tmp_path), "--state-dir", str(tmp_path / "state"), "--mcp-port", "18200", *extra]
    )
    return run_plan(args, {"PATH": "/usr/bin", "HOME": str(tmp_path)})


def test_run_searches_with_no_token_unless_oauth_needs_one(
    tmp_path: Path, token_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "http://127.0.0.1:18200/mcp/"
    plain = _plan(tmp_path, "--query", "-k looks like a flag")
    assert plain.token_advice == ()
    assert sample_search(plain, url) == ["--url", url, "-k", "5", "--", "-k looks like a flag"]
    with_file = _plan(tmp_path, "--token-file", str(token_file))
    assert sample_search(with_file, url) == [
        "--url",
        url,
        "--token-file",
        str(token_file),
        "-k",
        "5",
        "--",
        with_file.query,
    ]

    _oauth(monkeypatch)
    oauth = _plan(tmp_path)
    assert oauth.token_advice and sample_search(oauth, url) is None  # it says how to get a token instead
    oauth_with_file = _plan(tmp_path, "--token-file", str(token_file))
    assert sample_search(oauth_with_file, url) == sample_search(with_file, url)


def test_run_under_oauth_says_where_to_get_a_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _oauth(monkeypatch)
    advice = "\n".join(_plan(tmp_path).token_advice)
    assert f"issuer:    {ISSUER}" in advice
    assert "resource:  http://127.0.0.1:18200/mcp\n" in advice  # the MCP URL on run's port: the audience
    assert "samespace:read (search, ask)" in advice and "samespace:index" in advice and "samespace:admin" in advice
    assert "metadata:  http://127.0.0.1:18200/.well-known/oauth-protected-resource/mcp" in advice
    (command,) = [line.strip() for line in advice.splitlines() if line.strip().startswith("samespace search")]
    parsed = build_parser().parse_args(shlex.split(command)[1:])  # the line it prints runs as printed
    assert parsed.token_file == Path("PATH") and parsed.query == "where do we retry requests"

    monkeypatch.setenv("SAMESPACE_AUTH__AUDIENCE", "api://samespace")
    audience = "\n".join(_plan(tmp_path).token_advice)
    assert "resource:  http://127.0.0.1:18200/mcp (audience api://samespace)" in audience


def test_the_served_settings_are_the_mcp_apps_with_its_own_port_when_it_names_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _oauth(monkeypatch)
    config = tmp_path / "serve.yaml"
    mcp = {"name": "mcp", "import_path": "serve_apps.mcp:build_app"}
    config.write_text(json.dumps({"applications": [{**mcp, "args": {"serve": {"port": 9100}}}]}))
    assert served_settings(config, 18200).resource_url == "http://127.0.0.1:9100/mcp"
    assert served_settings(ROOT / "serve_config.yaml", 18200).resource_url == "http://127.0.0.1:18200/mcp"
    monkeypatch.setenv("SAMESPACE_AUTH__RESOURCE_URL", "https://code.example.com/mcp")
    settings = served_settings(config, 18200)
    assert oauth_advice(settings)[4] == "  metadata:  https://code.example.com/.well-known/oauth-protected-resource/mcp"
