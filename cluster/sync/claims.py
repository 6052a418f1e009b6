"""Who may do what to an index name. A name is bound to the folder (and ref) that registered or built
it: an MCP client may not take it for another one, and refreshes or removes an index only while the
folder it follows lies inside the allowed roots (`confine`, checked again at every build of an index an
MCP client registered); the admin API may re-point and remove anything. Refusals name the index and
never the other folder. And the caps on builds and registrations, each refusal naming its setting.

An index registered over MCP by a caller with an identity of its own (an OAuth access token, auth.mode
oauth) is owned by it (`IndexOwner`): only its owner or an admin (samespace:admin) may refresh, remove or
re-point it over MCP (`check_owner`; the refusal never names the owner), and its owner or an admin may
point it at another folder or ref inside the roots. An index owned by nobody in particular (a shared
identity registered it, the admin API did, or it was stored before owners were kept) follows the folder
rules alone; under auth.mode none or token every caller is the one shared identity, which may do
anything the folder rules allow.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from cluster.auth import Principal, Reader
from cluster.config import IndexOrigin, IndexOwner, IndexRegistration
from cluster.errors import AccessDenied, IndexRefused, LimitExceeded, PathRefused
from cluster.index import IndexRecord
from cluster.settings import ALLOWED_ROOTS_ENV, limit_name
from cluster.sync.roots import confine
from cluster.types import Strict

__all__ = [
    "CLUSTER_CALLER",
    "NAME_TAKEN",
    "OUTSIDE_ROOTS",
    "Confinement",
    "Followed",
    "IndexCaller",
    "check_job_cap",
    "check_owner",
    "check_registration_cap",
    "claim",
    "followed",
    "registered_origin",
]

NAME_TAKEN = "the name is taken (registered or built for another folder or ref); choose another name"
OUTSIDE_ROOTS = (
    f"the folder it follows is not inside the allowed roots, so an MCP client may not build, refresh or remove it "
    f"(see {ALLOWED_ROOTS_ENV})"
)


@dataclass(frozen=True)
class Followed:
    """The folder (and ref) an index follows."""

    folder: str
    ref: str | None

    def same(self, other: Followed) -> bool:
        return Path(os.path.normpath(self.folder)) == Path(os.path.normpath(other.folder)) and self.ref == other.ref


def followed(name: str, registrations: dict[str, IndexRegistration], records: Iterable[IndexRecord]) -> Followed | None:
    """What `name` follows: its registration's folder and ref, else its serving build's (None: neither)."""
    registration = registrations.get(name)
    if registration is not None:
        return Followed(registration.folder, registration.ref)
    record = next((r for r in records if r.name == name), None)
    if record is None:
        return None
    return Followed(record.followed_folder, record.source.ref if record.source is not None else None)


class IndexCaller(Strict):
    """Who asks to change an index, as far as ownership goes: its own identity (`owner`: an OAuth
    caller's subject and issuer; None: a shared identity, or the cluster itself) and whether it is an
    admin. Crosses into the sync actor with each request; never a token."""

    owner: IndexOwner | None = Field(default=None, description="The caller's own identity, when it has one.")
    admin: bool = Field(default=False, description="Whether it may manage any index (samespace:admin).")
    reader: Reader | None = Field(
        default=None,
        description="Which indexes it may see (index.acl): one it may not read is refreshed or removed as an "
        "unknown one; None: every index (the cluster itself, the admin API).",
    )

    @classmethod
    def of(cls, principal: Principal) -> IndexCaller:
        """The caller a checked principal is: an OAuth caller owns what it registers; the shared
        identity of auth.mode none or token holds every scope, so it is an admin here."""
        owner = IndexOwner(subject=principal.subject, issuer=principal.issuer) if principal.kind == "oauth" else None
        return cls(owner=owner, admin=principal.is_admin, reader=principal.reader())

    def may_change(self, owner: IndexOwner | None) -> bool:
        """Whether it may refresh, remove or re-point an index owned by `owner` (None: by nobody)."""
        return owner is None or self.admin or owner == self.owner


# The cluster itself (its sync pass, a push hook) and the admin API: every index, whoever owns it.
CLUSTER_CALLER = IndexCaller(admin=True)


def check_owner(name: str, registration: IndexRegistration | None, caller: IndexCaller) -> None:
    """AccessDenied unless `caller` may change `name` (`IndexCaller.may_change`); never names the owner."""
    if not caller.may_change(registration.owner if registration is not None else None):
        raise AccessDenied(f"index {name!r} is owned by another caller")


def claim(name: str, wanted: Followed, bound: Followed | None) -> None:
    """What an MCP client may ask for: a free name, or the name of what it follows already (the admin
    API may re-point any name, and never calls this)."""
    if bound is not None and not bound.same(wanted):
        raise IndexRefused(name, NAME_TAKEN)


def registered_origin(asked: IndexOrigin, previous: IndexRegistration | None) -> IndexOrigin:
    """The origin a request leaves on a registration: admin when the admin API asks or registered it
    (an MCP request for the same folder does not take it over), else the MCP client's."""
    if asked is IndexOrigin.ADMIN or (previous is not None and previous.origin is IndexOrigin.ADMIN):
        return IndexOrigin.ADMIN
    return IndexOrigin.MCP


class Confinement:
    """The allowed roots and home folder that confine an MCP client (`cluster.sync.confine`)."""

    def __init__(self, roots: Sequence[Path], home: Path) -> None:
        self._roots = list(roots)
        self._home = home

    def admits(self, folder: str) -> bool:
        """Whether an MCP client may index `folder` now (the roots as they are set now)."""
        try:
            confine(folder, self._roots, self._home)
        except PathRefused:
            return False
        return True

    def require(self, name: str, folder: str) -> None:
        """IndexRefused, naming the index and not the folder, unless `folder` is admitted now."""
        if not self.admits(folder):
            raise IndexRefused(name, OUTSIDE_ROOTS)

    def require_removable(self, name: str, folder: str) -> None:
        """Like `require`, and a folder that no longer exists counts when its path lies inside a root
        (registered folders are stored resolved): its index can still be dropped."""
        if self.admits(folder) or (not os.path.lexists(folder) and self._lexically_inside(folder)):
            return
        raise IndexRefused(name, OUTSIDE_ROOTS)

    def _lexically_inside(self, folder: str) -> bool:
        path = Path(os.path.normpath(folder))
        if not path.is_absolute():
            return False
        return any(path == root or path.is_relative_to(root) for root in (r.resolve() for r in self._roots))


def check_registration_cap(name: str, registered: Collection[str], cap: int) -> None:
    """A new registration beyond `limits.max_registrations` is refused; re-registering a name is fine."""
    if name not in registered and len(registered) >= cap:
        raise LimitExceeded("registered indexes", len(registered) + 1, cap, limit_name("max_registrations"))


def check_job_cap(running: int, cap: int) -> None:
    """A build beyond `limits.max_jobs_total` running at once is refused."""
    if running >= cap:
        raise LimitExceeded("reindex jobs running at once", running + 1, cap, limit_name("max_jobs_total"))
