"""The reindex pipeline as a domain object: collect → shrink check → plan → embed and write → commit,
written against Protocols (`BuildIndex`, `BuildEncoders`) so the job runs it with actors and a unit
test with fakes."""

from __future__ import annotations

from cluster.build.baseline import await_reference
from cluster.build.collect import RepoChunks, collect_chunks, collect_repository, report_skips
from cluster.build.ports import BUILD_ROLE, BuildEncoders, BuildIndex, BuildPorts, Emit
from cluster.build.reindexing import Reindex
from cluster.build.request import BuildRequest, BuildTarget
from cluster.build.shrink import check_shrink
from cluster.build.stages import Stage, StageTimes, parse_stage_line

__all__ = [
    "BUILD_ROLE",
    "BuildEncoders",
    "BuildIndex",
    "BuildPorts",
    "BuildRequest",
    "BuildTarget",
    "Emit",
    "Reindex",
    "RepoChunks",
    "Stage",
    "StageTimes",
    "await_reference",
    "check_shrink",
    "collect_chunks",
    "collect_repository",
    "parse_stage_line",
    "report_skips",
]
