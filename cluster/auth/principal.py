"""Who is calling, and what they may do: the one value every surface hands down after it checked the
caller (a verified OAuth access token, the shared serve token, or a loopback caller with no token).

A `Principal` crosses actors (plain pydantic, never the token itself); `Reader` is the part of it that
per-index access reads (`cluster/index/access.py`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "INDEX_TOOLS",
    "AccessScope",
    "Principal",
    "Reader",
    "TokenVerifier",
    "scope_for_tool",
]


class AccessScope(StrEnum):
    """The OAuth scopes samespace understands (`scopes_supported` in its RFC 9728 metadata)."""

    READ = "samespace:read"  # search, read, navigation, history, ask, status, resources, prompts
    INDEX = "samespace:index"  # index_repository, refresh_index, remove_index (within index.allowed_roots)
    ADMIN = "samespace:admin"  # the admin API and the operator page; reads every index; manages any index


# The MCP tools that change what is indexed; every other tool, resource and prompt reads.
INDEX_TOOLS = frozenset({"index_repository", "refresh_index", "remove_index"})


def scope_for_tool(tool: str) -> AccessScope:
    """The scope an MCP tool call needs."""
    return AccessScope.INDEX if tool in INDEX_TOOLS else AccessScope.READ


class Reader(BaseModel):
    """Whose reads per-index access filters: a subject and its groups, or everyone's (`unrestricted`:
    a caller with no identity under auth.mode none or token, or a samespace:admin token)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subject: str
    groups: frozenset[str] = frozenset()
    unrestricted: bool = False


class Principal(BaseModel):
    """A checked caller. `kind`: 'oauth' (a verified access token), 'token' (the shared serve token),
    'local' (no token, auth.mode none), 'anonymous' (nobody checked: code outside any request); only
    'oauth' callers have a subject of their own."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = Field(pattern="^(oauth|token|local|anonymous)$")
    subject: str = Field(min_length=1)
    client_id: str | None = None
    issuer: str | None = None
    scopes: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    @classmethod
    def shared(cls, kind: str) -> Principal:
        """The one identity of auth.mode none ('local') or token ('token'): every scope, every index."""
        return cls(kind=kind, subject=kind, scopes=frozenset(AccessScope))

    def has(self, scope: AccessScope) -> bool:
        return scope.value in self.scopes

    @property
    def is_admin(self) -> bool:
        return self.has(AccessScope.ADMIN)

    def reader(self) -> Reader:
        """What per-index access needs of this caller."""
        shared = self.kind in ("token", "local")  # the one identity of auth.mode token or none
        return Reader(subject=self.subject, groups=self.groups, unrestricted=shared or self.is_admin)


class TokenVerifier(Protocol):
    """Turns a bearer access token into the caller it was issued to (`cluster/auth/tokens.py:JwtVerifier`
    under auth.mode oauth); raises `cluster.errors.TokenRejected` saying why it is refused."""

    async def verify(self, token: str) -> Principal: ...
