"""`samespace run`, `stop` and `reindex`: the local cluster's life, as `make run` / `make stop` ran it.

run: a local Ray head with token auth (this state folder's own, reused only when it still runs on the same
ports with token auth on; anything else on its ports is refused: samespace/head_reuse.py) → `serve deploy` of
serve_config.yaml's copy in the state folder → wait for /healthz → `ray job submit --working-dir <checkout> -- python -m
jobs.reindex` → the MCP URL, a paste-ready client config and the top hits of one query. Each step is a
command line built by a function of its own (`RunPlan`), so `--dry-run` prints exactly what would run.
Under auth.mode oauth `run` holds no access token: it ends by saying how to get one (issuer, resource,
scopes, metadata) instead of searching, unless `--token-file` gives it one (`sample_search`).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import yaml  # type: ignore[import-untyped]  # PyYAML ships no types; its stubs are no dependency

from samespace.head import HeadRecord, HeadSpec, free_port, ray_start_argv, start_head, stop_session
from samespace.head_reuse import HeadAction, decide_head, probe_head
from samespace.state import ADMIN_TOKEN_FILE_ENV, StateDir, program

if TYPE_CHECKING:
    from cluster.settings import SamespaceSettings

__all__ = [
    "RunPlan",
    "direct_ingress_fits",
    "health_url",
    "mcp_url",
    "reindex_argv",
    "run",
    "sample_search",
    "served_settings",
    "stop",
    "submit_argv",
    "submit_reindex",
    "write_serve_config",
]

HEALTH_POLL_S = 1.0
MCP_IMPORT_PATH = "serve_apps.mcp:build_app"


def mcp_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/mcp/"


def health_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/healthz"


def reindex_argv(
    repo: Path, name: str | None, *, full: bool = False, allow_shrink: bool = False, ref: str | None = None
) -> list[str]:
    """The arguments of `python -m jobs.reindex` (the job's entrypoint, or an in-process run)."""
    argv = ["--repo", str(repo.resolve()), "--name", name or repo.resolve().name]
    return argv + ["--full"] * full + ["--allow-shrink"] * allow_shrink + (["--ref", ref] if ref else [])


def submit_argv(dashboard_url: str, working_dir: Path, job_args: list[str]) -> list[str]:
    """`ray job submit`: the checkout goes along as the job's working dir; the call waits for the job."""
    return [
        program("ray"),
        "job",
        "submit",
        "--address",
        dashboard_url,
        "--working-dir",
        str(working_dir),
        "--",
        "python",
        "-m",
        "jobs.reindex",
        *job_args,
    ]


def write_serve_config(config: Path, state: StateDir, proxy_port: int) -> Path:
    """Write the config `run` deploys: `config` with Serve's proxy on `proxy_port` (`serve deploy` takes
    the proxy's port from the config's `http_options` only), in the state folder; return its path."""
    document = yaml.safe_load(config.read_text(encoding="utf-8"))
    document.setdefault("http_options", {})["port"] = proxy_port
    state.ensure()
    state.serve_config.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return state.serve_config


def _applications(config: Path) -> list[dict[str, object]]:
    applications: list[dict[str, object]] = (yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get(
        "applications"
    ) or []
    return applications


def _mcp_args(application: dict[str, object]) -> dict[str, object]:
    args = application.get("args")
    return dict(args) if isinstance(args, dict) else {}


def direct_ingress_fits(config: Path) -> bool:
    """Whether the MCP replica may serve the MCP port itself: direct ingress gives the port to exactly
    one replica, so the config must deploy the MCP app alone, at one replica (settings as the replica
    reads them: this environment's SAMESPACE_*, then the application's args)."""
    from cluster.settings import load_settings

    applications = _applications(config)
    if len(applications) != 1 or applications[0].get("import_path") != MCP_IMPORT_PATH:
        return False
    return load_settings(**_mcp_args(applications[0])).serve.mcp_replicas == 1


def served_settings(config: Path, mcp_port: int) -> SamespaceSettings:
    """The settings the MCP app will run with, as far as `run` can tell before it starts: this
    environment's SAMESPACE_*, then the MCP application's args in `config`, on `mcp_port` unless they
    name a port (what `run` words its end by: the auth mode, the issuer, the resource)."""
    from cluster.settings import load_settings

    mcp = next((a for a in _applications(config) if a.get("import_path") == MCP_IMPORT_PATH), {})
    args = _mcp_args(mcp)
    settings = load_settings(**args)
    serve_args = args.get("serve")
    if isinstance(serve_args, dict) and "port" in serve_args:
        return settings
    return settings.model_copy(update={"serve": settings.serve.model_copy(update={"port": mcp_port})})


@dataclass(frozen=True)
class RunPlan:
    """Everything `run` needs, decided before anything starts."""

    state: StateDir
    head: HeadSpec
    mcp_port: int
    config: Path  # the Serve config as written (serve_config.yaml)
    working_dir: Path
    job_args: list[str]
    query: str
    wait_s: float
    env: Mapping[str, str]
    token_file: Path | None = None  # the access token (first line) the sample query is sent with
    token_advice: tuple[str, ...] = ()  # under auth.mode oauth: how to get a token (empty otherwise)

    @property
    def serve_config(self) -> Path:
        return self.state.serve_config

    @property
    def deploy(self) -> list[str]:
        return [program("serve"), "deploy", "--address", self.head.dashboard_url, str(self.serve_config)]

    @property
    def submit(self) -> list[str]:
        return submit_argv(self.head.dashboard_url, self.working_dir, self.job_args)

    def commands(self) -> list[list[str]]:
        """What `run` runs, in order (`ray start` only when no head of this state folder runs)."""
        return [ray_start_argv(self.head), self.deploy, self.submit]


def sample_search(plan: RunPlan, url: str) -> list[str] | None:
    """The MCP client's arguments for `run`'s sample query, or None when it has no token to send: under
    auth.mode oauth without `--token-file` (it says how to get a token instead)."""
    if plan.token_advice and plan.token_file is None:
        return None
    token = ["--token-file", str(plan.token_file)] if plan.token_file is not None else []
    return ["--url", url, *token, "-k", "5", "--", plan.query]


def run(plan: RunPlan, show: Callable[[list[str]], int]) -> int:
    """Start (or reuse) the head, deploy, wait for health, reindex; `show` prints the MCP client's part."""
    state = plan.state
    state.ensure()
    if state.ensure_ray_token():
        print(f"made the Ray cluster token: {state.ray_token} (0600)")
    state.ensure_admin_token()
    _check_admin_token(plan.env)
    record = HeadRecord.read(state.head_record)
    decision = decide_head(plan.head, record, probe_head(plan.head, record))
    if decision.action is HeadAction.REFUSE:
        raise SystemExit(f"samespace run: {decision.reason}")
    if decision.action is HeadAction.START:
        print("starting a local Ray head (token auth on, usage stats off, Ray's ports on 127.0.0.1)")
        direct_port = start_head(plan.head, state, plan.env).direct_ingress_port
    else:
        print(decision.reason)
        direct_port = _running_direct_ingress_port(plan, record)
    # With direct ingress the replica holds the MCP port and Serve's proxy gets a port of its own, which
    # nothing of samespace's calls; otherwise the proxy serves the MCP port.
    write_serve_config(plan.config, state, free_port() if direct_port == plan.mcp_port else plan.mcp_port)
    _check(plan.deploy, plan.env)
    url = mcp_url(plan.mcp_port)
    print(f"waiting for the MCP server at {url}")
    if not _wait_for_health(health_url(plan.mcp_port), plan.wait_s):
        subprocess.run([program("serve"), "status", "--address", plan.head.dashboard_url], env=dict(plan.env))
        return 1
    _check(plan.submit, plan.env, cwd=plan.working_dir)
    print(f"\nMCP server: {url}")
    print("Client config (Claude Code .mcp.json / Cursor .cursor/mcp.json):")
    show(["--url", url, "--print-config"])
    print()
    query = sample_search(plan, url)
    searched = show(query) if query is not None else _advise(plan.token_advice)
    print(f"\nAdmin API: http://127.0.0.1:{plan.mcp_port}/admin/ (bearer token in {state.admin_token})")
    print(f"The cluster stays up: dashboard {plan.head.dashboard_url} (token auth: the token is in {state.ray_token});")
    print(
        "'samespace stop' stops it. Other Ray commands need: "
        f"export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={state.ray_token}"
    )
    return searched


def _advise(advice: tuple[str, ...]) -> int:
    """Say how to get a token, and that the sample query waits for one (`run` still succeeded)."""
    print("\n".join(advice))
    print("`samespace run --token-file PATH` runs the sample query with it.")
    return 0


def _check_admin_token(env: Mapping[str, str]) -> None:
    """Refuse to start with an admin token file the admin app would refuse (a short token)."""
    from cluster.errors import ConfigError
    from cluster.settings import configured_token

    token_file = env.get(ADMIN_TOKEN_FILE_ENV)
    try:
        configured_token(None, Path(token_file) if token_file else None, "admin.token_file")
    except ConfigError as exc:
        raise SystemExit(f"samespace run: {exc}") from None


def _running_direct_ingress_port(plan: RunPlan, record: HeadRecord | None) -> int | None:
    """The direct ingress port of the head that already runs (None: Serve's proxy serves the MCP port)."""
    direct_port = record.direct_ingress_port if record is not None else None
    if plan.head.direct_ingress_port is not None and direct_port != plan.mcp_port:
        print(
            f"note: the running Ray head was not started to serve MCP on port {plan.mcp_port} itself; "
            "Serve's proxy serves it ('samespace stop && samespace run' restarts it with direct ingress)"
        )
    elif plan.head.direct_ingress_port is None and direct_port == plan.mcp_port:
        print(
            f"warning: the running Ray head gives port {plan.mcp_port} to one MCP replica itself; "
            "'samespace stop && samespace run' restarts it with Serve's proxy on that port"
        )
    return direct_port


def stop(state: StateDir, dashboard_url: str, env: Mapping[str, str]) -> int:
    """Shut Serve down, then stop the head `run` recorded (or, without a record, `ray stop`)."""
    subprocess.run(
        [program("serve"), "shutdown", "--address", dashboard_url, "-y"],
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    record = HeadRecord.read(state.head_record)
    if record is not None:
        stopped = stop_session(record.session)
        state.head_record.unlink(missing_ok=True)
        print("ray stopped" if stopped else "no Ray head of this state folder was running")
        return 0
    done = subprocess.run([program("ray"), "stop"], env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if done.returncode == 0:
        print("ray stopped")
    return 0


def submit_reindex(dashboard_url: str, working_dir: Path, job_args: list[str], env: Mapping[str, str]) -> int:
    return subprocess.run(submit_argv(dashboard_url, working_dir, job_args), env=dict(env), cwd=working_dir).returncode


def reindex_here(working_dir: Path, job_args: list[str], env: Mapping[str, str]) -> int:
    """The reindex job's driver on this machine instead of as a Ray job: the same entrypoint, a child process."""
    argv = [sys.executable, "-m", "jobs.reindex", *job_args]
    return subprocess.run(argv, env=dict(env), cwd=working_dir).returncode


def _check(argv: list[str], env: Mapping[str, str], cwd: Path | None = None) -> None:
    code = subprocess.run(argv, env=dict(env), cwd=cwd).returncode
    if code != 0:
        command = shlex.join([Path(argv[0]).name, *argv[1:2]])
        raise SystemExit(f"samespace run: `{command}` failed (exit {code}): its output is above")


def _wait_for_health(url: str, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if httpx.get(url, timeout=5.0).is_success:
                return True
        except httpx.TransportError:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(HEALTH_POLL_S)
