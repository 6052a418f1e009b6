"""How a tool's call reaches the services and how its failure reaches the client (a named error,
never a traceback): the caller's scope and quota checked first, one audit line when it ends
(`ToolCalls`, `_tool_call`); and the arguments several tools share."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RayError

from cluster.auth import AuditLog, AuditOutcome, AuditRecord, Principal, current_principal, scope_for_tool
from cluster.cloud import tagged
from cluster.errors import AccessDenied, QuotaExceeded, SamespaceError, original_error
from cluster.ingest import MAX_EXCLUDE_GLOBS, MAX_GLOB_CHARS, Category, SearchControls, TestsMode
from cluster.settings import SamespaceSettings
from cluster.types import MAX_CURSOR_CHARS

log = logging.getLogger("samespace.mcp")

RepoArg = Annotated[
    str | None, Field(description="The indexed repo (see index_status); None: the only one, when there is one.")
]
ScopeArg = Annotated[
    str | None,
    Field(
        description="Which indexes: a repo (see index_status), a glob ('api*'), a group ('@backend', "
        "configured in index.groups), or None for every index."
    ),
]

GlobArg = Annotated[str, Field(min_length=1, max_length=MAX_GLOB_CHARS)]
ExcludeArg = Annotated[
    GlobArg | list[GlobArg] | None,
    Field(
        max_length=MAX_EXCLUDE_GLOBS,
        description="Leave out files matching this glob, or any of these (up to "
        f"{MAX_EXCLUDE_GLOBS}): '*' crosses folders, a glob without '/' matches a file or folder name "
        "anywhere, a glob matching a folder leaves out all of it. E.g. 'vendor', 'docs/*', '*.min.js'.",
    ),
]
KindArg = Annotated[
    Category | list[Category] | None,
    Field(
        description="Keep only chunks of this kind, or of any of these: function, method, class (classes, "
        "structs, interfaces, traits, enums...), module (top-level code, unsplit files), doc (Markdown, "
        "reST), test (test code). None: every kind."
    ),
]
TestsArg = Annotated[
    TestsMode,
    Field(
        description="Test code (test files and folders by each language's conventions, Rust test "
        "functions): include it, exclude it, or only it."
    ),
]
CursorArg = Annotated[
    str | None,
    Field(max_length=MAX_CURSOR_CHARS, description="The cursor of an earlier answer: its next page (same arguments)."),
]


def controls_of(
    exclude: str | list[str] | None, kind: Category | list[Category] | None, tests: TestsMode
) -> SearchControls:
    """The tools' `exclude`, `kind` and `tests` as one `SearchControls` (one value or a list each)."""
    return SearchControls.model_validate(
        {"exclude": exclude or [], "kind": [kind] if isinstance(kind, str) else kind or [], "tests": tests}
    )


MAX_AUDITED_INDEXES = 32  # indexes one audit line names at most
CREDITS_TIMEOUT_S = 5.0  # how long an audit line waits for its call's credits (then writes 0)


class ToolCalls:
    """What every MCP tool call of one replica goes through (`_tool_call`): the caller must hold the
    tool's scope (AccessDenied naming it: the HTTP guard refuses first, this is defense in depth); an
    OAuth caller's call is counted against its rate (`quotas.requests_per_minute`, through the budget
    actor's `admit_call`: QuotaExceeded); and one audit line is written when it ends.

    Built once per replica (`for_replica`); `ToolCalls()` checks the scope only (no audit, no quota)."""

    def __init__(
        self, *, audit: AuditLog | None = None, budget: Callable[[], Any] | None = None, cloud: bool = False
    ) -> None:
        self.audit = audit
        self._budget = budget  # the budget actor's handle, found (or started) at the first use
        self._handle: Any = None
        self._cloud = cloud  # whether a call may spend cloud credits (cloud.enabled)

    @classmethod
    def for_replica(cls, settings: SamespaceSettings) -> ToolCalls:
        """The replica's calls: its process's audit log, the budget actor of its cluster."""
        from actors.budget import get_budget_actor
        from serve_apps.admin import replica_audit_log

        budget = functools.partial(get_budget_actor, settings)
        return cls(audit=replica_audit_log(settings), budget=budget, cloud=settings.cloud.enabled)

    def budget(self) -> Any:
        if self._handle is None and self._budget is not None:
            self._handle = self._budget()
        return self._handle

    async def admit(self, tool: str, principal: Principal) -> None:
        """AccessDenied without the tool's scope; QuotaExceeded for an OAuth caller over its rate."""
        scope = scope_for_tool(tool)
        if not principal.has(scope):
            raise AccessDenied(f"the caller may not call {tool}", scope.value)
        budget = self.budget() if principal.kind == "oauth" else None  # a shared caller is no person
        if budget is not None:
            await budget.admit_call.remote(principal.subject)

    async def credits(self, call_id: str) -> float:
        """What the call's cloud requests cost (0 when the cloud is off or the budget does not answer)."""
        budget = self.budget() if self._cloud else None
        if budget is None:
            return 0.0
        try:
            credits: float = await asyncio.wait_for(budget.take_call_credits.remote(call_id), CREDITS_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - an audit line without credits beats a failed call
            log.warning("credits of a tool call not read: %s", type(exc).__name__)
            return 0.0
        return credits

    async def record(self, principal: Principal, call: AuditedCall) -> None:
        """The call's audit line; never raises."""
        if self.audit is None or not self.audit.settings.enabled:
            return
        try:
            credits = await self.credits(call.call_id) if call.ran else 0.0
            record = AuditRecord.by(
                principal,
                time=self.audit.now(),
                surface="mcp",
                action=call.tool,
                indexes=call.indexes(),
                outcome=call.outcome,
                ms=call.ms,
                credits=credits,
                query=call.query,
            )
            await asyncio.to_thread(self.audit.append, record)
        except Exception as exc:  # noqa: BLE001 - the audit never fails the call it records
            log.warning("audit line of %s not written: %s", call.tool, type(exc).__name__)


@dataclass
class AuditedCall:
    """One tool call as its audit line needs it."""

    tool: str
    scope: str | None
    query: str | None
    call_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    outcome: AuditOutcome = "failed"
    ms: float = 0.0
    ran: bool = False  # admitted: the service call was awaited
    result: Any = None

    def indexes(self) -> list[str]:
        """The index (or glob, or group) the call named, then those its answer names, at most 32."""
        found: dict[str, None] = {self.scope: None} if self.scope else {}
        _names_in(self.result, found, depth=0)
        return list(found)[:MAX_AUDITED_INDEXES]


def _names_in(value: Any, found: dict[str, None], depth: int) -> None:
    """The `repo` and `index` fields of an answer and of its items, a few levels down."""
    if depth > 3 or len(found) >= MAX_AUDITED_INDEXES:
        return
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            item = getattr(value, name)
            if name in ("repo", "index") and isinstance(item, str):
                found.setdefault(item, None)
            elif isinstance(item, BaseModel | list):
                _names_in(item, found, depth + 1)
    elif isinstance(value, list):
        for item in value[:200]:
            _names_in(item, found, depth + 1)


def _outcome_of(exc: BaseException) -> AuditOutcome:
    cause = original_error(exc) if isinstance(exc, SamespaceError) else exc
    if isinstance(cause, AccessDenied):
        return "denied"
    if isinstance(cause, QuotaExceeded):
        return "quota"
    return "error"


SCOPE_ONLY = ToolCalls()


async def _tool_call(
    tool: str,
    call: Awaitable[Any],
    calls: ToolCalls | None = None,
    *,
    scope: str | None = None,
    query: str | None = None,
) -> Any:
    """`audited_call`, with a samespace error as the tool's error message (an actor's error by its cause:
    no remote traceback reaches the client)."""
    try:
        return await audited_call(tool, call, calls, scope=scope, query=query)
    except ToolError:
        raise
    except SamespaceError as exc:
        raise ToolError(str(original_error(exc))) from exc
    except RayError as exc:  # an actor restarting, gone or too slow: a named error, never a traceback
        raise ToolError(cluster_unavailable(exc)) from exc


async def audited_call(
    tool: str,
    call: Awaitable[Any],
    calls: ToolCalls | None = None,
    *,
    scope: str | None = None,
    query: str | None = None,
) -> Any:
    """Await a service call as the current caller (`cluster.auth.current_principal()`), who must hold
    the tool's scope and, under OAuth, be within its rate (`calls.admit`: AccessDenied, QuotaExceeded).
    Counted and timed per tool (actors/metrics.py), and written to the audit log (`scope`: the index the
    call names; `query`: its text, kept only under audit.include_queries). Cloud requests made for the
    call carry its subject and id (cluster/cloud/request_tag.py). Errors are raised as they come."""
    from actors.metrics import record_tool

    calls = calls if calls is not None else SCOPE_ONLY
    principal = current_principal()
    audited = AuditedCall(tool=tool, scope=scope, query=query)
    began = time.perf_counter()
    try:
        with tagged(principal.subject if principal.kind == "oauth" else None, audited.call_id):
            await calls.admit(tool, principal)
            audited.ran = True
            audited.result = await call
        audited.outcome = "ok"
        return audited.result
    except (SamespaceError, ToolError) as exc:
        audited.outcome = _outcome_of(exc)
        raise
    finally:
        if not audited.ran and inspect.iscoroutine(call):
            call.close()  # refused before it ran
        seconds = time.perf_counter() - began
        record_tool(tool, audited.outcome if audited.outcome in ("ok", "failed") else "error", seconds)
        audited.ms = seconds * 1000
        await calls.record(principal, audited)


def cluster_unavailable(exc: RayError) -> str:
    """What a client reads when an actor behind a tool is restarting, dead or too slow (named by Ray's
    error class; retrying is the cure), or raised something unexpected (named by its class only)."""
    if isinstance(exc, ActorUnavailableError | RayActorError | GetTimeoutError):
        return f"{type(exc).__name__}: a part of the cluster is restarting or unreachable; retry in a few seconds"
    cause = getattr(exc, "cause", None)
    return f"{type(cause or exc).__name__} in a cluster actor (see the server's log)"
