"""Small real git repositories for the e2e tests: one module per topic, three functions each."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

GIT_ID = ["-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "commit.gpgsign=false"]
TOPICS = ("invoice", "shipment", "customer", "warehouse", "payment", "refund")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *GIT_ID, "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def function(topic: str, i: int, body: str = "* 2") -> str:
    return (
        f"def {topic}_step_{i}(record, limit={i}):\n"
        f'    """Step {i} of the {topic} pipeline: validate the {topic} record and clamp it."""\n'
        f"    value = record.get('{topic}_{i}', {i}) {body}\n"
        f"    return min(value, limit)\n"
    )


def module(topic: str, body: str = "* 2") -> str:
    """Three functions; `body` changes the first one only."""
    return "\n\n".join(function(topic, i, body if i == 0 else "* 2") for i in range(3))


def git_repo(root: Path, topics: Sequence[str] = TOPICS) -> Path:
    """A repository on branch main with one commit of a module per topic."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for topic in topics:
        (root / f"{topic}.py").write_text(module(topic))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root
