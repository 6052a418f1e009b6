"""The history step of a reindex: mine the commits since the last mined one, embed them, store them.

After the build (or after finding nothing to build), for a git source: the first time, the newest
`index.history_commits` commits of the indexed ref's first-parent line; after that, every commit
since the newest mined (an incremental reindex after one commit mines that one commit). A history
left short by the bound says so in `index_status`; with `index.history_backfill` on, the job goes on
after the index is served, `index.history_commits` older commits at a time, each batch stored as it
lands (the history tools reach further as it goes), until the history is whole. A history of another encoder
space, or of another folder, is mined again from the top. The commit texts are embedded by the
build's encoders in the index's space and written beside the index (`cluster.index.history_store`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cluster.build.ports import BuildPorts, Emit
from cluster.cloud import Priority
from cluster.history import CommitRecord, MinedBatch, mine_history, still_on_line
from cluster.index import HistoryState, commit_text
from cluster.ingest import SourceState, walk_settings
from cluster.settings import SamespaceSettings
from cluster.space import EncoderIdentity
from cluster.types import Clock

__all__ = ["HistoryStep"]


class HistoryStep:
    """Mines and stores one index's history through the build's ports."""

    def __init__(self, ports: BuildPorts, settings: SamespaceSettings, emit: Emit, clock: Clock = time.monotonic):
        self._ports = ports
        self._settings = settings
        self._emit = emit
        self._clock = clock

    def run(self, name: str, folder: Path, source: SourceState, reference: EncoderIdentity) -> HistoryState | None:
        """Bring the history of index `name` up to `source.commit`; None when there is none to keep."""
        bound = self._settings.index.history_commits
        if bound == 0 or source.vcs != "git" or source.commit is None:
            return None
        held = self._ports.index.history_state(name)
        if held is not None and (held.identity.space_id != reference.space_id or held.folder != str(folder)):
            self._emit("history: mined again (the encoder space or the folder changed)")
            held = None
        if held is not None and not still_on_line(folder, held.newest, source.commit):
            self._emit(f"history: mined again ({held.newest[:12]} is no longer in the history of {source.commit[:12]})")
            held = None
        if held is None:
            batch = self._mine(folder, source.commit, None, bound)
            held = self._store(name, folder, reference, batch, newest=source.commit, older=None)
        elif held.newest != source.commit:
            batch = self._mine(folder, source.commit, held.newest, None)
            held = self._store(name, folder, reference, batch, newest=source.commit, older=held)
        else:
            self._emit(f"history: up to date at {held.newest[:12]} ({held.commits} commits)")
        if self._settings.index.history_backfill:
            held = self._backfill(name, folder, reference, held, bound)
        return held

    def _backfill(
        self, name: str, folder: Path, reference: EncoderIdentity, held: HistoryState, bound: int
    ) -> HistoryState:
        """Older commits, `bound` at a time, each batch stored before the next is mined, until none remain."""
        while held.more and held.oldest is not None:
            batch = self._mine(folder, f"{held.oldest}^", None, bound)
            held = self._store(name, folder, reference, batch, newest=held.newest, older=held, backfill=True)
        return held

    def _mine(self, folder: Path, head: str, stop: str | None, limit: int | None) -> MinedBatch:
        started = self._clock()
        deny = walk_settings(self._settings).deny_list()
        batch = mine_history(
            folder,
            head,
            stop=stop,
            limit=limit,
            max_file_bytes=self._settings.chunking.max_file_bytes,
            deny=deny,
            progress=self._progress,
        )
        took = max(self._clock() - started, 1e-9)
        after = f" after {stop[:12]}" if stop else ""
        self._emit(
            f"history: mined {len(batch.commits)} commits{after} in {took:.1f}s "
            f"({len(batch.commits) / took:.1f}/s){'; older ones remain' if batch.more else ''}"
        )
        return batch

    def _progress(self, done: int, total: int) -> None:
        self._emit(f"history: {done}/{total} commits mined")

    def _store(
        self,
        name: str,
        folder: Path,
        reference: EncoderIdentity,
        batch: MinedBatch,
        *,
        newest: str,
        older: HistoryState | None,
        backfill: bool = False,
    ) -> HistoryState:
        vectors, writers = self._embed(name, batch.commits, reference)
        if older is not None and (not backfill or batch.oldest is None):  # newer commits on top of the mined
            oldest, oldest_at, more = older.oldest, older.oldest_at, older.more and not backfill
        elif batch.oldest is not None:  # a first mine, or older commits below the mined
            oldest, oldest_at, more = batch.oldest.commit, batch.oldest.committed_at, batch.more
        else:  # nothing touched the folder
            oldest, oldest_at, more = None, None, False
        state = HistoryState(
            index=name,
            folder=str(folder),
            newest=newest,
            oldest=oldest,
            oldest_at=oldest_at,
            more=more,
            identity=reference,
        )
        stored = self._ports.index.write_history(state, batch.commits, vectors, writers, replace=older is None)
        self._emit(f"history: {stored.commits} commits stored{', older ones remain' if stored.more else ''}")
        return stored

    def _embed(
        self, name: str, commits: Sequence[CommitRecord], reference: EncoderIdentity
    ) -> tuple[list[list[float]], list[dict[str, Any]]]:
        """Each commit's text embedded by the build's encoders (the gate admits only the reference's space)."""
        if not commits:
            return [], []
        vectors: list[list[float]] = [[] for _ in commits]
        writers: list[dict[str, Any]] = [{} for _ in commits]
        texts = [commit_text(c) for c in commits]
        for batch in self._ports.encoders.embed_stream(texts, name, Priority.BULK):
            writer = (batch.identity or reference).model_dump(mode="json")
            for at, row in zip(batch.indices, batch.vectors, strict=True):
                vectors[at] = [float(x) for x in row]
                writers[at] = writer
        return vectors, writers
