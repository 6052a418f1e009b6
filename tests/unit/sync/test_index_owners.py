"""Who owns an index (cluster/sync/claims.py through the manager and the index service): one an OAuth
caller registered over MCP is refreshed, removed or re-pointed over MCP only by it or an admin; one
owned by nobody in particular (a shared identity, the admin API, a config stored before owners were
kept) follows the folder rules alone; the index service asks for the samespace:index scope first.
Ray's job API and the index actor are stand-ins; the folders and the config store are real."""

from __future__ import annotations

import asyncio
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from cluster.auth import ANONYMOUS, AccessScope, Principal, acting_as
from cluster.config import ConfigStore, IndexOrigin, IndexOwner
from cluster.errors import AccessDenied, IndexNotFound, IndexRefused
from cluster.index import IndexAcl
from cluster.settings import LimitsSettings, SamespaceSettings
from cluster.sync import CLUSTER_CALLER, IndexCaller, IndexManager
from serve_apps.index_service import IndexService
from tests.support.fakes.sync_jobs import FakeIndex, FakeJobs

MCP, ADMIN = IndexOrigin.MCP, IndexOrigin.ADMIN
ISSUER = "https://idp.example.com/realms/team"
INDEXING = frozenset({AccessScope.READ.value, AccessScope.INDEX.value})


def oauth(subject: str, *scopes: AccessScope, issuer: str = ISSUER) -> Principal:
    granted = frozenset(s.value for s in scopes) or INDEXING
    return Principal(kind="oauth", subject=subject, issuer=issuer, client_id="claude-code", scopes=granted)


ALICE = IndexCaller.of(oauth("alice"))
BOB = IndexCaller.of(oauth("bob"))
ROOT_ADMIN = IndexCaller.of(oauth("carol", AccessScope.READ, AccessScope.ADMIN))


class Setup:
    def __init__(self, tmp_path: Path, acl: IndexAcl | None = None) -> None:
        self.home = tmp_path / "home"
        root = self.home / "src"
        for folder in ("api", "web", "docs"):
            (root / folder).mkdir(parents=True)
        (tmp_path / "elsewhere").mkdir()
        self.root = root
        self.api, self.web, self.docs = (str(root.resolve() / f) for f in ("api", "web", "docs"))
        self.outside = str((tmp_path / "elsewhere").resolve())
        self.jobs, self.index = FakeJobs(), FakeIndex()
        self.store = ConfigStore(tmp_path / "config.json")
        self.now = [1_700_000_000.0]
        self.signatures: dict[str, str] = {}
        self.manager = IndexManager(
            self.jobs,
            self.index,
            self.store,
            debounce_s=2.0,
            clock=lambda: self.now[0],
            roots=[root],
            home=self.home,
            limits=LimitsSettings(),
            acl=acl,
            signature=lambda folder, ref: self.signatures.get(folder, "s0"),
        )

    def submitted(self) -> int:
        return len(self.jobs.submitted)


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def test_the_registering_oauth_caller_owns_the_index_and_nobody_else_may_change_it(setup: Setup) -> None:
    m = setup.manager
    m.request(setup.api, "api", origin=MCP, caller=ALICE)
    setup.jobs.finish_all()
    assert setup.store.read_indexes()["api"].owner == IndexOwner(subject="alice", issuer=ISSUER)
    before = setup.submitted()
    for refused in (
        lambda: m.refresh("api", origin=MCP, caller=BOB),
        lambda: m.remove("api", origin=MCP, caller=BOB),
        lambda: m.request(setup.api, "api", origin=MCP, caller=BOB),  # the same folder: a refresh by another name
        lambda: m.request(setup.web, "api", origin=MCP, caller=BOB),  # re-point
    ):
        with pytest.raises(AccessDenied) as denied:
            refused()
        assert str(denied.value) == "access denied: index 'api' is owned by another caller"
        assert "alice" not in repr(denied.value) and ISSUER not in str(denied.value)  # never names the owner
    assert setup.submitted() == before and setup.jobs.stopped == [] and "api" in setup.store.read_indexes()

    assert not m.refresh("api", origin=MCP, caller=ALICE).joined  # its owner may
    setup.jobs.finish_all()
    assert m.refresh("api", origin=MCP, caller=ROOT_ADMIN).ticket.index == "api"  # so may an admin
    setup.jobs.finish_all()
    assert setup.store.read_indexes()["api"].owner == IndexOwner(subject="alice", issuer=ISSUER)  # kept
    assert m.remove("api", origin=MCP, caller=ROOT_ADMIN) == [] and "api" not in setup.store.read_indexes()


def test_the_same_subject_from_another_issuer_is_another_caller(setup: Setup) -> None:
    setup.manager.request(setup.api, "api", origin=MCP, caller=ALICE)
    setup.jobs.finish_all()
    impostor = IndexCaller.of(oauth("alice", issuer="https://other-idp.example.com"))
    with pytest.raises(AccessDenied, match="owned by another caller"):
        setup.manager.refresh("api", origin=MCP, caller=impostor)


def test_the_owner_or_an_admin_may_re_point_the_name_inside_the_roots(setup: Setup) -> None:
    m = setup.manager
    m.request(setup.api, "app", origin=MCP, caller=ALICE)
    setup.jobs.finish_all()
    assert m.request(setup.web, "app", ref=None, origin=MCP, caller=ALICE).ticket.folder == setup.web
    setup.jobs.finish_all()
    with pytest.raises(IndexRefused, match="not inside the allowed roots"):
        m.request(setup.outside, "app", origin=MCP, caller=ALICE)  # the folder rules still hold
    assert m.request(setup.docs, "app", origin=MCP, caller=ROOT_ADMIN).ticket.folder == setup.docs
    registration = setup.store.read_indexes()["app"]
    assert (registration.folder, registration.owner) == (setup.docs, IndexOwner(subject="alice", issuer=ISSUER))
    assert registration.origin is MCP and "--confined" in setup.jobs.submitted[-1][0]


def test_the_admin_api_and_the_sync_pass_manage_an_owned_index(setup: Setup) -> None:
    m = setup.manager
    m.request(setup.api, "api", origin=MCP, caller=ALICE)
    setup.jobs.finish_all()
    setup.signatures[setup.api] = "s1"
    assert m.sync_once() == []  # changed, settling
    setup.now[0] += 3
    assert [r.ticket.index for r in m.sync_once()] == ["api"]  # the cluster's own pass is nobody's request
    setup.jobs.finish_all()
    assert m.request(setup.outside, "api", origin=ADMIN).ticket.folder == setup.outside  # the admin API re-points
    setup.jobs.finish_all()
    assert setup.store.read_indexes()["api"].owner == IndexOwner(subject="alice", issuer=ISSUER)
    assert m.refresh("api", origin=ADMIN).ticket.folder == setup.outside
    assert m.remove("api", origin=ADMIN) == [] and "api" not in setup.store.read_indexes()


def test_an_index_owned_by_nobody_follows_the_folder_rules_alone(setup: Setup, tmp_path: Path) -> None:
    m = setup.manager
    shared = IndexCaller.of(Principal.shared("token"))  # auth.mode token: one identity, every scope
    m.request(setup.api, "api", origin=MCP, caller=shared)
    m.request(setup.web, "web", origin=ADMIN)
    setup.jobs.finish_all()
    assert setup.store.read_indexes()["api"].owner is None and setup.store.read_indexes()["web"].owner is None
    m.request(setup.api, "api", origin=MCP, caller=BOB)  # the same folder again: joins nothing, takes nothing over
    setup.jobs.finish_all()
    assert setup.store.read_indexes()["api"].owner is None
    with pytest.raises(IndexRefused, match="name is taken"):
        m.request(setup.docs, "api", origin=MCP, caller=BOB)  # an unowned name is still bound to its folder
    assert m.refresh("web", origin=MCP, caller=BOB).ticket.index == "web"
    setup.jobs.finish_all()
    assert m.remove("web", origin=MCP, caller=BOB) == []

    stored = json.loads(setup.store.path.read_text(encoding="utf-8"))  # a config written before owners were kept
    stored["indexes"]["api"].pop("owner")
    setup.store.path.write_text(json.dumps(stored), encoding="utf-8")
    assert ConfigStore(setup.store.path).read_indexes()["api"].owner is None
    assert m.refresh("api", origin=MCP, caller=ALICE).ticket.index == "api"


def test_the_shared_identity_of_modes_none_and_token_may_change_any_index(setup: Setup) -> None:
    setup.manager.request(setup.api, "api", origin=MCP, caller=ALICE)  # registered under oauth
    setup.jobs.finish_all()
    for kind in ("local", "token"):  # the server went back to auth.mode none or token
        assert IndexCaller.of(Principal.shared(kind)).may_change(IndexOwner(subject="alice", issuer=ISSUER))
    assert not IndexCaller.of(ANONYMOUS).may_change(IndexOwner(subject="alice"))  # no request's caller: fail closed
    assert IndexCaller.of(ANONYMOUS).may_change(None)
    report = setup.manager.refresh("api", origin=MCP, caller=IndexCaller.of(Principal.shared("token")))
    assert report.ticket.index == "api"
    assert pickle.loads(pickle.dumps(ALICE)) == ALICE and CLUSTER_CALLER.admin and CLUSTER_CALLER.owner is None


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


def _service(setup: Setup, sync: _SyncHandle) -> IndexService:
    settings = SamespaceSettings(index={"allowed_roots": [setup.root]})
    return IndexService(settings, lambda: sync, home=setup.home)  # type: ignore[arg-type,return-value]


def test_the_index_service_needs_the_index_scope_and_hands_the_caller_down(setup: Setup) -> None:
    sync = _SyncHandle()
    service = _service(setup, sync)
    operations = (
        lambda: service.index_repository(setup.api, "api", None, False, confined=True),
        lambda: service.refresh("api", False, confined=True),
        lambda: service.remove("api", confined=True),
    )
    for principal in (oauth("reader", AccessScope.READ), ANONYMOUS):
        for operation in operations:
            with acting_as(principal), pytest.raises(AccessDenied) as denied:
                asyncio.run(operation())
            assert denied.value.scope == "samespace:index" and "needs scope 'samespace:index'" in str(denied.value)
    with pytest.raises(AccessDenied):
        asyncio.run(service.refresh("api", False, confined=True))  # outside any request: nobody's scope
    assert sync.calls == []  # refused before the sync actor is reached

    with acting_as(oauth("alice")):
        for operation in operations:
            asyncio.run(operation())
    assert [(method, args[-1]) for method, args in sync.calls] == [
        ("request", ALICE),
        ("refresh", ALICE),
        ("remove", ALICE),
    ]
    sync.calls.clear()
    asyncio.run(service.refresh("api", True, confined=False))  # the admin API: its own token, any index
    asyncio.run(service.remove("api", confined=False))
    assert sync.calls == [("refresh", ("api", True, ADMIN, CLUSTER_CALLER)), ("remove", ("api", ADMIN, CLUSTER_CALLER))]


def test_an_index_the_caller_may_not_read_is_refreshed_and_removed_as_an_unknown_one(tmp_path: Path) -> None:
    setup = Setup(tmp_path, IndexAcl({"web": ["group:frontend"]}, LimitsSettings()))  # as the actor, from index.acl
    m = setup.manager
    m.request(setup.api, "api", origin=MCP, caller=CLUSTER_CALLER)
    m.request(setup.web, "web", origin=MCP, caller=CLUSTER_CALLER)
    setup.jobs.finish_all()
    answers: dict[str, list[str]] = {}
    for name in ("web", "nothing"):
        for change in (m.refresh, m.remove):
            with pytest.raises(IndexNotFound) as refused:
                change(name, origin=MCP, caller=ALICE)
            answers.setdefault(name, []).append(str(refused.value).replace(repr(name), "<name>"))
    assert answers["web"] == answers["nothing"]
    assert all("web" not in answer for answer in answers["web"]) and "api" in answers["web"][0]
    assert "web" in setup.store.read_indexes()  # nothing was removed
    frontend = IndexCaller.of(
        Principal(kind="oauth", subject="erin", groups=frozenset({"frontend"}), scopes=INDEXING, issuer=ISSUER)
    )
    assert m.remove("web", origin=MCP, caller=frontend) is not None  # its readers still may
