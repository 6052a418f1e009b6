"""The session cluster's helpers: the records the fixtures in tests/conftest.py yield, a free port,
an environment block, the reindex job's command line."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).parents[1] / "fixtures"


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """`os.environ` with `values` set, as it was before once the block ends."""
    saved = dict(os.environ)
    os.environ.update(values)
    try:
        yield
    finally:  # undo key by key: never an empty environment, even for a moment (Ray's threads read it)
        for key in set(os.environ) - set(saved):
            del os.environ[key]
        for key, value in saved.items():
            if os.environ.get(key) != value:
                os.environ[key] = value


@dataclass
class RayCluster:
    settings: object  # cluster.settings.SamespaceSettings
    dashboard_url: str
    env: dict[str, str]
    data_dir: Path
    metrics_port: int = 0  # Ray's Prometheus endpoint: http://127.0.0.1:<port>/metrics


def wait_for_job_api(dashboard_url: str, timeout_s: float = 60.0) -> None:
    from ray.job_submission import JobSubmissionClient

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            JobSubmissionClient(dashboard_url).list_jobs()
            return
        except Exception:  # the dashboard agent starts a few seconds after ray.init returns
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@dataclass
class McpServer:
    url: str
    port: int


@dataclass
class CanaryScan:
    """Secrets that must never reach a file: Ray's session directory (logs, events, spilled
    objects) and the roots each module names. Scanned once, when the session's Ray stops, so
    after every test that used them, whatever the order the tests ran in."""

    session_dir: Path
    secrets: dict[str, list[Path]]

    def watch(self, secret: str, *roots: Path) -> None:
        self.secrets.setdefault(secret, []).extend(Path(root) for root in roots)

    def leaks(self, max_file_bytes: int = 50_000_000) -> list[str]:
        """`path: secret prefix` for every watched file that holds a watched secret."""
        roots = {self.session_dir, *(root for roots in self.secrets.values() for root in roots)}
        files = {path for root in roots for path in root.rglob("*") if path.is_file()}  # roots may nest
        found = []
        for path in sorted(files):
            try:
                if path.stat().st_size >= max_file_bytes:
                    continue
                blob = path.read_bytes()
            except FileNotFoundError:  # a log rotated away since the listing
                continue
            found += [f"{path}: {secret[:12]}..." for secret in self.secrets if secret.encode() in blob]
        return found


def reindex_entrypoint(repo: Path, name: str) -> str:
    return f"{sys.executable} -m jobs.reindex --repo {repo} --name {name}"
