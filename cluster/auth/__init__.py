"""Callers and what they may do: the principal every surface hands down, the scopes, the readers that
per-index access filters by, and the caller of the current request; the audit log of every call and
the quotas per person."""

from __future__ import annotations

from cluster.auth.audit import AUDIT_FILE, AuditLog, AuditOutcome, AuditQuery, AuditRecord, audit_path
from cluster.auth.context import ANONYMOUS, acting_as, current_principal, current_reader
from cluster.auth.principal import INDEX_TOOLS, AccessScope, Principal, Reader, TokenVerifier, scope_for_tool
from cluster.auth.quota import SubjectQuotas
from cluster.auth.tokens import JwtVerifier

__all__ = [
    "ANONYMOUS",
    "AUDIT_FILE",
    "INDEX_TOOLS",
    "AccessScope",
    "AuditLog",
    "AuditOutcome",
    "AuditQuery",
    "AuditRecord",
    "JwtVerifier",
    "Principal",
    "Reader",
    "SubjectQuotas",
    "TokenVerifier",
    "acting_as",
    "audit_path",
    "current_principal",
    "current_reader",
    "scope_for_tool",
]
