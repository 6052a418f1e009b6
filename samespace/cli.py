"""`samespace`: one command line for the local cluster, its index, its MCP tools and its admin API.

Subcommands follow the `ray` / `serve` command lines: `--address` is the Ray dashboard for the commands
that talk to Ray (stop, reindex) and the Serve HTTP address for the ones that talk to the apps (search,
ask, mcp-config, status, push-key, set-policy, index, refresh, remove, indexes). Secrets never travel on
a command line: the Ray token is read from its file through RAY_AUTH_TOKEN_PATH, the admin token from its
file, and the OpenRouter key from stdin. A command that fails says so in one line, with what to do.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from cluster.roles import Policy, Role
from samespace.cluster_commands import (
    RunPlan,
    direct_ingress_fits,
    reindex_argv,
    reindex_here,
    run,
    served_settings,
    stop,
    submit_reindex,
)
from samespace.failures import one_line
from samespace.head import DEFAULT_DASHBOARD_PORT, DEFAULT_GCS_PORT, DEFAULT_METRICS_PORT, HeadRecord, HeadSpec
from samespace.state import ADMIN_TOKEN_FILE_ENV, ROOT, StateDir, cluster_env

__all__ = ["build_parser", "main", "run_plan"]

DEFAULT_MCP_PORT = 8000  # serve_config.yaml's http_options.port
DEFAULT_DASHBOARD = f"http://127.0.0.1:{DEFAULT_DASHBOARD_PORT}"
DEFAULT_SERVE = f"http://127.0.0.1:{DEFAULT_MCP_PORT}"
DEFAULT_QUERY = "reindex a repository into a new collection and switch the alias"
DEFAULT_WAIT_S = 120.0
Handler = Callable[[argparse.Namespace], int]


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    summary: str,
    example: str,
    handler: Handler,
) -> argparse.ArgumentParser:
    parser = commands.add_parser(
        name, help=summary, description=f"{summary}\n\nexample:\n  {example}", formatter_class=_formatter
    )
    parser.set_defaults(handler=handler)
    return parser


def _state_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=ROOT / ".samespace",
        help="folder of the tokens, the admin config and the store (default: %(default)s)",
    )


def _serve_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--address",
        default=DEFAULT_SERVE,
        help="the Serve HTTP address of the MCP and admin apps (default: %(default)s)",
    )


def _token_file_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--token-file",
        type=Path,
        metavar="PATH",
        help="send the bearer token on this file's first line (an OAuth access token under auth.mode oauth; "
        "default: the serve token, when one is configured)",
    )


def _dashboard_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--address",
        help="the Ray dashboard (job API) address (default: that of the head "
        f"`samespace run` started with STATE_DIR, else {DEFAULT_DASHBOARD})",
    )


def _dashboard(args: argparse.Namespace, state: StateDir) -> str:
    if args.address:
        return str(args.address)
    record = HeadRecord.read(state.head_record)
    return record.dashboard_url if record is not None else DEFAULT_DASHBOARD


def _reindex_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repo", type=Path, default=Path("."), help="repository to index (default: the current folder)"
    )
    parser.add_argument("--name", help="index name (default: the repository folder's name)")
    parser.add_argument(
        "--working-dir",
        type=Path,
        default=ROOT,
        help="sent along as the job's working dir (default: this checkout, %(default)s)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="samespace", description=__doc__, formatter_class=_formatter)
    parser.add_argument(
        "--traceback", action="store_true", help="on an unexpected error, show its traceback, not one line"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run(commands)
    _add_stop_and_reindex(commands)
    _add_code_commands(commands)
    _add_admin_commands(commands)
    _add_index_commands(commands)
    sidecar = _command(
        commands,
        "sidecar",
        "run the reference sidecar (every argument goes to `python -m sidecar`)",
        "samespace sidecar --master http://master:8000 --serve code-embedding=http://127.0.0.1:8080/v1",
        _sidecar,
    )
    sidecar.add_argument("sidecar_args", nargs=argparse.REMAINDER, help="`samespace sidecar --help` lists them")
    return parser


def _add_run(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = _command(
        commands,
        "run",
        "start a local Ray head (token auth), deploy the Serve apps, index a repository",
        "samespace run --repo ~/src/api --name api",
        _run,
    )
    _reindex_options(run)
    run.add_argument("--query", default=DEFAULT_QUERY, help="sample query whose top hits are printed at the end")
    run.add_argument(
        "--token-file",
        type=Path,
        metavar="PATH",
        help="under auth.mode oauth, the access token (first line) the sample query is sent with; without "
        "it, run says how to get one instead of searching",
    )
    _state_option(run)
    run.add_argument(
        "--data-dir", type=Path, help="embedded store folder (default: $SAMESPACE_STORE__DATA_DIR, else STATE_DIR/data)"
    )
    run.add_argument("--port", type=int, default=DEFAULT_GCS_PORT, help="Ray GCS port (default: %(default)s)")
    run.add_argument(
        "--dashboard-port",
        type=int,
        default=DEFAULT_DASHBOARD_PORT,
        help="Ray dashboard / job API port (default: %(default)s)",
    )
    run.add_argument(
        "--mcp-port",
        type=int,
        default=DEFAULT_MCP_PORT,
        help="Serve HTTP port of the MCP and admin apps (default: %(default)s)",
    )
    run.add_argument(
        "--num-cpus",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="CPUs the head offers (default: this machine's, %(default)s)",
    )
    run.add_argument("--temp-dir", type=Path, help="Ray's temp/session folder (default: Ray's, /tmp/ray)")
    run.add_argument(
        "--metrics-port",
        type=int,
        default=DEFAULT_METRICS_PORT,
        help="Ray's Prometheus endpoint on 127.0.0.1, samespace's series beside Ray's and Serve's "
        "(dashboards/prometheus.yml scrapes it; default: %(default)s)",
    )
    _head_options(run)
    run.add_argument(
        "--wait-s", type=float, default=DEFAULT_WAIT_S, help="how long to wait for /healthz (default: %(default)s)"
    )
    run.add_argument("--dry-run", action="store_true", help="print the commands it would run, run nothing")


def _head_options(run: argparse.ArgumentParser) -> None:
    """How `run` starts the head and what it deploys."""
    run.add_argument(
        "--ray-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for `ray start`, e.g. --ray-arg=--ray-client-server-port=10002",
    )
    run.add_argument(
        "--full-dashboard",
        action="store_true",
        help="plain `ray start`: every dashboard module, the Ray client server, the monitors and the task "
        "table (default: only what run uses, about 0.8 GB less)",
    )
    run.add_argument(
        "--serve-proxy",
        action="store_true",
        help="Serve's proxy serves the MCP port (default: the MCP replica serves it itself, one hop less; "
        "the proxy is used anyway when the config deploys more than the MCP app or more than one replica)",
    )
    run.add_argument(
        "--config",
        type=Path,
        default=ROOT / "serve_config.yaml",
        help="the Serve config to deploy (default: %(default)s)",
    )


def _add_stop_and_reindex(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stop = _command(
        commands, "stop", "stop what `samespace run` started (Serve, then the Ray head)", "samespace stop", _stop
    )
    _state_option(stop)
    _dashboard_option(stop)

    reindex = _command(
        commands,
        "reindex",
        "reindex a repository: a Ray job on the cluster (or in-process)",
        "samespace reindex --repo ~/src/api --full",
        _reindex,
    )
    _reindex_options(reindex)
    reindex.add_argument("--full", action="store_true", help="embed every chunk again")
    reindex.add_argument("--allow-shrink", action="store_true", help="commit even a build that drops many files")
    reindex.add_argument(
        "--ref", help="index this branch, tag or commit, read from the repository's objects (the checkout is untouched)"
    )
    reindex.add_argument("--local", action="store_true", help="run the job's driver on this machine, not as a Ray job")
    _state_option(reindex)
    _dashboard_option(reindex)


def _add_code_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    search = _command(
        commands,
        "search",
        "search the indexed code (the MCP search_code tool)",
        'samespace search "where do we retry requests" -k 10',
        _search,
    )
    search.add_argument("query")
    search.add_argument("-k", type=int, default=5, help="how many hits (default: %(default)s)")
    search.add_argument("--repo", help="only this indexed repository")
    _serve_option(search)
    _token_file_option(search)

    ask = _command(
        commands,
        "ask",
        "answer a question about the code, with citations (the MCP ask_code tool)",
        'samespace ask "how is a reindex switched atomically?" --repo samespace',
        _ask,
    )
    ask.add_argument("question")
    ask.add_argument("--repo", help="only this indexed repository")
    ask.add_argument("--shallow", action="store_true", help="plain retrieval only: no RLM rounds")
    ask.add_argument("--json", action="store_true", help="print the whole structured result")
    _serve_option(ask)
    _token_file_option(ask)

    config = _command(
        commands,
        "mcp-config",
        "print the MCP client config to paste (Claude Code .mcp.json, Cursor .cursor/mcp.json)",
        "samespace mcp-config > .mcp.json",
        _mcp_config,
    )
    _serve_option(config)
    _token_file_option(config)


def _add_admin_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    status = _command(
        commands,
        "status",
        "roles, providers and gate verdicts, budget and spend, and what stops a role: a table",
        "samespace status",
        _status,
    )
    status.add_argument("--json", action="store_true", help="the admin API's answers as raw JSON")
    _state_option(status)
    _serve_option(status)

    push = _command(
        commands,
        "push-key",
        "push the OpenRouter key, read from stdin (never from the command line)",
        "samespace push-key < key.txt",
        _push_key,
    )
    _state_option(push)
    _serve_option(push)

    policy = _command(
        commands, "set-policy", "set a role's routing policy", "samespace set-policy reranker backup", _set_policy
    )
    policy.add_argument("role", choices=[r.value for r in Role])
    policy.add_argument("policy", choices=[p.value for p in Policy])
    _state_option(policy)
    _serve_option(policy)


def _add_index_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    index = _command(
        commands,
        "index",
        "index a folder (or a git ref of it) through the admin API, and keep it fresh",
        "samespace index ~/src/api --ref feature/login --wait",
        _index,
    )
    index.add_argument("path")
    index.add_argument("--name", help="index name (default: the folder's name, '.<ref>' added for a ref)")
    index.add_argument("--ref", help="a branch, tag or commit, read from git's objects (the checkout is untouched)")
    refresh = _command(
        commands, "refresh", "reindex an index from the folder it follows now", "samespace refresh api", _refresh
    )
    refresh.add_argument("name")
    for build in (index, refresh):
        build.add_argument("--full", action="store_true", help="embed everything again")
        build.add_argument("--wait", action="store_true", help="print progress until the build is done")

    remove = _command(commands, "remove", "remove an index and stop syncing it", "samespace remove api", _remove)
    remove.add_argument("name")
    listed = _command(commands, "indexes", "the registered indexes and their builds", "samespace indexes", _indexes)
    for parser in (index, refresh, remove, listed):
        _state_option(parser)
        _serve_option(parser)


def run_plan(args: argparse.Namespace, environ: Mapping[str, str]) -> RunPlan:
    """The `RunPlan` of parsed `run` arguments (what it would run, decided before anything starts)."""
    state = StateDir(args.state_dir.resolve())
    config = args.config.resolve()
    direct = not args.serve_proxy and direct_ingress_fits(config)
    head = HeadSpec(
        num_cpus=args.num_cpus,
        port=args.port,
        dashboard_port=args.dashboard_port,
        temp_dir=args.temp_dir.resolve() if args.temp_dir else None,
        extra_args=tuple(args.ray_arg),
        full_dashboard=args.full_dashboard,
        direct_ingress_port=args.mcp_port if direct else None,
        metrics_port=args.metrics_port,
    )
    from cluster.settings import AuthMode
    from samespace.clients import oauth_advice

    data_dir = args.data_dir.resolve() if args.data_dir else None
    served = served_settings(config, args.mcp_port)
    return RunPlan(
        state=state,
        head=head,
        mcp_port=args.mcp_port,
        config=config,
        working_dir=args.working_dir.resolve(),
        job_args=reindex_argv(args.repo, args.name),
        query=args.query,
        wait_s=args.wait_s,
        env=cluster_env(state, environ, mcp_port=args.mcp_port, data_dir=data_dir),
        token_file=args.token_file.resolve() if args.token_file else None,
        token_advice=tuple(oauth_advice(served)) if served.auth_mode is AuthMode.OAUTH else (),
    )


def _run(args: argparse.Namespace) -> int:
    from samespace.clients import mcp_command, read_token_file

    plan = run_plan(args, os.environ)
    if args.dry_run:
        for argv in plan.commands():
            print(shlex.join(argv))
        return 0
    if plan.token_file is not None:
        read_token_file(plan.token_file)  # a missing or empty token file fails before anything starts
    return run(plan, mcp_command)


def _stop(args: argparse.Namespace) -> int:
    state = StateDir(args.state_dir.resolve())
    return stop(state, _dashboard(args, state), cluster_env(state, os.environ))


def _reindex(args: argparse.Namespace) -> int:
    state = StateDir(args.state_dir.resolve())
    env = cluster_env(state, os.environ)
    job_args = reindex_argv(args.repo, args.name, full=args.full, allow_shrink=args.allow_shrink, ref=args.ref)
    if not args.local:
        return submit_reindex(_dashboard(args, state), args.working_dir.resolve(), job_args, env)
    return reindex_here(args.working_dir.resolve(), job_args, env)  # joins the token-guarded cluster as a driver


def _search(args: argparse.Namespace) -> int:
    from samespace.clients import mcp_command

    repo = ["--repo", args.repo] if args.repo else []
    token = ["--token-file", str(args.token_file)] if args.token_file else []
    return mcp_command(["--url", _mcp_url(args.address), "-k", str(args.k), *repo, *token, "--", args.query])


def _ask(args: argparse.Namespace) -> int:
    from samespace.answers import ask

    return ask(
        _mcp_url(args.address),
        args.question,
        repo=args.repo,
        deep=not args.shallow,
        as_json=args.json,
        token_file=args.token_file,
    )


def _mcp_config(args: argparse.Namespace) -> int:
    from samespace.clients import mcp_command

    token = ["--token-file", str(args.token_file)] if args.token_file else []
    return mcp_command(["--url", _mcp_url(args.address), "--print-config", *token])


def _status(args: argparse.Namespace) -> int:
    return _admin(args, ["status", *["--json"] * args.json])


def _push_key(args: argparse.Namespace) -> int:
    return _admin(args, ["push-key"])  # the admin client reads the key from stdin, in this process


def _set_policy(args: argparse.Namespace) -> int:
    return _admin(args, ["set-policy", args.role, args.policy])


def _index(args: argparse.Namespace) -> int:
    extra = ["--name", args.name] * bool(args.name) + ["--ref", args.ref] * bool(args.ref)
    return _admin(args, ["index", args.path, *extra, *["--full"] * args.full, *["--wait"] * args.wait])


def _refresh(args: argparse.Namespace) -> int:
    return _admin(args, ["refresh", args.name, *["--full"] * args.full, *["--wait"] * args.wait])


def _remove(args: argparse.Namespace) -> int:
    return _admin(args, ["remove", args.name])


def _indexes(args: argparse.Namespace) -> int:
    return _admin(args, ["indexes"])


def _sidecar(args: argparse.Namespace) -> int:
    from sidecar.cli import main as sidecar_main

    return sidecar_main(args.sidecar_args)


def _admin(args: argparse.Namespace, command: list[str]) -> int:
    from samespace.clients import admin_command

    token_file = os.environ.get(ADMIN_TOKEN_FILE_ENV) or str(StateDir(args.state_dir.resolve()).admin_token)
    return admin_command(["--url", f"{args.address.rstrip('/')}/admin", "--token-file", token_file, *command])


def _mcp_url(address: str) -> str:
    return f"{address.rstrip('/')}/mcp/"


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["sidecar"]:  # its own command line, options first: argparse's REMAINDER would trip on them
        return _sidecar(argparse.Namespace(sidecar_args=arguments[1:]))
    args = build_parser().parse_args(arguments)
    handler: Handler = args.handler
    try:
        return handler(args)
    except KeyboardInterrupt:
        print(f"samespace {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # every failure, expected or not, is one line for a person; --traceback: whole
        if args.traceback:
            raise
        print(f"samespace {args.command}: {one_line(exc)}", file=sys.stderr)
        return 1
