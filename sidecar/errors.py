"""The sidecar's errors, one root:

SidecarError
├── SettingsError      a bad option at start-up (the CLI exits 2)
├── MasterRejected     the master refused us with an HTTP status (handshake or fallback request)
│   └── AuthRejected   ... because of the fleet token (401/403 on a fallback request, 401 on the handshake)
├── ConnectionLost     the master link failed or closed: reconnect with backoff
└── UpstreamError      a fronted server failed a command; its message is sent to the master as-is
    └── OpenRouterError  ... the server being OpenRouter (a virtual container): with its HTTP status,
                         Retry-After and the error's whitelisted metadata, which the result carries
                         for the master's budget
"""

from __future__ import annotations

__all__ = [
    "AuthRejected",
    "ConnectionLost",
    "MasterRejected",
    "OpenRouterError",
    "SettingsError",
    "SidecarError",
    "UpstreamError",
]


class SidecarError(Exception):
    """Root of the sidecar's errors."""


class SettingsError(SidecarError, ValueError):
    """A command-line option or environment variable is invalid."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(option, problem)
        self.option = option
        self.problem = problem

    def __str__(self) -> str:
        return f"{self.option}: {self.problem}"


class MasterRejected(SidecarError):
    """The master (or a proxy in front of it) answered with an HTTP status instead of serving us."""

    def __init__(self, status: int, where: str) -> None:
        super().__init__(status, where)
        self.status = status
        self.where = where

    def __str__(self) -> str:
        return f"{self.where}: master answered HTTP {self.status}"


class AuthRejected(MasterRejected):
    """The master refused the fleet token."""

    def __str__(self) -> str:
        return f"{self.where}: master refused the fleet token (HTTP {self.status})"


class ConnectionLost(SidecarError):
    """The link to the master failed or was closed; the agent reconnects with backoff."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


class UpstreamError(SidecarError):
    """A fronted server failed: `message` is short and safe to send (no key, no stack trace)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class OpenRouterError(UpstreamError):
    """OpenRouter failed a virtual container's call (or it was refused before any was sent). `status`:
    OpenRouter's HTTP status, if it answered; `retry_after_s`: its Retry-After in seconds, if any;
    `metadata`: the few keys of its error `metadata` the master's error mapping reads (the wire's
    whitelist, `sidecar.wire.error_metadata`), nothing else of the body. Neither the message nor the
    metadata holds the key (the client scrubs it from any text OpenRouter sent back)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after_s: float | None = None,
        metadata: dict[str, str | int | float] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s
        self.metadata = dict(metadata or {})
