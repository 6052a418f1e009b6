"""A failed command, for a person: one line that says what went wrong and what to do, never a traceback.

`CommandFailed` is what the commands raise on purpose; `one_line` words every failure `samespace.cli.main`
catches: the cluster unreachable, a token refused, an answer that is not 200, a samespace error, a file
missing. Anything else is named by its class and message, on one line too (`--traceback` shows it whole).
"""

from __future__ import annotations

import re

import httpx
import httpx2

from cluster.errors import SamespaceError

__all__ = ["MCP_SURFACE", "TOKEN_FILE_HINT", "CommandFailed", "one_line", "refusal"]

MCP_SURFACE = "the MCP endpoint"

START_HINT = "is the cluster up? `samespace run` starts it; --address names another"
ADMIN_TOKEN_HINT = "use the token `samespace run` wrote (--state-dir), or set SAMESPACE_ADMIN__TOKEN_FILE"
SERVE_TOKEN_HINT = (
    "set SAMESPACE_SERVE__TOKEN_FILE (or SAMESPACE_SERVE__TOKEN) to the endpoint's serve token, or under "
    "auth.mode oauth pass --token-file with a fresh access token"
)
SCOPE_HINT = (
    "the token lacks the scope this call needs (samespace:read to search and ask, samespace:index to "
    "index): ask your identity provider for a token with it"
)
_SCOPE = re.compile(r'scope="([^"]*)"')  # RFC 6750 §3: the scope a 403 insufficient_scope asks for
TOKEN_FILE_HINT = (
    "put an access token on its first line (`samespace run` under auth.mode oauth says where to get one; "
    "see docs/auth.md)"
)

_CONNECT = (httpx.ConnectError, httpx2.ConnectError)
_TIMEOUT = (httpx.TimeoutException, httpx2.TimeoutException)
_STATUS = (httpx.HTTPStatusError, httpx2.HTTPStatusError)
_REQUEST = (httpx.RequestError, httpx2.RequestError)


class CommandFailed(SamespaceError):
    """A command could not do its work: what happened, and what to do about it."""

    def __init__(self, what: str, todo: str) -> None:
        super().__init__(what, todo)  # every argument, so it pickles
        self.what = what
        self.todo = todo

    def __str__(self) -> str:
        return f"{self.what}: {self.todo}"


def refusal(surface: str, status: int, detail: object) -> CommandFailed:
    """An HTTP answer that is not 200 from `surface` ('the admin API', 'the MCP endpoint'); `detail`:
    its reason, or for a 403 of the MCP endpoint its WWW-Authenticate challenge (the scope it names)."""
    if status == 401:
        hint = ADMIN_TOKEN_HINT if surface == "the admin API" else SERVE_TOKEN_HINT
        return CommandFailed(f"{surface} refused the token (401)", hint)
    if status == 403 and surface == MCP_SURFACE:
        needed = _SCOPE.search(str(detail))
        hint = f"the token lacks the scope {needed.group(1)[:100]}: ask for it" if needed else SCOPE_HINT
        return CommandFailed(f"{surface} refused the call (403)", hint)
    if status == 404:
        return CommandFailed(f"{surface} has no such route (404)", "is --address the Serve HTTP address?")
    return CommandFailed(f"{surface} answered {status}", _first_line(str(detail)) or "see the server's log")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _url(exc: httpx.RequestError | httpx2.RequestError) -> str:
    try:
        return str(exc.request.url)
    except RuntimeError:  # raised before a request was made
        return "the server"


def _leaf(exc: BaseException) -> BaseException:
    """The first error inside an exception group (the MCP client's task groups wrap what failed)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def one_line(exc: BaseException) -> str:
    """What a person reads for `exc`: one line, what happened then what to do."""
    exc = _leaf(exc)
    if isinstance(exc, _CONNECT):
        return f"cannot reach {_url(exc)}: {START_HINT}"
    if isinstance(exc, _TIMEOUT):
        return f"{_url(exc)} did not answer in time: retry, or see what is wrong with `samespace status`"
    if isinstance(exc, _STATUS):
        surface = "the admin API" if "/admin" in exc.request.url.path else MCP_SURFACE
        return str(refusal(surface, exc.response.status_code, exc.response.reason_phrase))
    if isinstance(exc, _REQUEST):
        return f"{type(exc).__name__} talking to {_url(exc)}: {_first_line(str(exc))}; {START_HINT}"
    if isinstance(exc, SamespaceError | ValueError):
        return _first_line(str(exc)) or type(exc).__name__
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror or type(exc).__name__}{where}"
    return f"unexpected {type(exc).__name__}: {_first_line(str(exc))} (--traceback shows where)"
