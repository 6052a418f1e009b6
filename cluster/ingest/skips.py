"""What a reindex left out, and why: counts per reason and the paths (never the contents).

The walker records files it refuses (secret files, symlinks into `.git/`, unreadable, binary);
the reindex records files it cannot chunk, generated or minified files, and chunks the secret
scan drops. The summary goes to the job log and is stored with the build for `index_status`.
"""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from cluster.types import Strict

MAX_PATHS_PER_REASON = 50  # paths kept per reason in the summary (counts are always complete)


class SkipReason(str, Enum):
    SECRET_FILE = "secret-file"  # a path on the secret deny-list (.env, *.pem, .ssh/, ...)
    SECRET_CONTENT = "secret-content"  # a chunk the content scan found a credential in (counted per chunk)
    SYMLINK = "symlink-refused"  # a symlink out of the root, into .git/ or into an excluded path
    UNREADABLE = "unreadable"  # stat/open/read failed (permissions, vanished while walking)
    TOO_LARGE = "too-large"  # over chunking.max_file_bytes
    BINARY = "binary"  # NUL bytes or mostly undecodable
    GENERATED = "generated"  # minified bundle or a generated-file marker
    CHUNK_FAILED = "chunk-failed"  # the chunker raised on this file (the job goes on)


class SkipSummary(Strict):
    """Counts per reason (files, or chunks for secret-content) and up to MAX_PATHS_PER_REASON paths each."""

    counts: dict[str, int] = Field(default_factory=dict)
    paths: dict[str, list[str]] = Field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def line(self) -> str:
        if not self.counts:
            return "skipped: nothing"
        parts = ", ".join(f"{reason} {n}" for reason, n in sorted(self.counts.items()))
        return f"skipped: {parts}"


class SkipLog:
    """Collects skips while a repository is walked and chunked (single-threaded, in the job)."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._paths: dict[str, list[str]] = {}

    def add(self, reason: SkipReason, path: str) -> None:
        key = reason.value
        self._counts[key] = self._counts.get(key, 0) + 1
        paths = self._paths.setdefault(key, [])
        if len(paths) < MAX_PATHS_PER_REASON and path not in paths:
            paths.append(path)

    def count(self, reason: SkipReason) -> int:
        return self._counts.get(reason.value, 0)

    def summary(self) -> SkipSummary:
        return SkipSummary(counts=dict(self._counts), paths={k: list(v) for k, v in self._paths.items()})
