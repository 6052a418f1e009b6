"""The early feed: a build that embeds every chunk sends them to the encoders while it walks, in
segments that double; the rows are still written after `begin_build`; every segment is closed when
the build stops short. And the stage line that says where a build's time went."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import cluster.build.feed as feed
from cluster.build import BuildRequest, Reindex, Stage, StageTimes, parse_stage_line
from cluster.cloud import Priority
from cluster.errors import NoProviderLeft, ShrinkRefused
from cluster.index import name_text
from cluster.routing import LandedBatch
from cluster.space import embedding_text
from cluster.types import Chunk, PayloadFilter
from tests.support.fakes.build_ports import CatalogIndex, HashEncoders, Run, fake_ports, text_vector
from tests.support.fakes.repos import function_repo


class Closing:
    """A fake stream that counts its `close` in its encoders."""

    def __init__(self, stream: Iterator[LandedBatch], encoders: LoggedEncoders) -> None:
        self._stream = stream
        self._encoders = encoders

    def __iter__(self) -> Iterator[LandedBatch]:
        return self

    def __next__(self) -> LandedBatch:
        return next(self._stream)

    def close(self) -> None:
        self._encoders.closed += 1


@dataclass
class LoggedEncoders(HashEncoders):
    """HashEncoders whose stream starts are logged among the index's calls, and whose closes are counted."""

    log: list[tuple[str, int]] = field(default_factory=list)
    closed: int = 0

    def embed_stream(self, texts: list[str], project: str, priority: Priority) -> Closing:
        self.log.append(("embed_stream", len(texts)))
        return Closing(super().embed_stream(texts, project, priority), self)


def logged_run(tmp_path: Path, **encoders: object) -> tuple[Run, LoggedEncoders]:
    index = CatalogIndex()
    logged = LoggedEncoders(log=index.calls, **encoders)  # type: ignore[arg-type]
    return Run(tmp_path, fake_ports(index, logged)), logged


def streams(calls: list[tuple[str, int]]) -> tuple[list[int], list[int]]:
    """Texts per stream started before `begin_build`, and after it."""
    begin = [method for method, _ in calls].index("begin_build")
    before = [n for method, n in calls[:begin] if method == "embed_stream"]
    return before, [n for method, n in calls[begin:] if method == "embed_stream"]


def code_text(payload: dict[str, object]) -> str:
    fields = {k: payload[k] for k in ("path", "start_line", "end_line", "language", "symbol", "kind", "text")}
    return embedding_text(Chunk.model_validate(fields))


@pytest.fixture(autouse=True)
def early_rows(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(feed, "EARLY_ROWS", 10)
    return 10


def test_a_first_build_sends_its_chunks_during_the_walk_in_doubling_segments(tmp_path: Path) -> None:
    run, encoders = logged_run(tmp_path)
    record = run(function_repo(tmp_path / "shop", 6, 6))  # 6 chunks a file, 36 in all
    # 12 chunks collected (>= 10): sent; 12 more (>= the 12 sent): sent; the last 12 go with the writer
    assert streams(run.index.calls) == ([24, 24], [24])  # two texts a chunk
    assert "embedding began during the walk: 24 of 36 chunks sent in 2 segments" in run.lines
    assert record.embedded == 36 and record.chunks == 36 and encoders.closed == 0
    rows = run.index.catalog.scroll("shop", PayloadFilter(), 100)
    assert len(rows) == 36
    for point in run.index.catalog.points(record.build, [row.id for row in rows]):  # each row its own vectors
        assert np.allclose(point.vector, text_vector(code_text(point.payload)), atol=1e-6)
        chunk = Chunk.model_validate(
            {k: point.payload[k] for k in ("path", "start_line", "end_line", "language", "symbol", "kind", "text")}
        )
        assert np.allclose(point.name_vector, text_vector(name_text(chunk)), atol=1e-6)
    assert run.methods()[-1] == "commit_build" and run.index.outstanding == 0


def test_a_walk_that_collects_every_chunk_early_leaves_the_writer_nothing_to_send(tmp_path: Path) -> None:
    run, _ = logged_run(tmp_path)
    record = run(function_repo(tmp_path / "shop", 4, 6))  # sent at 12 and at 24
    assert streams(run.index.calls) == ([24, 24], [])
    assert record.embedded == 24


def test_a_build_that_may_reuse_vectors_sends_nothing_before_its_plan(tmp_path: Path) -> None:
    run, _ = logged_run(tmp_path)
    repo = function_repo(tmp_path / "shop", 6, 6)
    run(repo)
    path = sorted(repo.glob("*.py"))[1]
    path.write_text(path.read_text().replace("* 2", "* 20", 1))
    edited = run(repo)
    assert streams(run.index.calls) == ([], [2]) and edited.embedded == 1
    assert not any(line.startswith("embedding began") for line in run.lines)
    branch = run(repo, "shop.feature")  # a new index reuses the vectors of the folder's other one
    assert branch.reused == 36 and "embed_stream" not in run.methods()
    again = run(repo, full=True)  # --full: nothing may be reused, so the walk feeds the encoders
    assert streams(run.index.calls)[0] == [24, 24] and again.embedded == 36


def test_a_refused_shrink_closes_what_the_walk_sent(tmp_path: Path) -> None:
    run, encoders = logged_run(tmp_path)
    repo = function_repo(tmp_path / "shop", 4, 12)
    first = run(repo)
    for path in sorted(repo.glob("*.py"))[1:]:
        path.unlink()
    with pytest.raises(ShrinkRefused):
        run(repo, full=True)
    assert [method for method, _ in run.index.calls] == ["embed_stream"]  # sent during the walk, then refused
    assert encoders.closed == 1 and run.index.record("shop") == first


def test_a_failure_midway_closes_every_segment(tmp_path: Path) -> None:
    run, encoders = logged_run(tmp_path, fail_after=1)
    with pytest.raises(NoProviderLeft):
        run(function_repo(tmp_path / "shop", 6, 6))
    assert encoders.closed == 3  # both early segments and the writer's own
    assert run.methods()[-1] == "fail_build" and run.index.record("shop") is None


def test_the_last_line_says_where_the_time_went_and_counts_no_second_twice(tmp_path: Path) -> None:
    ticks = iter(range(1_000_000))
    lines: list[str] = []
    reindex = Reindex(fake_ports(), Run(tmp_path).settings, lines.append, timer=lambda: float(next(ticks)))
    reindex.run(BuildRequest(repo=function_repo(tmp_path / "shop", 6, 6), name="shop"))
    stages = parse_stage_line(lines[-1])
    assert set(stages) == {"total"} | {stage.value for stage in Stage} - {"carry"}  # a first build reuses nothing
    assert all(seconds > 0 for seconds in stages.values())
    assert sum(seconds for name, seconds in stages.items() if name != "total") <= stages["total"]


def test_stage_times_count_only_the_time_spent_in_each_stage() -> None:
    now = [0.0]
    stages = StageTimes(lambda: now[0])

    def produce() -> Iterator[int]:
        for i in range(3):
            now[0] += 2.0  # producing an item: the stage's
            yield i

    for _ in stages.timed(Stage.ENCODE, produce()):
        with stages.timing(Stage.ROWS):
            now[0] += 1.0
        now[0] += 10.0  # the consumer's own time: in no stage
    assert stages.seconds == {Stage.ENCODE: 6.0, Stage.ROWS: 3.0}
    line = stages.line()
    assert line == "stages: total 39.00s; encode 6.00s, rows 3.00s"
    assert parse_stage_line(line) == {"total": 39.0, "encode": 6.0, "rows": 3.0}
    assert parse_stage_line("progress: files 1/2") == {}
