"""From a repository on disk to chunks: the walk (ignore files, deny-list, symlinks), the secret scan,
languages, syntax-aware chunking, generated-file detection, source reads and skip reasons; which
repository a folder belongs to (refused when its .git points elsewhere); what git says about a folder
(commit, branch, dirtiness, staleness) and a ref's tree exported from its objects."""

from __future__ import annotations

from cluster.ingest.chunking import chunk_file
from cluster.ingest.generated import generated_reason
from cluster.ingest.git_dir import GIT_DIR_RULE, Repository, find_repository
from cluster.ingest.git_state import (
    SourceState,
    Staleness,
    change_signature,
    export_tree,
    remote_urls,
    resolve_commit,
    source_state,
    staleness,
)
from cluster.ingest.languages import GRAMMARS, KNOWN_LANGUAGES, parse
from cluster.ingest.secret_scan import find_secrets
from cluster.ingest.skips import SkipLog, SkipReason, SkipSummary
from cluster.ingest.source import SourceLines, read_source_lines
from cluster.ingest.walker import walk_repository, walk_settings

__all__ = [
    "GIT_DIR_RULE",
    "GRAMMARS",
    "KNOWN_LANGUAGES",
    "Repository",
    "SkipLog",
    "SkipReason",
    "SkipSummary",
    "SourceLines",
    "SourceState",
    "Staleness",
    "change_signature",
    "chunk_file",
    "export_tree",
    "find_repository",
    "find_secrets",
    "generated_reason",
    "parse",
    "read_source_lines",
    "remote_urls",
    "resolve_commit",
    "source_state",
    "staleness",
    "walk_repository",
    "walk_settings",
]
