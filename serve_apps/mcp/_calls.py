"""How a tool's call reaches the services and how its failure reaches the client (a named error,
never a traceback), and the arguments several tools share."""

from __future__ import annotations

import time
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RayError

from cluster.errors import SamespaceError, original_error
from cluster.ingest import MAX_EXCLUDE_GLOBS, MAX_GLOB_CHARS, Category, SearchControls, TestsMode
from cluster.types import MAX_CURSOR_CHARS

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


async def _tool_call(tool: str, call: Any) -> Any:
    """Await a service call; a samespace error becomes the tool's error message (an actor's error by its
    cause: no remote traceback reaches the client). Counted and timed per tool (actors/metrics.py)."""
    from actors.metrics import record_tool

    began, outcome = time.perf_counter(), "failed"
    try:
        result = await call
        outcome = "ok"
        return result
    except (SamespaceError, ToolError) as exc:
        outcome = "error"
        if isinstance(exc, ToolError):
            raise
        raise ToolError(str(original_error(exc))) from exc
    except RayError as exc:  # an actor restarting, gone or too slow: a named error, never a traceback
        raise ToolError(cluster_unavailable(exc)) from exc
    finally:
        record_tool(tool, outcome, time.perf_counter() - began)


def cluster_unavailable(exc: RayError) -> str:
    """What a client reads when an actor behind a tool is restarting, dead or too slow (named by Ray's
    error class; retrying is the cure), or raised something unexpected (named by its class only)."""
    if isinstance(exc, ActorUnavailableError | RayActorError | GetTimeoutError):
        return f"{type(exc).__name__}: a part of the cluster is restarting or unreachable; retry in a few seconds"
    cause = getattr(exc, "cause", None)
    return f"{type(cause or exc).__name__} in a cluster actor (see the server's log)"
