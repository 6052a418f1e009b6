"""The admin API's client behind `samespace status`, `push-key`, `set-policy`, `index`, `refresh`, `remove`
and `indexes`: one call each (a build followed with `--wait`), printed for a terminal.

    admin_command(["--url", "http://127.0.0.1:8000/admin", "status"])          # a table; --json: raw
    admin_command(["--url", ..., "push-key"])                                   # the key from stdin, or --file

The bearer token is read from `--token-file` (default SAMESPACE_ADMIN__TOKEN_FILE; `samespace run` writes
one) or SAMESPACE_ADMIN__TOKEN; the OpenRouter key from stdin or a file, never from argv. An answer that is not
200 raises `CommandFailed`, one line that says what to do.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from cluster.roles import Policy, Role
from samespace.failures import CommandFailed, refusal
from samespace.state import ADMIN_TOKEN_FILE_ENV
from samespace.status_table import StatusAnswers, status_lines

__all__ = ["DEFAULT_ADMIN_URL", "admin_command", "admin_token", "read_key"]

DEFAULT_ADMIN_URL = "http://127.0.0.1:8000/admin"
TOKEN_ENV = "SAMESPACE_ADMIN__TOKEN"
ADMIN = "the admin API"
TIMEOUT_S = 120.0
POLL_S = 1.0
DONE_PHASES = ("committed", "up-to-date")


def admin_token(token_file: str | None) -> str:
    """The admin token: from `token_file` when it exists, else SAMESPACE_ADMIN__TOKEN."""
    if token_file and Path(token_file).is_file():
        return Path(token_file).read_text(encoding="utf-8").strip()
    token = os.environ.get(TOKEN_ENV, "")
    if not token:
        where = f"{token_file} does not exist" if token_file else "none is set"
        raise CommandFailed(f"no admin token ({where})", "start the cluster with `samespace run`, which writes one")
    return token


def read_key(file: str | None) -> str:
    """The OpenRouter key from a file or stdin: never from argv (it would show in `ps`)."""
    text = Path(file).read_text(encoding="utf-8") if file else sys.stdin.read()
    key = text.strip()
    if not key:
        raise CommandFailed("no key given on stdin or in the file", "pipe it in: `samespace push-key < key.txt`")
    return key


def _answer(response: httpx.Response) -> Any:
    """The JSON of a 200 answer; any other status is `CommandFailed` naming it and the API's detail."""
    if response.status_code == 200:
        return response.json()
    try:
        detail = response.json().get("detail", response.text)
    except (ValueError, AttributeError):
        detail = response.text
    raise refusal(ADMIN, response.status_code, detail)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="samespace")
    parser.add_argument("--url", default=DEFAULT_ADMIN_URL)
    parser.add_argument("--token-file", default=os.environ.get(ADMIN_TOKEN_FILE_ENV), help="the admin token's file")
    commands = parser.add_subparsers(dest="command", required=True)
    status = commands.add_parser("status")
    status.add_argument("--json", action="store_true")
    push = commands.add_parser("push-key")
    push.add_argument("--file")
    policy = commands.add_parser("set-policy")
    policy.add_argument("role", choices=[r.value for r in Role])
    policy.add_argument("policy", choices=[p.value for p in Policy])
    index = commands.add_parser("index")
    index.add_argument("path")
    index.add_argument("--name")
    index.add_argument("--ref")
    refresh = commands.add_parser("refresh")
    refresh.add_argument("name")
    for build in (index, refresh):
        build.add_argument("--full", action="store_true")
        build.add_argument("--wait", action="store_true")
    commands.add_parser("remove").add_argument("name")
    commands.add_parser("indexes")
    return parser


def admin_command(argv: list[str] | None = None) -> int:
    """Run one admin command (`status`, `push-key`, `set-policy`, `index`, `refresh`, `remove`, `indexes`)."""
    args = _parser().parse_args(argv)
    headers = {"Authorization": f"Bearer {admin_token(args.token_file)}"}
    with httpx.Client(base_url=args.url, headers=headers, timeout=TIMEOUT_S) as client:
        return COMMANDS[args.command](client, args)


def _status(client: httpx.Client, args: argparse.Namespace) -> int:
    health, providers, budget = (_answer(client.get(path)) for path in ("/health", "/providers", "/budget"))
    if args.json:
        print(json.dumps({"providers": providers, "budget": budget}, indent=2))
        for problem in health.get("problems", []):  # what stops a role from serving, last on screen
            print(f"\n{problem}")
    else:
        print("\n".join(status_lines(StatusAnswers.of(health, providers, budget))))
    return 0


def _push_key(client: httpx.Client, args: argparse.Namespace) -> int:
    print(json.dumps(_answer(client.post("/openrouter", json={"api_key": read_key(args.file)})), indent=2))
    return 0


def _set_policy(client: httpx.Client, args: argparse.Namespace) -> int:
    print(json.dumps(_answer(client.post("/openrouter", json={"policies": {args.role: args.policy}})), indent=2))
    return 0


def _index(client: httpx.Client, args: argparse.Namespace) -> int:
    """index / refresh / remove / indexes: one admin call; with --wait, the build's progress until it is done."""
    if args.command == "index":
        body = {"path": str(Path(args.path).expanduser().resolve()), "name": args.name, "ref": args.ref}
        response = client.post("/indexes", json={**body, "full": args.full})
    elif args.command == "refresh":
        response = client.post(f"/indexes/{args.name}/refresh", json={"full": args.full})
    elif args.command == "remove":
        response = client.delete(f"/indexes/{args.name}")
    else:
        response = client.get("/indexes")
    result = _answer(response)
    print(json.dumps(result, indent=2))
    return _wait(client, result) if getattr(args, "wait", False) else 0


def _wait(client: httpx.Client, report: dict[str, Any], poll_s: float = POLL_S) -> int:
    ticket = report["ticket"]
    last = None
    while not report.get("done"):
        time.sleep(poll_s)
        builds = _answer(client.get("/indexes"))["builds"]
        report = next((b for b in builds if b["ticket"]["build"] == ticket["build"]), report)
        progress = report.get("progress") or {}
        line = f"{report['phase']}: {progress.get('chunks_done', 0)}/{progress.get('chunks_total', 0)} chunks"
        if line != last:
            print(line, flush=True)
            last = line
    print(f"{ticket['index']}: {report['phase']}" + (f" ({report['error']})" if report.get("error") else ""))
    return 0 if report["phase"] in DONE_PHASES else 1


COMMANDS: dict[str, Callable[[httpx.Client, argparse.Namespace], int]] = {
    "status": _status,
    "push-key": _push_key,
    "set-policy": _set_policy,
    "index": _index,
    "refresh": _index,
    "remove": _index,
    "indexes": _index,
}
