"""Who may take, refresh and remove an index name (cluster/sync/claims.py through the manager): a name is
bound to the folder and ref that registered it, an MCP client reaches only indexes inside the allowed
roots, every build of an index an MCP client registered is confined again, and the caps on builds and
registrations. Ray's job API and the index actor are stand-ins; the folders are real (confinement
resolves them)."""

from __future__ import annotations

import asyncio
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cluster.auth import Principal, acting_as
from cluster.config import ConfigStore, IndexOrigin, IndexRegistration
from cluster.errors import IndexNotFound, IndexRefused, LimitExceeded, SamespaceError
from cluster.index import IndexRecord, validate_index_name
from cluster.settings import LimitsSettings, SamespaceSettings
from cluster.space import EncoderIdentity
from cluster.sync import CLUSTER_CALLER, IndexCaller, IndexManager
from serve_apps.index_service import IndexService
from tests.support.fakes.sync_jobs import FakeIndex, FakeJobs

MCP, ADMIN = IndexOrigin.MCP, IndexOrigin.ADMIN
IDENTITY = EncoderIdentity(model="m", weights_sha256="a" * 64, width=8, max_seq_length=256)


@dataclass
class Tree:
    home: Path
    root: Path  # the allowed root
    api: str  # folders inside it
    web: str
    outside: str  # a folder outside it (the admin's)


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    home = tmp_path / "home"
    root = home / "src"
    for folder in (root / "api", root / "web", tmp_path / "elsewhere" / "payments"):
        folder.mkdir(parents=True)
    real = root.resolve()
    return Tree(home, root, str(real / "api"), str(real / "web"), str((tmp_path / "elsewhere" / "payments").resolve()))


@dataclass
class Harness:
    manager: IndexManager
    jobs: FakeJobs
    index: FakeIndex
    store: ConfigStore
    signatures: dict[str, str]
    now: list[float]

    def argv(self) -> list[str]:
        return self.jobs.submitted[-1][0]


def harness(tmp_path: Path, tree: Tree, roots: list[Path] | None = None, **caps: Any) -> Harness:
    jobs, index, now = FakeJobs(), FakeIndex(), [1_700_000_000.0]
    signatures: dict[str, str] = {}
    store = ConfigStore(tmp_path / "config.json")
    made = IndexManager(
        jobs,
        index,
        store,
        debounce_s=2.0,
        clock=lambda: now[0],
        roots=[tree.root] if roots is None else roots,
        home=tree.home,
        limits=LimitsSettings(**caps),
        signature=lambda folder, ref: signatures.get(folder, "s0"),
    )
    return Harness(made, jobs, index, store, signatures, now)


def record(name: str, folder: str) -> IndexRecord:
    return IndexRecord(name=name, build=f"{name}__b1", repo_root=folder, identity=IDENTITY, started_at=0.0)


def test_an_mcp_client_cannot_take_a_name_registered_or_built_for_another_folder(tmp_path: Path, tree: Tree) -> None:
    h = harness(tmp_path, tree)
    h.manager.request(tree.outside, "payments", origin=ADMIN)  # the admin's, outside the roots
    h.jobs.finish_all()
    with pytest.raises(IndexRefused) as taken:
        h.manager.request(tree.api, "payments", origin=MCP)
    message = str(taken.value)
    assert "'payments'" in message and "name is taken" in message
    assert tree.outside not in message and "elsewhere" not in message  # never says whose folder it is
    assert h.store.read_indexes()["payments"].folder == tree.outside and len(h.jobs.submitted) == 1

    h.index.indexed.append(record("billing", tree.outside))  # built (by the CLI), never registered
    with pytest.raises(IndexRefused, match="name is taken"):
        h.manager.request(tree.api, "billing", origin=MCP)

    h.manager.request(tree.api, "api", origin=MCP)
    h.jobs.finish_all()
    with pytest.raises(IndexRefused, match="name is taken"):
        h.manager.request(tree.web, "api", origin=MCP)  # another folder
    with pytest.raises(IndexRefused, match="name is taken"):
        h.manager.request(tree.api, "api", ref="main", origin=MCP)  # the same folder at another ref
    again = h.manager.request(tree.api, "api", origin=MCP)  # its own folder again: a new build
    assert not again.joined and len(h.jobs.submitted) == 3


def test_a_running_build_under_a_taken_name_is_not_joined_or_shown(tmp_path: Path, tree: Tree) -> None:
    h = harness(tmp_path, tree)
    h.manager.request(tree.outside, "payments", origin=ADMIN)  # still running
    with pytest.raises(IndexRefused, match="name is taken"):
        h.manager.request(tree.api, "payments", origin=MCP)  # joining would hand back its ticket (and folder)


def test_the_admin_api_may_repoint_a_name_and_the_registration_records_who_made_it(tmp_path: Path, tree: Tree) -> None:
    h = harness(tmp_path, tree)
    h.manager.request(tree.api, "api", origin=MCP)
    assert h.store.read_indexes()["api"].origin is MCP and "--confined" in h.argv()
    h.jobs.finish_all()
    h.manager.request(tree.outside, "api", origin=ADMIN)  # the admin re-points it, outside the roots
    repointed = h.store.read_indexes()["api"]
    assert (repointed.folder, repointed.origin) == (tree.outside, ADMIN) and "--confined" not in h.argv()
    h.jobs.finish_all()
    h.manager.request(tree.web, "web", origin=ADMIN)
    h.jobs.finish_all()
    h.manager.request(tree.web, "web", origin=MCP)  # an MCP request for the admin's folder takes nothing over
    assert h.store.read_indexes()["web"].origin is ADMIN and "--confined" in h.argv()
    stored_before_origins = {"name": "old", "folder": "/src/old", "registered_at": 0.0}
    assert IndexRegistration.model_validate(stored_before_origins).origin is ADMIN


def test_an_mcp_client_refreshes_and_removes_only_indexes_inside_the_roots(tmp_path: Path, tree: Tree) -> None:
    h = harness(tmp_path, tree)
    h.manager.request(tree.outside, "payments", origin=ADMIN)
    h.index.indexed.append(record("payments", tree.outside))
    h.jobs.finish_all()
    for refused in (
        lambda: h.manager.refresh("payments", origin=MCP),
        lambda: h.manager.remove("payments", origin=MCP),
    ):
        with pytest.raises(IndexRefused, match="not inside the allowed roots") as caught:
            refused()
        assert tree.outside not in str(caught.value) and "SAMESPACE_INDEX__ALLOWED_ROOTS" in str(caught.value)
    assert "payments" in h.store.read_indexes() and h.index.removed == [] and len(h.jobs.submitted) == 1
    assert not h.manager.refresh("payments", origin=ADMIN).joined  # the admin may
    assert h.manager.remove("payments", origin=ADMIN) == ["payments__b1"]

    h.manager.request(tree.web, "web", origin=ADMIN)  # the admin's, inside the roots: reachable
    h.manager.request(tree.api, "api", origin=MCP)
    h.jobs.finish_all()
    assert h.manager.refresh("web", origin=MCP).ticket.index == "web" and "--confined" in h.argv()
    assert h.manager.refresh("api", origin=MCP).ticket.folder == tree.api
    with pytest.raises(IndexNotFound, match="unknown repo 'nothing'"):
        h.manager.remove("nothing", origin=MCP)
    shutil.rmtree(tree.api)  # its folder is gone: its index can still be dropped
    assert h.manager.remove("api", origin=MCP) == [] and "api" not in h.store.read_indexes()


def test_every_build_of_an_index_an_mcp_client_registered_is_confined_again(
    tmp_path: Path, tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    h = harness(tmp_path, tree)
    h.manager.request(tree.api, "api", origin=MCP)
    h.manager.request(tree.outside, "payments", origin=ADMIN)
    h.jobs.finish_all()
    h.signatures[tree.api] = h.signatures[tree.outside] = "s1"
    assert h.manager.sync_once() == []  # changed, settling
    h.now[0] += 3
    started = {r.ticket.index: r for r in h.manager.sync_once()}
    assert set(started) == {"api", "payments"}
    assert [argv for argv, _ in h.jobs.submitted[-2:] if "--confined" in argv] == [
        argv for argv, _ in h.jobs.submitted[-2:] if tree.api in argv
    ]  # the job of the MCP client's index confines again, the admin's does not
    h.jobs.finish_all()

    narrowed = harness(tmp_path, tree, roots=[tmp_path / "elsewhere"])  # the roots were changed since
    narrowed.signatures.update({tree.api: "s2", tree.outside: "s1"})  # the MCP client's index changed
    with caplog.at_level(logging.WARNING, logger="samespace.sync"):
        assert narrowed.manager.sync_once() == []
        narrowed.now[0] += 3
        assert narrowed.manager.sync_once() == []
    assert narrowed.jobs.submitted == [] and "no longer inside the allowed roots" in caplog.text
    with pytest.raises(IndexRefused):
        narrowed.manager.refresh("api", origin=ADMIN)  # an MCP client's registration, whoever asks

    shutil.rmtree(tree.api)
    Path(tree.api).symlink_to(tree.outside)  # swapped for a link out of the roots after it was registered
    h.signatures[tree.api] = "s3"
    submitted = len(h.jobs.submitted)
    h.now[0] += 10
    assert h.manager.sync_once() == [] and h.manager.sync_once() == []
    assert len(h.jobs.submitted) == submitted  # not synced: the link is never followed


def test_builds_beyond_max_jobs_total_are_refused_naming_the_setting(tmp_path: Path, tree: Tree) -> None:
    h = harness(tmp_path, tree, max_jobs_total=1)
    first = h.manager.request(tree.api, "api", origin=MCP)
    with pytest.raises(LimitExceeded) as over:
        h.manager.request(tree.web, "web", origin=MCP)
    assert "limits.max_jobs_total (SAMESPACE_LIMITS__MAX_JOBS_TOTAL)" in str(over.value)
    assert "web" not in h.store.read_indexes() and len(h.jobs.submitted) == 1
    assert h.manager.request(tree.api, "api", origin=MCP).joined  # joining starts nothing
    h.jobs.states[first.ticket.job_id] = "SUCCEEDED"
    assert h.manager.request(tree.web, "web", origin=MCP).ticket.index == "web"


def test_registrations_beyond_max_registrations_are_refused_and_re_registering_is_fine(
    tmp_path: Path, tree: Tree
) -> None:
    h = harness(tmp_path, tree, max_registrations=1)
    h.manager.request(tree.api, "api", origin=ADMIN)
    h.jobs.finish_all()
    h.manager.request(tree.api, "api", origin=ADMIN)
    h.jobs.finish_all()
    with pytest.raises(LimitExceeded) as over:
        h.manager.request(tree.web, "web", origin=ADMIN)
    assert "limits.max_registrations (SAMESPACE_LIMITS__MAX_REGISTRATIONS)" in str(over.value)
    assert set(h.store.read_indexes()) == {"api"} and len(h.jobs.submitted) == 2


def test_a_sync_pass_over_the_job_cap_waits_for_a_later_pass(tmp_path: Path, tree: Tree) -> None:
    h = harness(tmp_path, tree, max_jobs_total=1)
    for folder, name in ((tree.api, "api"), (tree.web, "web")):
        h.manager.request(folder, name, origin=MCP)
        h.jobs.finish_all()
    h.signatures[tree.api] = h.signatures[tree.web] = "s1"
    h.manager.sync_once()
    h.now[0] += 3
    first = h.manager.sync_once()  # both are due: one fits
    assert len(first) == 1
    assert h.manager.sync_once() == []  # the other waits while it runs
    h.jobs.finish_all()
    second = h.manager.sync_once()
    assert {r.ticket.index for r in first + second} == {"api", "web"}


def test_max_jobs_per_index_lets_that_many_builds_of_one_index_run(tmp_path: Path, tree: Tree) -> None:
    h = harness(tmp_path, tree, max_jobs_per_index=2)
    first = h.manager.request(tree.api, "api", origin=MCP)
    second = h.manager.request(tree.api, "api", origin=MCP)
    third = h.manager.request(tree.api, "api", origin=MCP)
    assert not first.joined and not second.joined and third.joined and third.ticket == second.ticket
    assert len(h.jobs.submitted) == 2
    assert h.manager.remove("api", origin=MCP) == [] and sorted(h.jobs.stopped) == sorted(
        [first.ticket.job_id, second.ticket.job_id]
    )


def test_an_index_name_ending_in_a_newline_is_refused() -> None:
    assert validate_index_name("payments") == "payments"
    for bad in ("payments\n", "payments\r\n", "\npayments", "pay\nments"):
        with pytest.raises(SamespaceError, match="invalid index name"):
            validate_index_name(bad)


class _Call:
    def __init__(self, calls: list[tuple[str, tuple[Any, ...]]], method: str) -> None:
        self._calls, self._method = calls, method

    def remote(self, *args: Any) -> Any:
        self._calls.append((self._method, args))

        async def answer() -> list[str]:
            return []

        return answer()


class _SyncHandle:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, method: str) -> _Call:
        return _Call(self.calls, method)


def test_the_index_service_tells_the_sync_actor_who_asks(tree: Tree) -> None:
    sync = _SyncHandle()
    service = IndexService(SamespaceSettings(index={"allowed_roots": [tree.root]}), lambda: sync, home=tree.home)  # type: ignore[arg-type,return-value]

    async def ask() -> None:
        with acting_as(Principal.shared("local")):  # auth.mode none: the one shared identity
            await service.refresh("api", False, confined=True)
            await service.remove("api", confined=True)
        await service.refresh("api", True, confined=False)
        await service.remove("api", confined=False)

    asyncio.run(ask())
    shared = IndexCaller(admin=True, reader=Principal.shared("local").reader())
    assert sync.calls == [
        ("refresh", ("api", False, MCP, shared)),
        ("remove", ("api", MCP, shared)),
        ("refresh", ("api", True, ADMIN, CLUSTER_CALLER)),
        ("remove", ("api", ADMIN, CLUSTER_CALLER)),
    ]
