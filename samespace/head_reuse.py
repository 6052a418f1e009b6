"""Whether `samespace run` may use the Ray head it finds, must start one, or must refuse.

`run` deploys the apps to the head's dashboard and pushes keys to what it deploys, so it uses a running
head only when this state folder started it (its record's session is alive and holds the GCS and
dashboard ports this run names) and that head runs with token auth on (its dashboard says so and
refuses a request without the token). Anything else on those ports is another user's or another
checkout's: refused, with what to do. The decision is a pure function of what was found
(`decide_head`); `probe_head` finds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import httpx

from samespace.head import HeadRecord, HeadSpec, daemon_pids, is_listening, session_listens_on

__all__ = [
    "HeadAction",
    "HeadAuth",
    "HeadDecision",
    "HeadProbe",
    "auth_from_answers",
    "dashboard_auth",
    "decide_head",
    "probe_head",
]

AUTH_MODE_PATH = "/api/authentication_mode"  # public on Ray's dashboard: {"authentication_mode": "token"}
GUARDED_PATH = "/api/version"  # the Jobs API's: 401 without a token when token auth is on
AUTH_PROBE_TIMEOUT_S = 5.0
PORT_FLAGS = "--port and --dashboard-port"


class HeadAuth(StrEnum):
    """Token auth of a running head, as its dashboard answers."""

    ON = "on"  # says "token" and refuses a request without one
    OFF = "off"  # says "disabled", or answers a guarded route without a token
    UNKNOWN = "unknown"  # no answer, or answers that disagree


class HeadAction(StrEnum):
    START = "start"
    REUSE = "reuse"
    REFUSE = "refuse"


@dataclass(frozen=True)
class HeadDecision:
    action: HeadAction
    reason: str  # for the person running `samespace run`: what was found and, on a refusal, what to do


@dataclass(frozen=True)
class HeadProbe:
    """What is on the head's ports now, and whose it is."""

    gcs_port_taken: bool  # something accepts connections on the run's GCS port
    dashboard_port_taken: bool  # ... on its dashboard port
    recorded_alive: bool  # the recorded session still holds a GCS or raylet
    recorded_holds_ports: bool  # ... and it alone listens on the run's GCS and dashboard ports
    auth: HeadAuth = HeadAuth.UNKNOWN  # asked only of the recorded head on this run's ports


def decide_head(spec: HeadSpec, record: HeadRecord | None, probe: HeadProbe) -> HeadDecision:
    """Reuse only this state folder's own head, on this run's ports, with token auth on; start one when
    the ports are free and no head of this folder runs; refuse everything else."""
    ours = f"the Ray head this state folder started (GCS {spec.gcs_address}, dashboard {spec.dashboard_url})"
    if record is not None and probe.recorded_alive:
        same_ports = (record.gcs_address, record.dashboard_url) == (spec.gcs_address, spec.dashboard_url)
        if same_ports and probe.recorded_holds_ports and probe.auth is HeadAuth.ON:
            return HeadDecision(HeadAction.REUSE, f"using {ours}: token auth on")
        if same_ports and probe.recorded_holds_ports:
            state = "off" if probe.auth is HeadAuth.OFF else "not confirmed (its dashboard did not say)"
            return HeadDecision(
                HeadAction.REFUSE,
                f"{ours} runs with token auth {state}: 'samespace stop' stops it; run again to start it with the token",
            )
        if same_ports:
            return HeadDecision(
                HeadAction.REFUSE,
                f"{ours} is only partly up (its processes do not hold those ports): 'samespace stop', then run again",
            )
        return HeadDecision(
            HeadAction.REFUSE,
            f"the Ray head this state folder started still runs on GCS {record.gcs_address}, dashboard "
            f"{record.dashboard_url}: 'samespace stop' first, or run with its ports ({PORT_FLAGS})",
        )
    taken = [f"{port} ({what})" for port, what, busy in _ports(spec, probe) if busy]
    if taken:
        ports = f"port {taken[0]} is" if len(taken) == 1 else f"ports {' and '.join(taken)} are"
        return HeadDecision(
            HeadAction.REFUSE,
            f"{ports} in use on 127.0.0.1 by something this state folder did not start (another user's or "
            f"another checkout's Ray head?): stop it, or pick free ports with {PORT_FLAGS}",
        )
    return HeadDecision(HeadAction.START, "no Ray head of this state folder runs and its ports are free")


def _ports(spec: HeadSpec, probe: HeadProbe) -> list[tuple[int, str, bool]]:
    return [
        (spec.port, "Ray GCS", probe.gcs_port_taken),
        (spec.dashboard_port, "dashboard", probe.dashboard_port_taken),
    ]


def auth_from_answers(mode: httpx.Response, anonymous: httpx.Response) -> HeadAuth:
    """Token auth from the dashboard's own word (`mode`) and from a guarded route asked without a token."""
    try:
        said = mode.json().get("authentication_mode") if mode.status_code == 200 else None
    except (ValueError, AttributeError):
        said = None
    if said == "token" and anonymous.status_code == 401:
        return HeadAuth.ON
    if said == "disabled" or anonymous.is_success:
        return HeadAuth.OFF
    return HeadAuth.UNKNOWN


def dashboard_auth(dashboard_url: str, client: httpx.Client) -> HeadAuth:
    """Ask a head's dashboard whether it runs with token auth (no token sent)."""
    try:
        mode = client.get(f"{dashboard_url}{AUTH_MODE_PATH}")
        anonymous = client.get(f"{dashboard_url}{GUARDED_PATH}")
    except httpx.HTTPError:
        return HeadAuth.UNKNOWN
    return auth_from_answers(mode, anonymous)


def probe_head(spec: HeadSpec, record: HeadRecord | None, client: httpx.Client | None = None) -> HeadProbe:
    """Look at the run's ports and at the recorded head; its dashboard is asked about auth only when the
    recorded session holds both ports (nothing is sent to a head this folder did not start)."""
    session = record.session if record is not None else None
    alive = session is not None and bool(daemon_pids(session))
    holds = (
        session is not None and alive and all(session_listens_on(session, p) for p in (spec.port, spec.dashboard_port))
    )
    auth = HeadAuth.UNKNOWN
    if holds and client is not None:
        auth = dashboard_auth(spec.dashboard_url, client)
    elif holds:
        with httpx.Client(timeout=AUTH_PROBE_TIMEOUT_S, trust_env=False) as http:
            auth = dashboard_auth(spec.dashboard_url, http)
    return HeadProbe(
        gcs_port_taken=is_listening(spec.port),
        dashboard_port_taken=is_listening(spec.dashboard_port),
        recorded_alive=alive,
        recorded_holds_ports=holds,
        auth=auth,
    )
