"""Collect: a repository on disk into chunks, and what was left out.

Each chunk carries the code-graph facts on its lines (`cluster.graph`). One file never fails the
walk: a generated or minified file, or one the chunker cannot handle, is skipped with its reason;
a chunk holding a credential is dropped, with its facts, before anything embeds, stores or sends
it. Only paths and reasons reach the log, never contents.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cluster.build.stages import Stage, StageTimes
from cluster.graph import attach_facts, file_facts
from cluster.ingest import (
    SkipLog,
    SkipReason,
    SkipSummary,
    chunk_file,
    find_secrets,
    generated_reason,
    walk_repository,
    walk_settings,
)
from cluster.settings import SamespaceSettings
from cluster.types import Chunk, content_hash


@dataclass(frozen=True)
class RepoChunks:
    """A walked and chunked repository: every chunk, its file, each file's path and hash, and what
    was left out (secret files, generated files, files that failed to chunk, chunks with secrets)."""

    chunks: list[Chunk]
    owners: list[int]  # per chunk: the index of its file
    paths: list[str]  # per file
    file_hashes: list[str]  # per file: sha256 of its text
    skipped: SkipSummary = field(default_factory=SkipSummary)

    @property
    def files(self) -> int:
        return len(self.paths)


def collect_repository(
    repo: Path,
    settings: SamespaceSettings,
    emit: Callable[[str], None] = lambda line: None,
    stages: StageTimes | None = None,
    on_file: Callable[[Sequence[Chunk]], None] | None = None,
) -> RepoChunks:
    """Walk and chunk `repo`, timing each step in `stages`; after each indexed file, `on_file` gets
    every chunk collected so far (the early feed, `cluster.build.feed`). A root that cannot be
    scanned raises ScanError."""
    stages = stages or StageTimes(time.perf_counter)
    chunking = settings.chunking
    skips = SkipLog()
    chunks: list[Chunk] = []
    owners: list[int] = []
    paths: list[str] = []
    file_hashes: list[str] = []
    for source in stages.timed(Stage.WALK, walk_repository(repo, walk_settings(settings), skips)):
        with stages.timing(Stage.CHUNK):
            reason = generated_reason(source.path, source.text)
        if reason is not None:
            skips.add(SkipReason.GENERATED, source.path)
            emit(f"skipped {source.path}: {reason}")
            continue
        try:
            with stages.timing(Stage.CHUNK):
                file_chunks = chunk_file(source.path, source.text, chunking)
            if file_chunks:
                with stages.timing(Stage.GRAPH):
                    facts = file_facts(source.path, file_chunks[0].language, source.text)
                    file_chunks = attach_facts(file_chunks, facts)
        except Exception as exc:  # noqa: BLE001 - one hostile file never fails the job (the chunker should not raise)
            skips.add(SkipReason.CHUNK_FAILED, source.path)
            emit(f"skipped {source.path}: the chunker failed ({type(exc).__name__})")
            continue
        with stages.timing(Stage.SECRETS):
            kept = _without_secrets(source.path, source.text, file_chunks, skips)
        if file_chunks and not kept:
            continue  # nothing of this file may be served: it is not an indexed file at all
        chunks.extend(kept)
        owners.extend([len(paths)] * len(kept))
        paths.append(source.path)
        file_hashes.append(content_hash(source.text))
        if on_file is not None and kept:
            on_file(chunks)
    return RepoChunks(chunks, owners, paths, file_hashes, skips.summary())


def _without_secrets(path: str, text: str, file_chunks: list[Chunk], skips: SkipLog) -> list[Chunk]:
    """The chunks of a file that hold no credential; each dropped one is counted in `skips`."""
    # Scan the whole file once: a window in the middle of a long key holds neither its BEGIN nor END.
    secret_lines = [(f.line, f.end_line) for f in find_secrets(text)]
    kept = []
    for chunk in file_chunks:
        if any(start <= chunk.end_line and chunk.start_line <= end for start, end in secret_lines):
            skips.add(SkipReason.SECRET_CONTENT, path)
        else:
            kept.append(chunk)
    return kept


def report_skips(skipped: SkipSummary, emit: Callable[[str], None]) -> None:
    """The skip summary for the job log: counts per reason, then the paths of each (no contents)."""
    emit(skipped.line())
    for reason, paths in sorted(skipped.paths.items()):
        more = skipped.counts.get(reason, 0) - len(paths) if reason != SkipReason.SECRET_CONTENT.value else 0
        emit(f"  {reason}: {', '.join(paths)}" + (f" (and {more} more)" if more > 0 else ""))


def collect_chunks(repo: Path, settings: SamespaceSettings) -> tuple[list[Chunk], list[int], int]:
    """Every chunk of the repository, the file index of each chunk, and the file count."""
    found = collect_repository(repo, settings)
    return found.chunks, found.owners, found.files
