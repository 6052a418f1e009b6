"""The write loop and its plan: reused rows carried a page at a time, embedded rows written as their
two vectors land with a bounded number of writes in flight, rows that vanished since the plan
embedded after the rest, and the commit only once every write landed."""

from __future__ import annotations

from pathlib import Path

import pytest

import cluster.build.reindexing as reindexing
from cluster.build.collect import collect_repository
from cluster.build.planning import KEY_PAGE, BuildPlan, plan_build
from cluster.build.request import BuildTarget
from cluster.build.writer import REUSE_BATCH, WRITES_IN_FLIGHT
from cluster.errors import StoreError
from cluster.index import PlanMode
from cluster.settings import SamespaceSettings
from tests.support.fakes.build_ports import IDENTITY, CatalogIndex, HashEncoders, Run, fake_ports
from tests.support.fakes.repos import function_repo


def writes_between_waits(calls: list[tuple[str, int]]) -> list[int]:
    runs, current = [], 0
    for method, _ in calls:
        if method == "write":
            current += 1
        elif method == "wait":
            runs.append(current)
            current = 0
    return [*runs, current]


def test_at_most_four_writes_are_in_flight_and_all_land_before_the_commit(tmp_path: Path) -> None:
    run = Run(tmp_path, fake_ports(encoders=HashEncoders(batch=3, providers=("p0", "p1"))))
    record = run(function_repo(tmp_path / "shop", 10, 6))
    assert record.chunks == 60 and sorted(record.providers) == ["p0", "p1"]
    assert max(writes_between_waits(run.index.calls)) == WRITES_IN_FLIGHT
    assert sum(rows for method, rows in run.index.calls if method == "write") == 60
    assert run.methods()[-1] == "commit_build" and run.index.outstanding == 0


def test_a_failed_write_fails_the_build_before_anything_commits(tmp_path: Path) -> None:

    run = Run(tmp_path, fake_ports(index=CatalogIndex(fail_wait_at=1)))
    with pytest.raises(StoreError, match="the disk is full"):
        run(function_repo(tmp_path / "shop", 10, 6))
    assert "commit_build" not in run.methods() and run.methods()[-1] == "fail_build"
    assert run.index.record("shop") is None


def test_reused_rows_are_carried_a_page_at_a_time(tmp_path: Path) -> None:
    run = Run(tmp_path)
    repo = function_repo(tmp_path / "big", 30, 10)
    run(repo)
    (repo / "extra.py").write_text("def extra():\n    return 0\n")
    record = run(repo)
    assert [rows for method, rows in run.index.calls if method == "carry_rows"] == [REUSE_BATCH, 300 - REUSE_BATCH]
    assert record.reused == 300 and record.embedded == 1 and record.chunks == 301
    carried = run.methods().index("carry_rows")
    assert run.methods()[:carried] == ["point_keys", "begin_build"]  # the encoders were started before it


def test_rows_that_vanished_since_the_plan_are_embedded_after_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = Run(tmp_path)
    repo = function_repo(tmp_path / "shop", 4, 6)
    first = run(repo)
    path = repo / "invoice_0.py"
    path.write_text(path.read_text().replace("* 2", "* 20", 1))
    real = reindexing.plan_build

    def losing_three(*args: object, **kwargs: object) -> BuildPlan:
        plan = real(*args, **kwargs)  # type: ignore[arg-type]
        lost = [plan.hashes[row] for row in plan.plan.reuse[:3]]
        sources = {**plan.sources, **dict.fromkeys(lost, "00000000-0000-0000-0000-000000000000")}
        return BuildPlan(plan.plan, plan.hashes, plan.base, sources)

    monkeypatch.setattr(reindexing, "plan_build", losing_three)
    record = run(repo)
    assert f"3 rows vanished from {first.build}: reused 20, embedding 4" in run.lines
    assert run.encoders.streams == 1 + 2 and len(run.encoders.embedded) == 2 * 4  # the edited row, then the 3 lost
    assert "* 20" in run.encoders.embedded[0]  # the edited row's stream came first
    assert record.chunks == 24 and record.embedded == 4 and record.reused == 20


def test_the_plan_reads_keys_page_by_page_and_names_a_base_row_for_every_reused_text(tmp_path: Path) -> None:
    run = Run(tmp_path)
    repo = function_repo(tmp_path / "shop", 4, 6)
    first = run(repo)
    found = collect_repository(repo, SamespaceSettings())
    target = BuildTarget("shop", "shop__b2", IDENTITY, repo, repo)
    serving = (run.index.record("shop"), False)
    plan = plan_build(run.index, run.encoders, target, found, serving, full=False, emit=run.lines.append)
    assert plan.plan.mode is PlanMode.UP_TO_DATE and plan.base == first
    assert run.index.calls[-1] == ("point_keys", KEY_PAGE)
    ids = {key.embed_hash: key.id for key in run.index.catalog.point_keys(first.build, None, 100)[0] if key}
    assert plan.sources == ids and set(plan.hashes) == set(ids)
    full = plan_build(run.index, run.encoders, target, found, serving, full=True, emit=run.lines.append)
    assert full.plan.mode is PlanMode.FULL and full.sources == {} and len(full.plan.embed) == 24
