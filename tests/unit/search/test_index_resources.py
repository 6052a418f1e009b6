"""The index resources' content and changes: a summary per index from the recorded state, and which
URIs a change of that state touches (a build committed, started or failed: yes; a progress tick: no)."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.errors import SamespaceError
from cluster.index import BuildProgress, BuildState, IndexRecord
from cluster.ingest import SourceState
from cluster.search import (
    INDEXES_URI,
    BuildInfo,
    IndexInfo,
    IndexStatus,
    status_of_index,
    status_uri,
)
from cluster.search.index_resources import changes_between, summarize_status
from cluster.space import EncoderIdentity

IDENTITY = EncoderIdentity(model="m", weights_sha256="a" * 64, width=4, max_seq_length=256)


def record(name: str, build: str, commit: str | None = "c1", files: int = 3) -> IndexRecord:
    source = SourceState(vcs="git", commit=commit, branch="main") if commit else None
    return IndexRecord(
        name=name,
        build=build,
        repo_root="/r",
        identity=IDENTITY,
        started_at=1.0,
        built_at=2.0,
        files=files,
        source=source,
    )


def building(name: str, build: str, state: str = "building", done: int = 0, error: str | None = None) -> BuildState:
    progress = BuildProgress(files_done=done, files_total=10)
    return BuildState(index=name, build=build, state=state, started_at=3.0, progress=progress, error=error)


def status(records: list[IndexRecord], builds: list[BuildState]) -> dict[str, Any]:
    """The index actor's `status()` as it answers it."""
    return {
        "indexes": [{"record": r, "space": r.identity.space_id} for r in records],
        "builds": {b.index: b for b in builds},
        "history": {},
    }


def test_a_summary_names_the_serving_build_its_source_and_the_latest_build() -> None:
    shop, docs = record("shop", "shop__b1"), record("docs", "docs__b1", commit=None)
    summaries = summarize_status(status([shop, docs], [building("shop", "shop__b2"), building("fresh", "fresh__b1")]))
    assert [s.name for s in summaries] == ["docs", "fresh", "shop"]
    docs_s, fresh_s, shop_s = summaries
    assert (shop_s.build, shop_s.commit, shop_s.ref, shop_s.files) == ("shop__b1", "c1", "main", 3)
    assert (shop_s.latest_build, shop_s.latest_state, shop_s.status_uri) == ("shop__b2", "building", status_uri("shop"))
    assert (docs_s.commit, docs_s.latest_state) == (None, None)
    assert (fresh_s.build, fresh_s.latest_state) == (None, "building")  # only building so far: listed, no build


def test_nothing_changed_touches_nothing_and_a_progress_tick_is_no_change() -> None:
    before = summarize_status(status([record("shop", "shop__b1")], [building("shop", "shop__b2", done=1)]))
    after = summarize_status(status([record("shop", "shop__b1")], [building("shop", "shop__b2", done=9)]))
    assert changes_between(before, after).empty
    assert changes_between(before, before).empty


def test_a_committed_build_touches_its_status_and_the_list_but_not_another_index() -> None:
    before = summarize_status(status([record("shop", "shop__b1"), record("docs", "docs__b1")], []))
    after = summarize_status(status([record("shop", "shop__b2"), record("docs", "docs__b1")], []))
    changes = changes_between(before, after)
    assert changes.updated == [INDEXES_URI, status_uri("shop")] and not changes.list_changed
    assert (changes.moved, changes.came_or_went) == (["shop"], [])  # what a subscriber must be let read


@pytest.mark.parametrize(
    "later",
    [
        status([record("shop", "shop__b1")], [building("shop", "shop__b2")]),  # a build starts
        status([record("shop", "shop__b1")], [building("shop", "shop__b2", state="failed", error="boom")]),
        status([record("shop", "shop__b1", commit="c2")], []),  # the source moved, the build was current
    ],
)
def test_a_build_starting_or_failing_or_the_source_moving_touches_the_status(later: dict[str, Any]) -> None:
    before = summarize_status(status([record("shop", "shop__b1")], []))
    assert changes_between(before, summarize_status(later)).updated == [INDEXES_URI, status_uri("shop")]


def test_an_index_coming_or_going_changes_the_list() -> None:
    one = summarize_status(status([record("shop", "shop__b1")], []))
    two = summarize_status(status([record("shop", "shop__b1"), record("docs", "docs__b1")], []))
    added, removed = changes_between(one, two), changes_between(two, one)
    assert added.list_changed and added.updated == [INDEXES_URI, status_uri("docs")]
    assert removed.list_changed and removed.updated == [INDEXES_URI, status_uri("docs")]
    assert added.came_or_went == removed.came_or_went == added.moved == ["docs"]


def info(repo: str) -> IndexInfo:
    return IndexInfo(
        repo=repo,
        space="s",
        encoder={},
        points=1,
        files=1,
        built_at=1.0,
        build=f"{repo}__b1",
        repo_root="/r",
        folder="/r",
        source=None,
        staleness=None,
        embedded=1,
        reused=0,
        providers=[],
        skipped={},
    )


def build_info(repo: str) -> BuildInfo:
    return BuildInfo(
        repo=repo,
        build=f"{repo}__b2",
        state="building",
        job_id=None,
        started_at=1.0,
        files_done=0,
        files_total=1,
        chunks_done=0,
        chunks_total=1,
        chunks_per_s=0.0,
        eta_s=None,
        error=None,
    )


def test_an_index_status_keeps_only_that_index_and_an_unknown_one_is_refused() -> None:
    everything = IndexStatus(indexes=[info("shop"), info("shop2")], builds=[build_info("shop2"), build_info("new")])
    assert [i.repo for i in status_of_index(everything, "shop").indexes] == ["shop"]
    assert status_of_index(everything, "shop").builds == []
    assert [b.repo for b in status_of_index(everything, "new").builds] == ["new"]
    with pytest.raises(SamespaceError, match="no index named 'gone'"):
        status_of_index(everything, "gone")
