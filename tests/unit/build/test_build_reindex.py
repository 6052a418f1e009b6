"""The reindex pipeline on fake ports (no Ray): a first build, nothing to do, an edit, a branch after
its base, the shrink check, a failure midway, a new encoder, a missing cloud key."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cluster.build import BuildPorts, BuildRequest, Reindex
from cluster.errors import CloudKeyMissing, NoProviderLeft, ShrinkRefused
from cluster.index import embed_hash
from cluster.settings import SamespaceSettings
from cluster.space import embedding_text
from cluster.types import Chunk, PayloadFilter
from tests.support.fakes.build_ports import IDENTITY, CatalogIndex, HashEncoders, Run, fake_ports, text_vector
from tests.support.fakes.repos import TOPICS, function_repo

FILES, FUNCTIONS = 4, 6  # one chunk per function


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return function_repo(tmp_path / "shop", FILES, FUNCTIONS)


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path)


def test_a_first_build_embeds_every_chunk_and_commits_after_its_last_write(run: Run, repo: Path) -> None:
    record = run(repo)
    assert record.chunks == FILES * FUNCTIONS and record.files == FILES and record.embedded == FILES * FUNCTIONS
    assert record.providers == ["p0"] and record.identity == IDENTITY
    assert len(run.encoders.embedded) == 2 * FILES * FUNCTIONS  # a code text and a name text per chunk
    methods = run.methods()
    assert methods[0] == "begin_build" and methods[-3:] == ["wait", "index_vectors", "commit_build"]
    assert run.index.calls[0] == ("begin_build", 24)  # the rows it will write: a small build is pooled
    assert "plan: full (no serving index): reused 0, embedding 24; 4 files to embed" in run.lines
    assert f"committed 'shop': 24 chunks from 4 files, build {record.build}" in run.lines
    assert "embedded 24, reused 0; served by: p0=24" in run.lines
    assert run.lines[-4].startswith("progress: files 4/4 chunks 24/24 (100.0%)")
    assert run.lines[-1].startswith("stages: total ")  # where the time went, last
    assert run.index.progress[-1].chunks_done == 24


def test_a_rerun_with_nothing_changed_makes_no_build(run: Run, repo: Path) -> None:
    first = run(repo)
    again = run(repo)
    assert again.build == first.build
    assert "up to date: 24 chunks, nothing to embed" in run.lines
    assert run.encoders.embedded == [] and "begin_build" not in run.methods()


def test_an_edit_embeds_only_the_changed_chunk_and_carries_the_rest_inside_the_index(run: Run, repo: Path) -> None:
    first = run(repo)
    path = repo / f"{TOPICS[1]}_1.py"
    path.write_text(path.read_text().replace("* 2", "* 20", 1))
    second = run(repo)
    assert second.build != first.build and second.embedded == 1 and second.reused == 23 and second.chunks == 24
    assert len(run.encoders.embedded) == 2  # the changed chunk's code text and name text, nothing else
    assert ("carry_rows", 23) in run.index.calls
    assert "plan: incremental (sources changed): reused 23, embedding 1; 1 files to embed" in run.lines
    assert "reused vectors written by: p0=23" in run.lines
    assert any(line.startswith("progress: files 4/4 chunks 24/24 (reused 23)") for line in run.lines)
    rows = run.index.catalog.scroll("shop", PayloadFilter(), 100)
    for point in run.index.catalog.points(second.build, [row.id for row in rows]):
        assert np.allclose(point.vector, text_vector(embedded_text(point.payload)), atol=1e-6)
        assert point.payload["build"] == second.build


def test_a_new_index_of_the_same_folder_reuses_the_vectors_of_the_latest_one(run: Run, repo: Path) -> None:
    run(repo, "base")
    branch = run(repo, "base.feature")
    assert "reusing unchanged vectors of index 'base' (same folder, same space)" in run.lines
    assert any(line.startswith("plan: incremental (new index, unchanged vectors of 'base')") for line in run.lines)
    assert branch.reused == 24 and branch.embedded == 0 and run.encoders.embedded == []
    with_full = run(repo, "other", full=True)
    assert with_full.embedded == 24 and not any("reusing" in line for line in run.lines)


def test_a_build_that_would_drop_most_files_is_refused_unless_allowed(run: Run, repo: Path) -> None:
    first = run(repo)
    for path in sorted(repo.glob("*.py"))[1:]:
        path.unlink()
    with pytest.raises(ShrinkRefused, match="from 4 to 1 files"):
        run(repo)
    assert "begin_build" not in run.methods() and run.index.record("shop") == first
    shrunk = run(repo, allow_shrink=True)
    assert shrunk.files == 1 and shrunk.reused == FUNCTIONS and shrunk.embedded == 0


def test_a_failure_midway_drops_the_build_and_the_previous_one_keeps_serving(tmp_path: Path, repo: Path) -> None:
    run = Run(tmp_path, fake_ports(encoders=HashEncoders(fail_after=2)))
    with pytest.raises(NoProviderLeft):
        run(repo)
    assert run.methods()[-1] == "fail_build" and run.index.record("shop") is None
    assert run.lines[-1].endswith("failed; the previous index keeps serving")

    healthy = Run(tmp_path)
    first = healthy(repo)
    healthy.ports = fake_ports(healthy.index, HashEncoders(fail_after=1))
    healthy.reindex = Reindex(healthy.ports, healthy.settings, healthy.lines.append)
    with pytest.raises(NoProviderLeft):
        healthy(repo, full=True)
    assert healthy.index.record("shop") == first and healthy.index.catalog.collections() == [first.build]


def test_a_new_encoder_space_embeds_everything_again(tmp_path: Path, repo: Path) -> None:
    run = Run(tmp_path)
    run(repo)
    other = IDENTITY.model_copy(update={"weights_sha256": "b" * 64})
    moved = Run(tmp_path, fake_ports(run.index, HashEncoders(identity=other)))
    record = moved(repo)
    assert record.identity == other and record.embedded == 24 and record.reused == 0
    assert any(line.startswith("plan: full (encoder space changed") for line in moved.lines)


def test_a_cloud_policy_without_its_key_stops_before_anything_is_read(tmp_path: Path, repo: Path) -> None:
    ports = BuildPorts(index=CatalogIndex(), encoders=HashEncoders(), key_problem=lambda: "push the key")
    settings = SamespaceSettings(store={"data_dir": tmp_path / "data"}, cloud={"enabled": True, "key_wait_s": 0})
    with pytest.raises(CloudKeyMissing, match="push the key"):
        Reindex(ports, settings, lambda line: None).run(BuildRequest(repo=repo, name="shop"))
    assert ports.index.calls == []  # type: ignore[attr-defined]


def embedded_text(payload: dict[str, object]) -> str:
    """The code text a stored row's vector was embedded from (its chunk, read back from the payload)."""
    fields = {k: payload[k] for k in ("path", "start_line", "end_line", "language", "symbol", "kind", "text")}
    chunk = Chunk.model_validate(fields)
    assert embed_hash(chunk) == payload["embed_hash"]
    return embedding_text(chunk)
