"""What a reindex is asked to do, and what one build writes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from cluster.space import EncoderIdentity
from cluster.types import Strict


class BuildRequest(Strict):
    """One reindex, as `python -m jobs.reindex` is asked for it."""

    repo: Path = Field(description="The folder to index.")
    name: str = Field(description="The index's name.")
    full: bool = Field(default=False, description="Embed every chunk again (default: reuse unchanged vectors).")
    allow_shrink: bool = Field(
        default=False, description="Commit even when the build drops more than ingest.max_shrink_share of the files."
    )
    ref: str | None = Field(default=None, description="A branch, tag or commit to index instead of the work tree.")
    build_id: str | None = Field(default=None, description="The build's id, as whoever submitted the job announced it.")


@dataclass(frozen=True)
class BuildTarget:
    """The build being written: its index, its collection, its space and where its files come from."""

    name: str
    build: str
    reference: EncoderIdentity  # the space every row is written in
    folder: Path  # the folder the index follows
    files_root: Path  # where the files are read from: the folder, or the export of a ref
