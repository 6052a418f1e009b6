"""Reading exact source lines of an indexed repository: bounded, confined to its root, never a secret.

Lines are numbered as the chunker numbers them (cluster.ingest.chunking.split_lines) and decoded as the
walker decodes them, so a chunk's line range reads back its own lines. Credentials in the text are
redacted (cluster.ingest.secret_scan) and a path on the secret deny-list is refused even when asked for
by name: a file whose clean chunks are indexed never serves its credential line. The file is opened
from the root's handle with no symlink followed on any component, so a folder or file of the path
replaced by a link after it was indexed (or after the path was checked) is refused, not followed.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from pydantic import Field

from cluster.errors import ReadRefused
from cluster.ingest.chunking import split_lines
from cluster.ingest.nofollow import FileTooLarge, NotRegularFile, open_file_below, open_folder, read_regular
from cluster.ingest.secret_files import DenyList
from cluster.ingest.secret_scan import redact
from cluster.ingest.walker import decode_source
from cluster.types import Strict

MAX_READ_BYTES = 64 << 20  # a file this large was never indexed: refused rather than read into memory


class SourceLines(Strict):
    repo: str
    path: str
    start_line: int
    end_line: int = Field(description="Last line returned (may be below the requested end at end of file).")
    total_lines: int
    truncated: bool = Field(description="True when the request was cut to the per-call line limit.")
    text: str


def read_source_lines(
    repo: str,
    root: Path,
    path: str,
    start_line: int,
    end_line: int,
    max_lines: int,
    deny: DenyList | None = None,
) -> SourceLines:
    """Lines start..end (1-based, inclusive) of root/path; never leaves root, never more than max_lines.

    ``deny`` is the walk's deny-list with its re-includes (WalkSettings.deny_list()); the default
    deny-list when None. The path asked for and the file it resolves to must both pass it.
    """
    if start_line < 1 or end_line < start_line:
        raise ReadRefused(repo, path, f"invalid line range {start_line}..{end_line}")
    lines = split_lines(read_source_text(repo, root, path, deny))
    if start_line > len(lines):
        raise ReadRefused(repo, path, f"file has {len(lines)} lines, start_line is {start_line}")
    last = min(end_line, len(lines), start_line + max_lines - 1)
    return SourceLines(
        repo=repo,
        path=path,
        start_line=start_line,
        end_line=last,
        total_lines=len(lines),
        truncated=last < min(end_line, len(lines)),
        text="\n".join(lines[start_line - 1 : last]),
    )


def read_source_file(repo: str, root: Path, path: str, max_bytes: int, deny: DenyList | None = None) -> SourceLines:
    """The whole of root/path, its exact text as `read_source_text` serves it (confined, no symlink
    followed, never denied, credentials redacted); ReadRefused past `max_bytes` (a file that large
    was never indexed: it grew since)."""
    text = read_source_text(repo, root, path, deny)
    if len(text.encode("utf-8")) > max_bytes:
        raise ReadRefused(repo, path, f"over {max_bytes} bytes now (a file that large is never indexed)")
    total = len(split_lines(text))
    return SourceLines(
        repo=repo, path=path, start_line=1, end_line=total, total_lines=total, truncated=False, text=text
    )


def read_source_text(repo: str, root: Path, path: str, deny: DenyList | None = None) -> str:
    """The whole text of root/path as an indexed file's text is served: confined to root, no symlink
    followed, never a deny-listed file, decoded as the walker decodes, credentials redacted.
    ReadRefused otherwise (outside root, secret, missing, binary, too large, a link on its path)."""
    rules = DenyList.default() if deny is None else deny
    base = root.resolve()
    target = (base / path).resolve()
    if not target.is_relative_to(base) or target == base:
        raise ReadRefused(repo, path, "path is outside the repository")
    if rules.refuses(Path(path).as_posix()) or rules.refuses(target.relative_to(base).as_posix()):
        raise ReadRefused(repo, path, "a secret file (on the deny-list) or inside .git is never served")
    data = _read_confined(repo, path, base, target.relative_to(base).as_posix())
    text = decode_source(data)
    if text is None:
        raise ReadRefused(repo, path, "not a text file")
    return redact(text)


def _read_confined(repo: str, path: str, base: Path, relative: str) -> bytes:
    """The bytes of `relative` below the real folder `base`, opened without following any symlink."""
    try:
        root_fd = open_folder(base)
        try:
            fd = open_file_below(root_fd, relative)
        finally:
            os.close(root_fd)
        try:
            return read_regular(fd, MAX_READ_BYTES)
        finally:
            os.close(fd)
    except (FileNotFoundError, NotRegularFile):
        raise ReadRefused(repo, path, "no such file in the repository") from None
    except FileTooLarge:
        raise ReadRefused(repo, path, f"over {MAX_READ_BYTES} bytes") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ReadRefused(repo, path, "a symlink now stands on its path: not followed") from None
        raise ReadRefused(repo, path, f"cannot be read ({exc.strerror or type(exc).__name__})") from exc
