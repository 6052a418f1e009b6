"""Command line for the admin API: status, push-key (key from stdin or a file, never argv), set-policy,
and index management (index, refresh, remove, indexes).

    python -m serve_apps.admin_client status
    python -m serve_apps.admin_client push-key < key.txt        # or: push-key --file key.txt
    python -m serve_apps.admin_client set-policy code-embedding backup
    python -m serve_apps.admin_client index /src/api [--name api] [--ref feature/x] [--full] [--wait]
    python -m serve_apps.admin_client refresh api [--full] [--wait]
    python -m serve_apps.admin_client remove api

The bearer token is read from SAMESPACE_ADMIN__TOKEN_FILE (make run writes one) or
SAMESPACE_ADMIN__TOKEN.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx

from cluster.roles import Policy, Role

DEFAULT_ADMIN_URL = "http://127.0.0.1:8000/admin"


def admin_token() -> str:
    token_file = os.environ.get("SAMESPACE_ADMIN__TOKEN_FILE")
    if token_file and Path(token_file).is_file():
        return Path(token_file).read_text(encoding="utf-8").strip()
    token = os.environ.get("SAMESPACE_ADMIN__TOKEN", "")
    if not token:
        raise SystemExit("no admin token: set SAMESPACE_ADMIN__TOKEN_FILE or SAMESPACE_ADMIN__TOKEN")
    return token


def read_key(file: str | None) -> str:
    """The OpenRouter key from a file or stdin: never from argv (it would show in `ps`)."""
    text = Path(file).read_text(encoding="utf-8") if file else sys.stdin.read()
    key = text.strip()
    if not key:
        raise SystemExit("no key given on stdin or in the file")
    return key


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve_apps.admin_client")
    parser.add_argument("--url", default=DEFAULT_ADMIN_URL)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("status", help="providers per role, gate verdicts, budget, and what stops a role (a lost key)")
    push = commands.add_parser("push-key", help="push the OpenRouter key (stdin or --file)")
    push.add_argument("--file")
    policy = commands.add_parser("set-policy", help="set a role's routing policy")
    policy.add_argument("role", choices=[r.value for r in Role])
    policy.add_argument("policy", choices=[p.value for p in Policy])
    index = commands.add_parser("index", help="index a folder (or a git ref of it) and keep it fresh")
    index.add_argument("path")
    index.add_argument("--name")
    index.add_argument("--ref")
    index.add_argument("--full", action="store_true")
    index.add_argument("--wait", action="store_true", help="print progress until the build is done")
    refresh = commands.add_parser("refresh", help="reindex an index from the folder (and ref) it follows")
    refresh.add_argument("name")
    refresh.add_argument("--full", action="store_true")
    refresh.add_argument("--wait", action="store_true", help="print progress until the build is done")
    remove = commands.add_parser("remove", help="remove an index (and stop syncing it)")
    remove.add_argument("name")
    commands.add_parser("indexes", help="registered indexes and their builds")
    args = parser.parse_args(argv)
    if args.command in ("index", "refresh", "remove", "indexes"):
        return index_command(args)

    headers = {"Authorization": f"Bearer {admin_token()}"}
    problems: list[str] = []
    with httpx.Client(base_url=args.url, headers=headers, timeout=120) as client:
        result: Any
        if args.command == "status":
            health = client.get("/health").json()
            result = {"providers": client.get("/providers").json(), "budget": client.get("/budget").json()}
            problems = [str(p) for p in health.get("problems", [])]
        elif args.command == "push-key":
            response = client.post("/openrouter", json={"api_key": read_key(args.file)})
            result = response.json() if response.status_code == 200 else {"status": response.status_code}
        else:
            response = client.post("/openrouter", json={"policies": {args.role: args.policy}})
            result = response.json() if response.status_code == 200 else {"status": response.status_code}
    print(json.dumps(result, indent=2))
    for problem in problems:  # what stops a role from serving (GET /admin/health), last on screen
        print(f"\n{problem}")
    return 0


def index_command(args: argparse.Namespace) -> int:
    """index / refresh / remove / indexes: one admin call; with --wait, the build's progress until it is done."""
    headers = {"Authorization": f"Bearer {admin_token()}"}
    with httpx.Client(base_url=args.url, headers=headers, timeout=120) as client:
        if args.command == "index":
            body = {"path": str(Path(args.path).expanduser().resolve()), "name": args.name, "ref": args.ref}
            response = client.post("/indexes", json={**body, "full": args.full})
        elif args.command == "refresh":
            response = client.post(f"/indexes/{args.name}/refresh", json={"full": args.full})
        elif args.command == "remove":
            response = client.delete(f"/indexes/{args.name}")
        else:
            response = client.get("/indexes")
        if response.status_code != 200:
            print(f"refused ({response.status_code}): {response.json().get('detail', response.text)}", file=sys.stderr)
            return 1
        result = response.json()
        print(json.dumps(result, indent=2))
        if getattr(args, "wait", False):
            return _wait(client, result)
    return 0


def _wait(client: httpx.Client, report: dict[str, Any], poll_s: float = 1.0) -> int:
    import time

    ticket = report["ticket"]
    last = None
    while not report.get("done"):
        time.sleep(poll_s)
        builds = client.get("/indexes").json()["builds"]
        report = next((b for b in builds if b["ticket"]["build"] == ticket["build"]), report)
        progress = report.get("progress") or {}
        line = f"{report['phase']}: {progress.get('chunks_done', 0)}/{progress.get('chunks_total', 0)} chunks"
        if line != last:
            print(line, flush=True)
            last = line
    print(f"{ticket['index']}: {report['phase']}" + (f" ({report['error']})" if report.get("error") else ""))
    return 0 if report["phase"] in ("committed", "up-to-date") else 1


if __name__ == "__main__":
    sys.exit(main())
