"""A tool whose actor is restarting, dead or too slow answers a named error, never a bare crash or a
remote traceback."""

from __future__ import annotations

import pytest
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayTaskError

from cluster.auth import Principal, acting_as
from serve_apps.mcp._calls import _tool_call, cluster_unavailable


async def _raise(exc: BaseException) -> None:
    raise exc


@pytest.mark.parametrize(
    ("exc", "name"),
    [
        (ActorUnavailableError("The actor is temporarily unavailable: IOError: restarting", None), "ActorUnavailable"),
        (GetTimeoutError("get timed out"), "GetTimeoutError"),
    ],
)
async def test_an_actor_restarting_or_too_slow_is_a_named_retryable_tool_error(exc: Exception, name: str) -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    with acting_as(Principal.shared("local")), pytest.raises(ToolError) as raised:
        await _tool_call("search_code", _raise(exc))
    assert str(raised.value).startswith(name) and "retry in a few seconds" in str(raised.value)
    assert "IOError" not in str(raised.value)  # Ray's own message stays in the server's log


def test_a_crash_inside_an_actor_is_named_by_its_class_without_the_remote_traceback() -> None:
    wrapped = RayTaskError("search", "Traceback ... secret-path/line 12", KeyError("k")).as_instanceof_cause()
    message = cluster_unavailable(wrapped)
    assert message == "KeyError in a cluster actor (see the server's log)"
