"""Mine a folder's first-parent history: each commit's message, files and the symbols it changed.

Only the files a commit touched are parsed, in its version and its parent's (`cat-file` by name, no
checkout); the definitions come from the code graph's own reader (`cluster.graph.file_facts`), so a
symbol of the history is the symbol of the graph and of search. Incremental: `stop` is the newest
commit mined before, and only the commits after it are read. Bounded: `limit` commits at most,
newest first, and the batch says whether older ones remain. Confined like the index: a path the
secret deny-list refuses, or under a folder no walk enters, is not recorded; a file over the size
cap or binary is recorded without symbols; credentials in messages are redacted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cluster.graph import SPECS, file_facts
from cluster.history.git_log import CommitDiff, FileDiff, RawCommit, commit_diffs, on_line, read_blobs, read_commits
from cluster.history.models import CommitRecord, FileChange, Span, SymbolChange
from cluster.history.symbol_diff import FileVersion, Unpaired, file_changes, pair_moves
from cluster.ingest import ALWAYS_SKIPPED_DIRS, DEFAULT_MAX_FILE_BYTES, DenyList, SafeGit, detect_language, redact

__all__ = ["MinedBatch", "mine_history", "still_on_line"]

COMMITS_PER_READ = 64  # commits whose blobs are read together (bounds the memory of a long history)
Progress = Callable[[int, int], None]  # (commits done, commits to do)


@dataclass(frozen=True)
class MinedBatch:
    """Commits mined, newest first; `more`: older commits remain that `limit` left out. `spans`: the
    definitions of each file the batch touched, in its newest version (a file deleted: none), from
    where `symbol_history` follows a definition's lines back (`History.with_spans` merges batches)."""

    commits: list[CommitRecord]
    more: bool
    spans: dict[str, list[Span]] = field(default_factory=dict)

    @property
    def newest(self) -> str | None:
        return self.commits[0].commit if self.commits else None

    @property
    def oldest(self) -> CommitRecord | None:
        return self.commits[-1] if self.commits else None


def mine_history(
    folder: Path,
    head: str,
    *,
    stop: str | None = None,
    limit: int | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    deny: DenyList | None = None,
    progress: Progress | None = None,
) -> MinedBatch:
    """The commits of `head`'s first-parent history after `stop` (all when None), newest first, at
    most `limit`."""
    git = SafeGit(folder)
    diffs = commit_diffs(git, head, stop, None if limit is None else limit + 1)
    more = limit is not None and len(diffs) > limit
    diffs = diffs[:limit] if limit is not None else diffs
    miner = Miner(git, max_file_bytes, deny or DenyList.default())
    records: list[CommitRecord] = []
    for start in range(0, len(diffs), COMMITS_PER_READ):
        records.extend(miner.commits(diffs[start : start + COMMITS_PER_READ]))
        if progress is not None:
            progress(len(records), len(diffs))
    return MinedBatch(records, more, miner.spans)


def still_on_line(folder: Path, commit: str, head: str) -> bool:
    """Whether `commit` (the newest mined) is still in `head`'s history: false after a rebase or a
    force push, when the history must be mined again from the top."""
    return on_line(SafeGit(folder), commit, head)


class Miner:
    """Reads the symbols of diffs: the touched files' two versions, parsed; confined like the index."""

    def __init__(self, git: SafeGit, max_file_bytes: int, deny: DenyList) -> None:
        self.git = git
        self.max_file_bytes = max_file_bytes
        self.deny = deny
        self.spans: dict[str, list[Span]] = {}  # newest first: the first version of a path seen is its newest

    def commits(self, diffs: Sequence[CommitDiff]) -> list[CommitRecord]:
        raw = read_commits(self.git, [d.sha for d in diffs])
        kept = [(d, raw[d.sha], self.admitted(d.files)) for d in diffs if d.sha in raw]
        names = [
            name
            for diff, commit, files in kept
            for name in self.blob_names(files, commit.parents[0] if commit.parents else None, diff.sha)
        ]
        blobs = dict(zip(names, read_blobs(self.git, names), strict=True))
        return [self._record(diff, commit, files, blobs) for diff, commit, files in kept]

    def admitted(self, files: Sequence[FileDiff]) -> list[FileDiff]:
        return [f for f in files if self._admits(f)]

    def blob_names(self, files: Sequence[FileDiff], old_rev: str | None, new_rev: str) -> list[str]:
        """The blobs `symbols` reads: each parsed file's version in `old_rev` and in `new_rev`."""
        names: list[str] = []
        for f in files:
            if self._parsed(f):
                if f.status != "A" and old_rev is not None and f.previous_path:
                    names.append(f"{old_rev}:./{f.previous_path}")
                if f.status != "D":
                    names.append(f"{new_rev}:./{f.path}")
        return names

    def symbols(
        self, files: Sequence[FileDiff], old_rev: str | None, new_rev: str, blobs: dict[str, bytes | None]
    ) -> list[SymbolChange]:
        """The definitions `files` (a diff from `old_rev` to `new_rev`) added, modified, removed,
        renamed or moved; the newest version's spans of each file kept (`spans`)."""
        symbols: list[SymbolChange] = []
        added: list[Unpaired] = []
        removed: list[Unpaired] = []
        for f in files:
            if not self._parsed(f):
                continue
            old = None
            if f.status != "A" and old_rev is not None and f.previous_path:
                old = self._version(f.previous_path, blobs.get(f"{old_rev}:./{f.previous_path}"))
            new = self._version(f.path, blobs.get(f"{new_rev}:./{f.path}")) if f.status != "D" else None
            if f.path not in self.spans:
                self.spans[f.path] = (
                    [Span(symbol=d.qualified, kind=d.kind, start=d.line, end=d.end_line) for d in new.definitions]
                    if new is not None
                    else []
                )
            if f.previous_path and f.previous_path != f.path:
                self.spans.setdefault(f.previous_path, [])
            if old is None and new is None:
                continue
            found = file_changes(old, new, f.hunks)
            symbols.extend(found.changes)
            added.extend(found.added)
            removed.extend(found.removed)
        added, removed, moved = pair_moves(added, removed)  # across files: definitions moved
        return [*symbols, *moved, *(u.change for u in added), *(u.change for u in removed)]

    def _record(
        self, diff: CommitDiff, commit: RawCommit, files: list[FileDiff], blobs: dict[str, bytes | None]
    ) -> CommitRecord:
        parent = commit.parents[0] if commit.parents else None
        symbols = self.symbols(files, parent, diff.sha, blobs)
        subject, _, body = redact(commit.message).partition("\n")
        return CommitRecord(
            commit=diff.sha,
            parent=parent,
            merge=len(commit.parents) > 1,
            author=commit.author,
            authored_at=commit.authored_at,
            committed_at=commit.committed_at,
            subject=subject.strip(),
            body=body.strip(),
            files=[
                FileChange(
                    path=f.path,
                    status=f.status,
                    previous_path=f.previous_path if f.status == "R" else None,
                    hunks=[(h.old_start, h.old_count, h.new_start, h.new_count) for h in f.hunks],
                )
                for f in files
            ],
            symbols=symbols,
        )

    def _admits(self, f: FileDiff) -> bool:
        return all(path is None or self._allowed(path) for path in (f.path, f.previous_path)) and bool(f.path)

    def _allowed(self, path: str) -> bool:
        parts = path.split("/")
        return not any(part in ALWAYS_SKIPPED_DIRS for part in parts[:-1]) and not self.deny.refuses(path)

    def _parsed(self, f: FileDiff) -> bool:
        return not f.binary and detect_language(f.path) in SPECS

    def _version(self, path: str, data: bytes | None) -> FileVersion | None:
        if data is None or len(data) > self.max_file_bytes or b"\0" in data:
            return None
        text = data.decode("utf-8", errors="replace")
        facts = file_facts(path, detect_language(path), text)
        return FileVersion(path, text.splitlines(), facts.definitions)
