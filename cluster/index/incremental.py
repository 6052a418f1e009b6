"""The plan of an incremental reindex: which chunks keep their serving vector, which are embedded.

Pure logic. A chunk whose embedded text (its `embed_hash`, see `cluster.index.catalog.embed_hash`) is
already a row of the serving build reuses that row's vector; only new or changed chunks go to
the encoders. Reuse needs the serving index to live in the reference's encoder space (equal
`EncoderIdentity`: model, weights, width, normalisation, token cap, chunk-text version) and a
reference that has not drifted from the index's stored probe vectors; otherwise everything is
embedded. When every chunk would be written exactly as it already is (same rows, same lines,
same file, same repo root, every payload field of this version), there is nothing to do at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
from pydantic import Field

from cluster.index.catalog import PointKey
from cluster.index.payload import RowPayload
from cluster.index.records import IndexRecord
from cluster.space import EncoderIdentity
from cluster.types import StoredPoint, Strict


class PlanMode(StrEnum):
    FULL = "full"  # embed every chunk into a new build
    INCREMENTAL = "incremental"  # new build: reuse what is unchanged, embed the rest
    UP_TO_DATE = "up-to-date"  # no new build: the serving one already is what a rebuild would write


class ReindexPlan(Strict):
    mode: PlanMode
    reason: str = Field(description="Why this mode, one line.")
    reuse: list[int] = Field(default_factory=list, description="Chunk indexes whose serving vector is reused.")
    embed: list[int] = Field(default_factory=list, description="Chunk indexes to embed.")
    changed_files: list[str] = Field(default_factory=list, description="Files with at least one chunk to embed.")
    removed_files: list[str] = Field(default_factory=list, description="Files of the serving build gone now.")
    dropped_rows: int = Field(default=0, description="Serving rows with no counterpart in the new build.")

    def line(self) -> str:
        """e.g. 'plan: incremental (sources changed): reused 120, embedding 4; 2 files to embed, 1 removed'."""
        files = [f"{len(self.changed_files)} files to embed"] if self.changed_files else []
        if self.removed_files:
            files.append(f"{len(self.removed_files)} removed")
        return f"plan: {self.mode.value} ({self.reason}): reused {len(self.reuse)}, embedding {len(self.embed)}" + (
            f"; {', '.join(files)}" if files else ""
        )


def full_reason(
    serving: IndexRecord | None,
    reference: EncoderIdentity,
    *,
    full: bool = False,
    reference_drifted: bool = False,
) -> str | None:
    """Why nothing of the serving build may be reused, or None when reuse is allowed."""
    if full:
        return "--full"
    if serving is None:
        return "no serving index"
    if serving.identity != reference:
        return f"encoder space changed: {serving.identity.space_id} -> {reference.space_id}"
    if reference_drifted:
        return "the reference encoder drifted from the index's probe vectors"
    return None


def plan_reindex(
    keys: Sequence[PointKey],
    reference: EncoderIdentity,
    *,
    serving: IndexRecord | None,
    serving_keys: Sequence[PointKey | None] | None,
    repo_root: str,
    full: bool = False,
    reference_drifted: bool = False,
) -> ReindexPlan:
    """Plan a reindex whose chunks have `keys` (in chunk order) against the serving build's row
    keys (None: a row that cannot say what was embedded; never reused, and it forces a rebuild)."""
    everything = list(range(len(keys)))
    reason = full_reason(serving, reference, full=full, reference_drifted=reference_drifted)
    if reason is None and serving_keys is None:
        reason = "the serving build's rows were not read"
    if reason is not None:
        return ReindexPlan(mode=PlanMode.FULL, reason=reason, embed=everything, changed_files=_paths(keys, everything))
    assert serving is not None and serving_keys is not None
    known = [row for row in serving_keys if row is not None]
    reusable = {row.embed_hash for row in known}
    reuse = [i for i, key in enumerate(keys) if key.embed_hash in reusable]
    embed = [i for i, key in enumerate(keys) if key.embed_hash not in reusable]
    new_ids = {key.id for key in keys}
    new_paths = {key.path for key in keys}
    removed = sorted({row.path for row in known} - new_paths)
    dropped = sum(1 for row in serving_keys if row is None or row.id not in new_ids)
    same_rows = (
        len(serving_keys) == len(keys)
        and len(known) == len(serving_keys)
        and set(known) == set(keys)  # ids are unique per build: equal sets, one-to-one rows
    )
    if same_rows and serving.repo_root == repo_root:
        return ReindexPlan(mode=PlanMode.UP_TO_DATE, reason="every row is current", reuse=reuse)
    if same_rows:
        why = f"repo root moved: {serving.repo_root} -> {repo_root}"
    elif embed or dropped:
        why = "sources changed"
    else:
        why = "rows to rewrite (lines, file hashes or payload fields changed)"
    return ReindexPlan(
        mode=PlanMode.INCREMENTAL,
        reason=why,
        reuse=reuse,
        embed=embed,
        changed_files=_paths(keys, embed),
        removed_files=removed,
        dropped_rows=dropped,
    )


def _paths(keys: Sequence[PointKey], rows: Sequence[int]) -> list[str]:
    return sorted({keys[i].path for i in rows})


@dataclass(frozen=True)
class ReusableRows:
    """One page of a build's vectors by embed hash, with who wrote each (for reuse)."""

    embed_hashes: list[str]
    vectors: np.ndarray  # float32, one row per hash: the code vectors
    name_vectors: np.ndarray  # float32, the same rows: the name vectors
    writers: list[tuple[str, dict[str, Any]]]  # distinct (provider, encoder dump) pairs
    writer_of: list[int]  # per row: its index in `writers`


def reusable_rows(page: Sequence[StoredPoint]) -> ReusableRows:
    """The reusable rows of one page of a build: rows that cannot say what was embedded, or lack
    a vector, are left out; so is a hash already in the page."""
    hashes: list[str] = []
    rows: list[list[float]] = []
    name_rows: list[list[float]] = []
    writers: dict[tuple[str, str], int] = {}
    table: list[tuple[str, dict[str, Any]]] = []
    writer_of: list[int] = []
    seen: set[str] = set()
    for point in page:
        key = PointKey.from_payload(point.id, point.payload)
        if key is None or key.embed_hash in seen or not point.vector or not point.name_vector:
            continue
        seen.add(key.embed_hash)
        row = RowPayload.model_validate(point.payload)  # it loads: its key did
        slot = (row.provider, repr(sorted(row.encoder.items())))
        if slot not in writers:
            writers[slot] = len(table)
            table.append((row.provider, dict(row.encoder)))
        hashes.append(key.embed_hash)
        rows.append(point.vector)
        name_rows.append(point.name_vector)
        writer_of.append(writers[slot])
    width = len(rows[0]) if rows else 0
    vectors = np.asarray(rows, dtype=np.float32).reshape(len(rows), width)
    name_vectors = np.asarray(name_rows, dtype=np.float32).reshape(len(rows), width)
    return ReusableRows(hashes, vectors, name_vectors, table, writer_of)
