"""Reading exact source lines of an indexed repository, bounded and confined to its root."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from cluster.errors import ReadRefused
from cluster.types import Strict


class SourceLines(Strict):
    repo: str
    path: str
    start_line: int
    end_line: int = Field(description="Last line returned (may be below the requested end at end of file).")
    total_lines: int
    truncated: bool = Field(description="True when the request was cut to the per-call line limit.")
    text: str


def read_source_lines(
    repo: str, root: Path, path: str, start_line: int, end_line: int, max_lines: int
) -> SourceLines:
    """Lines start..end (1-based, inclusive) of root/path; never leaves root, never more than max_lines."""
    if start_line < 1 or end_line < start_line:
        raise ReadRefused(repo, path, f"invalid line range {start_line}..{end_line}")
    base = root.resolve()
    target = (base / path).resolve()
    if not target.is_relative_to(base) or target == base:
        raise ReadRefused(repo, path, "path is outside the repository")
    if not target.is_file():
        raise ReadRefused(repo, path, "no such file in the repository")
    try:
        lines = target.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ReadRefused(repo, path, "not a UTF-8 text file") from exc
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
