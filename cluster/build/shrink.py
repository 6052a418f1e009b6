"""The shrink check: an unmounted or emptied root must not wipe a good index (DESIGN §10)."""

from __future__ import annotations

from cluster.build.collect import RepoChunks
from cluster.errors import ShrinkRefused
from cluster.index import IndexRecord


def check_shrink(name: str, current: IndexRecord | None, found: RepoChunks, max_share: float) -> None:
    """Refuse (ShrinkRefused) a build that would replace a non-empty serving build with an empty one,
    or drop more than `max_share` of its files."""
    if current is None or current.files == 0:
        return
    empty = found.files == 0 or not found.chunks
    if empty or current.files - found.files > max_share * current.files:
        raise ShrinkRefused(name, current.files, found.files, max_share)
