"""From a repository on disk to chunks: the walk (ignore files, deny-list, symlinks), the secret scan,
languages, syntax-aware chunking, generated-file detection, source reads and skip reasons."""

from __future__ import annotations

from cluster.ingest.chunking import chunk_file
from cluster.ingest.generated import generated_reason
from cluster.ingest.languages import KNOWN_LANGUAGES
from cluster.ingest.secret_scan import find_secrets
from cluster.ingest.skips import SkipLog, SkipReason, SkipSummary
from cluster.ingest.source import SourceLines, read_source_lines
from cluster.ingest.walker import walk_repository, walk_settings

__all__ = [
    "KNOWN_LANGUAGES",
    "SkipLog",
    "SkipReason",
    "SkipSummary",
    "SourceLines",
    "chunk_file",
    "find_secrets",
    "generated_reason",
    "read_source_lines",
    "walk_repository",
    "walk_settings",
]
