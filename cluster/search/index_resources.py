"""What the index resources hold and when they change: the list of indexes (`samespace://indexes`),
one index's status (`samespace://index/{name}/status`), and which of their URIs a change of the
recorded state touches.

An index's summary is read from the index actor's recorded state alone (no git, no staleness), so
comparing two of them is cheap: a summary differs when the serving build, its source (commit, ref,
dirtiness) or its counts change, or when the latest build of the index starts, commits or fails.
A build's progress and the folder's staleness are read with the status, never compared: a
subscriber is told that the index moved, not each tick of a build.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from cluster.errors import SamespaceError
from cluster.index import BuildState, IndexRecord
from cluster.search.resource_uris import FILE_TEMPLATE, INDEXES_URI, STATUS_TEMPLATE, status_uri
from cluster.search.status import IndexStatus
from cluster.types import Strict

__all__ = ["IndexList", "IndexSummary", "ResourceChanges", "changes_between", "status_of_index", "summarize_status"]


class IndexSummary(Strict):
    """One index as `samespace://indexes` lists it (and as a status change is detected)."""

    name: str
    status_uri: str
    build: str | None = Field(description="The serving build (None: the first build has not committed yet).")
    built_at: float | None = None
    files: int = 0
    points: int = 0
    commit: str | None = Field(default=None, description="The commit the serving build's files were at.")
    ref: str | None = Field(default=None, description="The ref a ref build indexed, or the branch checked out then.")
    dirty: bool = False
    latest_build: str | None = Field(default=None, description="The latest build of the index this cluster has seen.")
    latest_state: str | None = Field(default=None, description="Its state: building, committed or failed.")
    error: str | None = Field(default=None, description="Why the latest build failed.")


class IndexList(Strict):
    """The content of `samespace://indexes`."""

    indexes: list[IndexSummary]
    status_template: str = STATUS_TEMPLATE
    file_template: str = FILE_TEMPLATE


class ResourceChanges(Strict):
    """The resources a change of the recorded state touched, and the indexes each change concerns (a
    subscriber hears only of changes to indexes it may read)."""

    updated: list[str] = Field(default_factory=list, description="URIs whose content changed.")
    list_changed: bool = Field(default=False, description="An index came or went: resources/list changed.")
    moved: list[str] = Field(default_factory=list, description="The indexes whose summary changed.")
    came_or_went: list[str] = Field(default_factory=list, description="The indexes that came or went.")

    @property
    def empty(self) -> bool:
        return not self.updated and not self.list_changed


def summarize_status(status: Mapping[str, Any]) -> list[IndexSummary]:
    """Every index the index actor's `status()` knows (served, or only building so far), by name."""
    records: dict[str, IndexRecord] = {entry["record"].name: entry["record"] for entry in status.get("indexes", [])}
    builds: dict[str, BuildState] = {state.index: state for state in status.get("builds", {}).values()}
    return [_summary(name, records.get(name), builds.get(name)) for name in sorted(records.keys() | builds.keys())]


def _summary(name: str, record: IndexRecord | None, latest: BuildState | None) -> IndexSummary:
    source = record.source if record is not None else None
    return IndexSummary(
        name=name,
        status_uri=status_uri(name),
        build=record.build if record is not None else None,
        built_at=record.built_at if record is not None else None,
        files=record.files if record is not None else 0,
        points=record.chunks if record is not None else 0,
        commit=source.commit if source is not None else None,
        ref=(source.ref or source.branch) if source is not None else None,
        dirty=source.dirty if source is not None else False,
        latest_build=latest.build if latest is not None else None,
        latest_state=latest.state if latest is not None else None,
        error=latest.error if latest is not None else None,
    )


def changes_between(before: Sequence[IndexSummary], after: Sequence[IndexSummary]) -> ResourceChanges:
    """The URIs whose content differs from `before` to `after`: each index whose summary changed
    (its status), and the list of indexes when any did; `list_changed` when an index came or went."""
    old = {summary.name: summary for summary in before}
    new = {summary.name: summary for summary in after}
    moved = [name for name in sorted(old.keys() | new.keys()) if old.get(name) != new.get(name)]
    came_or_went = sorted(old.keys() ^ new.keys())
    return ResourceChanges(
        updated=[INDEXES_URI, *map(status_uri, moved)] if moved else [],
        list_changed=bool(came_or_went),
        moved=moved,
        came_or_went=came_or_went,
    )


def status_of_index(status: IndexStatus, name: str) -> IndexStatus:
    """The part of `status` that is index `name`'s (its record and its builds); SamespaceError when
    it holds neither (no index of that name is served or building)."""
    mine = IndexStatus(
        indexes=[info for info in status.indexes if info.repo == name],
        builds=[build for build in status.builds if build.repo == name],
    )
    if not mine.indexes and not mine.builds:
        raise SamespaceError(f"no index named {name!r} is served or building (see {INDEXES_URI})")
    return mine
