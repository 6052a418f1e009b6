"""Plan: which chunks keep a vector of the build planned against, and which are embedded.

The plan itself is `cluster.index.plan_reindex`'s. This module reads what it needs: the row keys of
the build to reuse from (the serving build, or for a new index a donor of the same folder and
space), and where each reusable embedded text lies in that build, so the write can name the rows
to carry (`cluster.index.carry_rows`) instead of moving their vectors.
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster.build.baseline import find_donor
from cluster.build.collect import RepoChunks
from cluster.build.ports import BuildEncoders, BuildIndex, Emit
from cluster.build.request import BuildTarget
from cluster.index import (
    IndexRecord,
    PlanMode,
    PointKey,
    ReindexPlan,
    embed_hash,
    full_reason,
    plan_reindex,
    point_key,
)

KEY_PAGE = 2048  # serving rows per page read (keys only)


@dataclass(frozen=True)
class BuildPlan:
    """A reindex's plan, with what the write needs to follow it."""

    plan: ReindexPlan
    hashes: list[str]  # per chunk: its embed hash
    base: IndexRecord | None  # the build whose vectors are reused: the serving one, or a donor's
    sources: dict[str, str]  # embed hash → the id of a row of `base` that embedded that text


def read_point_keys(index: BuildIndex, build: str) -> list[PointKey | None]:
    """Every row key of a build, page by page (queries interleave between pages)."""
    keys: list[PointKey | None] = []
    offset: str | None = None
    while True:
        page, offset = index.point_keys(build, offset, KEY_PAGE)
        keys.extend(page)
        if offset is None:
            return keys


def plan_base(
    index: BuildIndex,
    encoders: BuildEncoders,
    target: BuildTarget,
    serving: tuple[IndexRecord | None, bool],
    *,
    full: bool,
    emit: Emit,
) -> tuple[IndexRecord | None, bool]:
    """The build a plan reuses vectors from and whether the reference drifted from it: the serving
    one, or for a new index (unless `full`) a donor of the same folder and space. Known before the walk."""
    if serving[0] is not None or full:
        return serving
    return find_donor(index, encoders, target.name, str(target.folder), target.reference, emit)


def embeds_everything(target: BuildTarget, base: tuple[IndexRecord | None, bool], *, full: bool) -> bool:
    """Whether a build against `base` embeds every chunk it will find, whatever they are (no vector
    may be reused): then its texts may go to the encoders before the walk ends (`cluster.build.feed`)."""
    return full_reason(base[0], target.reference, full=full, reference_drifted=base[1]) is not None


def plan_build(
    index: BuildIndex,
    encoders: BuildEncoders,
    target: BuildTarget,
    found: RepoChunks,
    serving: tuple[IndexRecord | None, bool],
    *,
    full: bool,
    emit: Emit,
    reuse_from: tuple[IndexRecord | None, bool] | None = None,
) -> BuildPlan:
    """Plan the build of `found` against `serving` (the serving record and whether the reference
    drifted from it); a new index plans against a donor instead, unless `full`. `reuse_from`: the
    `plan_base` found before the walk."""
    name, reference = target.name, target.reference
    hashes = [embed_hash(chunk) for chunk in found.chunks]
    keys = [
        point_key(name, chunk, found.file_hashes[owner], hashed)
        for chunk, owner, hashed in zip(found.chunks, found.owners, hashes, strict=True)
    ]
    current = serving[0]
    base, base_drifted = reuse_from or plan_base(index, encoders, target, serving, full=full, emit=emit)
    base_keys = None
    if base is not None and full_reason(base, reference, full=full, reference_drifted=base_drifted) is None:
        base_keys = read_point_keys(index, base.build)
    plan = plan_reindex(
        keys,
        reference,
        serving=base,
        serving_keys=base_keys,
        repo_root=str(target.files_root),
        full=full,
        reference_drifted=base_drifted,
    )
    if base is not None and base is not current and plan.mode is PlanMode.INCREMENTAL:
        plan = plan.model_copy(
            update={"reason": f"new index, unchanged vectors of {base.name!r}", "removed_files": [], "dropped_rows": 0}
        )
    sources = {key.embed_hash: key.id for key in reversed(base_keys or []) if key is not None}  # the first row wins
    return BuildPlan(plan, hashes, base, sources)
