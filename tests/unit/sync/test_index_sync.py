"""cluster.sync: who may index what, when a registered index is reindexed, one build per index, and
the tickets and phases the management tools answer with (jobs and the index actor stand-ins here; the
e2e tests run the real ones)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.config import ConfigStore, IndexOrigin, IndexRegistration
from cluster.errors import IndexNotFound, PathRefused
from cluster.index import BuildProgress, BuildState, IndexRecord
from cluster.ingest import SourceState
from cluster.space import EncoderIdentity
from cluster.sync import BuildPhase, IndexManager, SyncWatch, confine, indexable_folder, phase_of
from tests.support.fakes.sync_jobs import FakeIndex, FakeJobs

ADMIN = IndexOrigin.ADMIN

IDENTITY = EncoderIdentity(model="m", weights_sha256="a" * 64, width=8, max_seq_length=256)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / "src" / "api").mkdir(parents=True)
    return home


def test_only_folders_inside_the_allowed_roots_may_be_indexed_from_mcp(home: Path, tmp_path: Path) -> None:
    root = home / "src"
    api = root / "api"
    assert confine(str(api), [root], home) == api.resolve()
    assert confine(str(root), [root], home) == root.resolve()
    with pytest.raises(PathRefused, match="no allowed roots are set") as refused:
        confine(str(api), [], home)
    assert "SAMESPACE_INDEX__ALLOWED_ROOTS" in str(refused.value)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for escape in (
        str(elsewhere),
        str(root / ".." / ".." / "elsewhere"),
        str(root / "api" / ".." / ".." / ".." / "elsewhere"),
    ):
        with pytest.raises(PathRefused, match="outside the allowed roots"):
            confine(escape, [root], home)
    (root / "link").symlink_to(elsewhere)  # a link inside the root pointing out of it
    with pytest.raises(PathRefused, match="outside the allowed roots"):
        confine(str(root / "link"), [root], home)
    linked_root = tmp_path / "linked-root"
    linked_root.symlink_to(root)  # a root that is itself a symlink counts as its target
    assert confine(str(api), [linked_root], home) == api.resolve()
    with pytest.raises(PathRefused, match="outside the allowed roots"):  # lexically outside: refused unread
        confine(str(linked_root / "api"), [root], home)


def test_some_folders_are_never_indexed_whoever_asks(home: Path) -> None:
    cases = {
        "/": "file system's root",
        str(home / ".ssh"): "is or holds",
        str(home): "a home folder as a whole",
        "/etc": "is or holds",
        "relative/path": "not an absolute path",
        str(home / "missing"): "does not exist",
    }
    for path, reason in cases.items():
        with pytest.raises(PathRefused, match=reason):
            indexable_folder(path, home)
        with pytest.raises(PathRefused):
            confine(path, [Path("/")], home)  # even under a root that holds everything
    (home / "src" / "file.py").write_text("x = 1\n")
    with pytest.raises(PathRefused, match="not a folder"):
        indexable_folder(str(home / "src" / "file.py"), home)


def registration(signature: str | None = "s0") -> IndexRegistration:
    return IndexRegistration(name="api", folder="/src/api", registered_at=0.0, signature=signature)


def test_a_change_is_reindexed_once_it_has_settled() -> None:
    watch = SyncWatch(debounce_s=5.0)
    built = registration("s0")
    assert not watch.due(built, "s0", 0.0)  # what was built: nothing to do
    assert not watch.due(built, "s1", 10.0)  # a change: wait for it to settle
    assert not watch.due(built, "s2", 12.0)  # still changing: the wait starts again
    assert not watch.due(built, "s2", 16.9)
    assert watch.due(built, "s2", 17.0)
    assert not watch.due(built, "s0", 18.0)  # changed back before it was built: nothing to do
    assert SyncWatch(debounce_s=0).due(built, "s1", 0.0)


def state(build: str, phase: str) -> BuildState:
    return BuildState(index="api", build=build, state=phase, started_at=0.0)


def test_the_phase_of_a_build_comes_from_its_job_and_the_index_actor() -> None:
    assert phase_of("PENDING", None, "b1") is BuildPhase.STARTING
    assert phase_of("RUNNING", state("b0", "committed"), "b1") is BuildPhase.STARTING  # an older build's state
    assert phase_of("RUNNING", state("b1", "building"), "b1") is BuildPhase.BUILDING
    assert phase_of("RUNNING", state("b1", "committed"), "b1") is BuildPhase.COMMITTED  # the job lingers
    assert phase_of("SUCCEEDED", None, "b1") is BuildPhase.UP_TO_DATE  # nothing changed: no build made
    assert phase_of("FAILED", None, "b1") is BuildPhase.FAILED
    assert phase_of("RUNNING", state("b1", "failed"), "b1") is BuildPhase.FAILED


def manager(tmp_path: Path, signatures: dict[str, str]) -> tuple[IndexManager, FakeJobs, FakeIndex, list[float]]:
    jobs, index, now = FakeJobs(), FakeIndex(), [1_700_000_000.0]
    store = ConfigStore(tmp_path / "config.json")
    made = IndexManager(
        jobs,
        index,
        store,
        debounce_s=2.0,
        clock=lambda: now[0],
        roots=[],
        home=tmp_path / "home",
        signature=lambda folder, ref: signatures[folder],
    )
    return made, jobs, index, now


def test_one_build_per_index_a_second_request_joins_it(tmp_path: Path) -> None:
    signatures = {"/src/api": "s0"}
    made, jobs, index, _ = manager(tmp_path, signatures)
    first = made.request("/src/api", "api", ref=None, full=False, origin=ADMIN)
    argv, job_id = jobs.submitted[0]
    assert argv == ["--repo", "/src/api", "--name", "api", "--build-id", first.ticket.build]
    assert job_id == f"samespace-{first.ticket.build}" == first.ticket.job_id
    assert (first.phase, first.done, first.joined) == (BuildPhase.STARTING, False, False)
    jobs.states[job_id] = "RUNNING"
    index.states["api"] = state(first.ticket.build, "building").model_copy(
        update={"progress": BuildProgress(chunks_done=5, chunks_total=10)}
    )
    second = made.request("/src/api", "api", ref=None, full=True, origin=ADMIN)
    assert second.joined and second.ticket == first.ticket and len(jobs.submitted) == 1
    assert second.phase is BuildPhase.BUILDING and second.progress is not None and second.progress.chunks_done == 5
    index.states["api"] = state(first.ticket.build, "committed")  # committed; the job has not exited yet
    third = made.request("/src/api", "api", ref="main", full=False, origin=ADMIN)
    assert not third.joined and len(jobs.submitted) == 2
    assert jobs.submitted[1][0][-2:] == ["--ref", "main"]
    stored = ConfigStore(tmp_path / "config.json").read_indexes()["api"]  # durable, for a restart
    assert (stored.folder, stored.ref, stored.signature) == ("/src/api", "main", "s0")


def test_a_sync_pass_reindexes_a_settled_change_and_nothing_else(tmp_path: Path) -> None:
    signatures = {"/src/api": "s0", "/src/web": "w0"}
    made, jobs, _, now = manager(tmp_path, signatures)
    for folder, name in (("/src/api", "api"), ("/src/web", "web")):
        made.request(folder, name, origin=ADMIN)
    for job in jobs.states:
        jobs.states[job] = "SUCCEEDED"
    assert made.sync_once() == []  # nothing changed
    signatures["/src/api"] = "s1"
    assert made.sync_once() == []  # changed, not settled yet
    now[0] += 2.5
    started = made.sync_once()
    assert [r.ticket.index for r in started] == ["api"] and started[0].ticket.reason == "sync"
    now[0] += 5
    assert made.sync_once() == []  # its build runs: not again
    jobs.states[started[0].ticket.job_id] = "SUCCEEDED"
    assert made.sync_once() == []  # the build saw s1: up to date


def test_refresh_and_remove(tmp_path: Path) -> None:
    made, jobs, index, _ = manager(tmp_path, {"/src/api": "s0", "/old": "o0"})
    with pytest.raises(IndexNotFound):
        made.refresh("nothing", origin=ADMIN)
    index.indexed.append(  # indexed before registrations existed: its record says what it follows
        IndexRecord(
            name="old",
            build="old__b1",
            repo_root="/exports/old__b1",
            origin="/old",
            source=SourceState(vcs="git", commit="c" * 40, ref="v1"),
            identity=IDENTITY,
            started_at=0.0,
        )
    )
    report = made.refresh("old", origin=ADMIN)
    assert jobs.submitted[-1][0][:2] == ["--repo", "/old"] and jobs.submitted[-1][0][-2:] == ["--ref", "v1"]
    jobs.states[report.ticket.job_id] = "RUNNING"
    assert made.remove("old", origin=ADMIN) == ["old__b1"]
    assert jobs.stopped == [report.ticket.job_id] and "old" not in made.registrations()
    made.request("/src/api", "api", origin=ADMIN)  # registered, never built (its job failed)
    jobs.states[jobs.submitted[-1][1]] = "FAILED"
    assert made.report("api") is not None and made.report("api").phase is BuildPhase.FAILED  # type: ignore[union-attr]
    assert made.remove("api", origin=ADMIN) == [] and "api" not in made.registrations()
    with pytest.raises(IndexNotFound):
        made.remove("api", origin=ADMIN)
