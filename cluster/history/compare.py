"""The symbols that differ between two commits of a folder, each with a short diff: `compare`.

One `git diff` from base to head (the hardened git, the patch's form set on the command line), the
touched files' two versions parsed by the code graph's reader, their definitions laid over the hunks
as the history does (`cluster.history.mine.Miner`): added, modified, removed, renamed or moved. Each
symbol gets the diff lines of the hunks that meet it, capped; the whole answer is capped too.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from cluster.history.git_log import FileDiff, diff_between, read_blobs
from cluster.history.mine import Miner
from cluster.history.models import Change, SymbolChange
from cluster.ingest import DEFAULT_MAX_FILE_BYTES, DenyList, SafeGit, redact
from cluster.types import Strict

__all__ = ["ComparedSymbol", "Comparison", "compare_commits"]

MAX_DIFF_LINES = 40  # diff lines shown per symbol


class ComparedSymbol(Strict):
    path: str
    symbol: str
    kind: str
    change: Change
    previous_path: str | None = None
    previous_symbol: str | None = None
    diff: str = Field(description="The -/+ lines of the hunks that meet it (credentials redacted), capped.")
    diff_truncated: bool = False


class Comparison(Strict):
    repo: str
    base: str = Field(description="The full sha `base` resolved to.")
    head: str = Field(description="The full sha `head` resolved to.")
    items: list[ComparedSymbol] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list, description="Every file that differs (the confined ones).")
    truncated: bool = False


def compare_commits(
    repo: str,
    folder: Path,
    base: str,
    head: str,
    limit: int = 100,
    *,
    deny: DenyList | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> Comparison:
    """The symbols that differ from commit `base` to commit `head` (full shas) in `folder`."""
    git = SafeGit(folder)
    miner = Miner(git, max_file_bytes, deny or DenyList.default())
    files = miner.admitted(diff_between(git, base, head))
    names = miner.blob_names(files, base, head)
    blobs = dict(zip(names, read_blobs(git, names), strict=True))
    changes = miner.symbols(files, base, head, blobs)
    by_path = {f.path: f for f in files} | {f.previous_path: f for f in files if f.previous_path}
    items = [_compared(change, by_path) for change in changes[:limit]]
    return Comparison(
        repo=repo, base=base, head=head, items=items, files=[f.path for f in files], truncated=len(changes) > limit
    )


def _compared(change: SymbolChange, by_path: dict[str, FileDiff]) -> ComparedSymbol:
    old_lines = (
        change.lines if change.change is Change.REMOVED else [change.previous_lines] if change.previous_lines else []
    )
    new_lines = [] if change.change is Change.REMOVED else change.lines
    f = by_path.get(change.path)
    lines: list[str] = []
    for hunk, text in zip(f.hunks, f.texts, strict=False) if f is not None else ():
        old_at, new_at = hunk.old_start, hunk.new_start
        for line in text:  # a hunk's -/+ lines: each at its line of the parent or of the commit
            if line.startswith("-"):
                if any(r.start <= old_at <= r.end for r in old_lines):
                    lines.append(line)
                old_at += 1
            else:
                if any(r.start <= new_at <= r.end for r in new_lines):
                    lines.append(line)
                new_at += 1
    shown = lines[:MAX_DIFF_LINES]
    return ComparedSymbol(
        path=change.path,
        symbol=change.symbol,
        kind=change.kind,
        change=change.change,
        previous_path=change.previous_path,
        previous_symbol=change.previous_symbol,
        diff=redact("\n".join(shown)),
        diff_truncated=len(lines) > len(shown),
    )
