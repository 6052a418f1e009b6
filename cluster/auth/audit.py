"""The audit log: one JSON line per MCP tool call and admin action, in `<store.data_dir>/audit.jsonl`.

Each line names the caller (subject, client id, kind), the surface and the action (a tool's name, or an
admin route such as `PUT /admin/budget/caps`), the indexes it touched, its outcome, how long it took and
the cloud credits it spent. The query text is kept only under `audit.include_queries`; otherwise the
field is never written.

Several processes append to one file (every Serve replica on a node): each line is one `write` on an
O_APPEND descriptor, under an exclusive `flock` on `<path>.lock` that rotation takes too. (The config
store's lock, cluster/config/store.py, sits in a package above this one; the few lines are repeated
here.) Past `audit.max_bytes` the file is rotated: audit.jsonl -> audit.jsonl.1 -> ... ->
audit.jsonl.<audit.backups>, the oldest dropped. Files are 0600. A write that fails is logged once
(until one succeeds again) and never raised into the call it records.

`read` answers newest first across the rotated files, filtered (`AuditQuery`), reading each file
backwards so the newest lines cost the least.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from cluster.auth.principal import Principal
from cluster.settings import AuditSettings, SamespaceSettings
from cluster.types import Clock

__all__ = [
    "AUDIT_FILE",
    "MAX_AUDIT_READ",
    "AuditKind",
    "AuditLog",
    "AuditOutcome",
    "AuditQuery",
    "AuditRecord",
    "AuditSurface",
    "audit_path",
]

AUDIT_FILE = "audit.jsonl"
LOCK_SUFFIX = ".lock"
MAX_AUDIT_READ = 1000  # records one read answers at most
MAX_QUERY_CHARS = 4000  # a recorded query is cut here (the tools cap theirs lower)
READ_BLOCK = 64 * 1024

AuditKind = Literal["oauth", "token", "local", "anonymous"]
AuditSurface = Literal["mcp", "admin"]
AuditOutcome = Literal["ok", "error", "denied", "quota", "failed"]

log = logging.getLogger("samespace.audit")


class AuditRecord(BaseModel):
    """One audited call: who, through which surface, did what to which indexes, and how it ended."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time: AwareDatetime = Field(description="When the call ended (UTC).")
    subject: str = Field(description="The caller: a token's subject under oauth, else 'token' or 'local'.")
    client_id: str | None = Field(default=None, description="The OAuth client the caller used, when known.")
    kind: AuditKind
    surface: AuditSurface
    action: str = Field(min_length=1, description="A tool's name, or an admin route: 'PUT /admin/budget/caps'.")
    indexes: list[str] = Field(default_factory=list, description="The indexes the call named or answered from.")
    outcome: AuditOutcome = Field(
        description="ok; error (answered as an error); denied (scope or ownership); quota; failed (raised)."
    )
    ms: float = Field(ge=0, description="How long the call took.")
    credits: float = Field(default=0.0, ge=0, description="Cloud credits the call spent.")
    query: str | None = Field(default=None, description="The query text; only under audit.include_queries.")

    @classmethod
    def by(cls, principal: Principal, **fields: Any) -> AuditRecord:
        """A record of a call `principal` made: its subject, client id and kind, and `fields`."""
        caller = {"subject": principal.subject, "client_id": principal.client_id, "kind": principal.kind}
        return cls.model_validate({**caller, **fields})


class AuditQuery(BaseModel):
    """`GET /admin/audit`'s filters; every one given must match."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    subject: str | None = Field(default=None, max_length=500)
    action: str | None = Field(default=None, max_length=500)
    outcome: AuditOutcome | None = None
    index: str | None = Field(default=None, max_length=500)
    since: AwareDatetime | None = Field(default=None, description="Only records at or after this time.")
    until: AwareDatetime | None = Field(default=None, description="Only records at or before this time.")
    limit: int = Field(default=100, ge=1, le=MAX_AUDIT_READ, description="Most records to answer, newest first.")

    def matches(self, record: AuditRecord) -> bool:
        return (
            (self.subject is None or record.subject == self.subject)
            and (self.action is None or record.action == self.action)
            and (self.outcome is None or record.outcome == self.outcome)
            and (self.index is None or self.index in record.indexes)
            and (self.since is None or record.time >= self.since)
            and (self.until is None or record.time <= self.until)
        )


def audit_path(settings: SamespaceSettings) -> Path:
    """Where a node's audit log is: beside the embedded store."""
    return Path(settings.store.data_dir) / AUDIT_FILE


class AuditLog:
    """Appends and reads one node's audit log (safe across processes; see the module doc)."""

    def __init__(self, path: Path, settings: AuditSettings, clock: Clock) -> None:
        self.path = path
        self.settings = settings
        self._clock = clock
        self._lock_path = path.with_name(path.name + LOCK_SUFFIX)
        self._failing = False  # a write failed and was logged; the next success logs again

    def now(self) -> datetime:
        """The time a record made now carries."""
        return datetime.fromtimestamp(self._clock(), UTC)

    def append(self, record: AuditRecord) -> None:
        """Write one line (the query left out unless audit.include_queries). Never raises."""
        if not self.settings.enabled:
            return
        if record.query is not None:
            query = record.query[:MAX_QUERY_CHARS] if self.settings.include_queries else None
            record = record.model_copy(update={"query": query})
        line = (record.model_dump_json(exclude_none=True) + "\n").encode()
        try:
            with self._locked():
                self._rotate_for(len(line))
                _append_line(self.path, line)
        except OSError as exc:
            if not self._failing:
                log.warning("audit log %s not written (further failures not logged): %s", self.path, exc)
            self._failing = True
            return
        if self._failing:
            log.warning("audit log %s written again", self.path)
            self._failing = False

    def read(self, query: AuditQuery) -> list[AuditRecord]:
        """The records that match, newest first, at most `query.limit`; a line that does not parse is skipped."""
        found: list[AuditRecord] = []
        for handle, size in self._snapshot():
            with handle:
                for line in _lines_backwards(handle.fileno(), size):
                    try:
                        record = AuditRecord.model_validate_json(line)
                    except ValidationError:
                        continue
                    if query.matches(record):
                        found.append(record)
                        if len(found) >= query.limit:
                            break
            if len(found) >= query.limit:
                break
        return found

    # ---- internals ---------------------------------------------------------------------------
    def _files(self) -> list[Path]:
        """The log and its rotated files, newest first."""
        return [self.path] + [self.path.with_name(f"{self.path.name}.{n}") for n in range(1, self.settings.backups + 1)]

    def _snapshot(self) -> list[tuple[_Handle, int]]:
        """Every file open with its size, taken under the lock: a rotation while they are read moves
        names, not the open files, and a line appended after is not read."""
        opened: list[tuple[_Handle, int]] = []
        try:
            with self._locked():
                for path in self._files():
                    try:
                        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
                    except FileNotFoundError:
                        continue
                    opened.append((_Handle(fd), os.fstat(fd).st_size))
        except OSError as exc:
            log.warning("audit log %s not read: %s", self.path, exc)
            for handle, _ in opened:
                handle.close()
            return []
        return opened

    def _rotate_for(self, incoming: int) -> None:
        """Rotate when `incoming` more bytes would take the log past audit.max_bytes (caller holds the lock)."""
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return
        if size == 0 or size + incoming <= self.settings.max_bytes:
            return
        files = self._files()
        if len(files) == 1:  # no backups kept: start the file again
            self.path.unlink()
            return
        files[-1].unlink(missing_ok=True)
        for older, newer in zip(reversed(files[1:]), reversed(files[:-1]), strict=True):
            if newer.exists():
                newer.rename(older)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel if the holder dies
            yield
        finally:
            os.close(fd)


class _Handle:
    """A raw descriptor closed on leaving a `with`."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> _Handle:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _append_line(path: Path, line: bytes) -> None:
    """One write on an O_APPEND descriptor of a 0600 file (made 0600 if it was not)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        if os.fstat(fd).st_mode & 0o777 != 0o600:
            os.fchmod(fd, 0o600)
        os.write(fd, line)
    finally:
        os.close(fd)


def _lines_backwards(fd: int, size: int) -> Iterator[bytes]:
    """The non-empty lines of the first `size` bytes of a file, last first, read in blocks from the end."""
    end, rest = size, b""
    while end > 0:
        start = max(0, end - READ_BLOCK)
        block = os.pread(fd, end - start, start) + rest
        end = start
        lines = block.split(b"\n")
        rest = lines.pop(0) if end > 0 else b""  # the first piece may continue in the block before
        for line in reversed(lines):
            if line.strip():
                yield line
