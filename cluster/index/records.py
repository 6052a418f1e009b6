"""What an index and its builds say about themselves: the record stored with each build, a build's
progress and state, index names and build ids."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from pathlib import Path

from pydantic import Field

from cluster.errors import SamespaceError
from cluster.ingest.git_state import SourceState
from cluster.ingest.skips import SkipSummary
from cluster.space import EncoderIdentity
from cluster.types import Strict

INDEX_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")  # matched whole: fullmatch
BUILD_SEPARATOR = "__b"
HISTORY_SEPARATOR = "__h"  # `<index>__history` holds an index's mined history (cluster.index.history_store)


EXPORTS_FOLDER = "exports"


class IndexRecord(Strict):
    """What a committed index says about itself (stored with its collection)."""

    name: str
    build: str = Field(description="The collection holding this build.")
    repo_root: str = Field(description="Absolute path the files were read from (reads serve them from here).")
    origin: str | None = Field(
        default=None,
        description="The folder the index follows (a ref build's repository; its files are an export of it). "
        "None: repo_root (a build from before origins were recorded).",
    )
    source: SourceState | None = Field(
        default=None, description="The commit, branch and dirtiness the files were at (None: not recorded)."
    )
    identity: EncoderIdentity = Field(description="The encoder space every row lives in.")
    probe_vectors: list[list[float]] | None = Field(
        default=None, description="The reference's vectors of the gate's probe texts, for the drift sentinel."
    )
    providers: list[str] = Field(default_factory=list, description="Providers that wrote rows.")
    files: int = 0
    chunks: int = 0
    embedded: int = Field(default=0, description="Rows this build embedded (sent to an encoder).")
    reused: int = Field(default=0, description="Rows whose vectors this build took over unchanged.")
    skipped: SkipSummary = Field(
        default_factory=SkipSummary, description="What the reindex left out and why: counts per reason, paths."
    )
    started_at: float
    built_at: float | None = None
    categorised: bool = Field(
        default=False,
        description="Every row carries `categories` (False: a build from before they existed; the search "
        "filters fall back to what its rows do carry, `cluster.index.controls`).",
    )

    @property
    def followed_folder(self) -> str:
        return self.origin or self.repo_root


class BuildProgress(Strict):
    files_done: int = 0
    files_total: int = 0
    chunks_done: int = 0
    chunks_total: int = 0
    chunks_per_s: float = 0.0
    eta_s: float | None = None


class BuildState(Strict):
    index: str
    build: str
    state: str = Field(description="'building', 'failed' or 'committed'.")
    job_id: str | None = Field(default=None, description="Ray job that runs the build (see `ray list jobs`).")
    started_at: float
    progress: BuildProgress = Field(default_factory=BuildProgress)
    error: str | None = None


def validate_index_name(name: str) -> str:
    if not INDEX_NAME_PATTERN.fullmatch(name) or BUILD_SEPARATOR in name or HISTORY_SEPARATOR in name:
        raise SamespaceError(
            f"invalid index name {name!r}: use letters, digits, '_', '.', '-' (max 63, not containing "
            f"{BUILD_SEPARATOR!r} or {HISTORY_SEPARATOR!r})"
        )
    return name


def history_collection(name: str) -> str:
    """The collection of index `name`'s mined history (no index, alias or build can be named so)."""
    return f"{validate_index_name(name)}__history"  # begins with HISTORY_SEPARATOR


def index_of(collection: str) -> str:
    """The index a build collection belongs to ("" for a collection that is no build)."""
    return collection.split(BUILD_SEPARATOR, 1)[0] if BUILD_SEPARATOR in collection else ""


def new_build_id(name: str, now: float) -> str:
    """A build collection's name: the index's, the time, and a random tail."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%d%H%M%S")
    return f"{validate_index_name(name)}{BUILD_SEPARATOR}{stamp}{uuid.uuid4().hex[:6]}"


def exports_root(data_dir: Path) -> Path:
    """The folder of every ref build's exported files: beside the store."""
    return data_dir / EXPORTS_FOLDER


def export_folder(data_dir: Path, build: str) -> Path:
    """Where a ref build's files live (exported from the repository's objects): one folder per
    build, removed with the build."""
    return exports_root(data_dir) / build
