"""Callers and what they may do: the principal every surface hands down, the scopes, the readers that
per-index access filters by, and the caller of the current request."""

from __future__ import annotations

from cluster.auth.context import ANONYMOUS, acting_as, current_principal, current_reader
from cluster.auth.principal import INDEX_TOOLS, AccessScope, Principal, Reader, TokenVerifier, scope_for_tool
from cluster.auth.tokens import JwtVerifier

__all__ = [
    "ANONYMOUS",
    "INDEX_TOOLS",
    "AccessScope",
    "JwtVerifier",
    "Principal",
    "Reader",
    "TokenVerifier",
    "acting_as",
    "current_principal",
    "current_reader",
    "scope_for_tool",
]
