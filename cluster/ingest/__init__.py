"""From a repository on disk to chunks: the walk (ignore files, deny-list, symlinks), the secret scan,
languages, syntax-aware chunking, generated-file detection, source reads and skip reasons; which
repository a folder belongs to (refused when its .git points elsewhere); what git says about a folder
(commit, branch, dirtiness, staleness) and a ref's tree exported from its objects."""

from __future__ import annotations

from cluster.ingest.categories import (
    CATEGORIES,
    CLASS_KINDS,
    DOC_LANGUAGES,
    MAX_EXCLUDE_GLOBS,
    MAX_GLOB_CHARS,
    MODULE_KINDS,
    TEST,
    Category,
    SearchControls,
    TestsMode,
    chunk_categories,
)
from cluster.ingest.chunking import chunk_file
from cluster.ingest.generated import generated_reason
from cluster.ingest.git_dir import GIT_DIR_RULE, Repository, find_repository
from cluster.ingest.git_state import (
    SafeGit,
    SourceState,
    Staleness,
    change_signature,
    export_tree,
    remote_urls,
    resolve_commit,
    source_state,
    staleness,
)
from cluster.ingest.ignore_rules import ALWAYS_SKIPPED_DIRS
from cluster.ingest.languages import GRAMMARS, KNOWN_LANGUAGES, detect_language, parse
from cluster.ingest.secret_files import DenyList
from cluster.ingest.secret_scan import find_secrets, redact
from cluster.ingest.skips import SkipLog, SkipReason, SkipSummary
from cluster.ingest.source import SourceLines, read_source_file, read_source_lines, read_source_text
from cluster.ingest.testcode import is_test_chunk, is_test_path
from cluster.ingest.walker import DEFAULT_MAX_FILE_BYTES, walk_repository, walk_settings

__all__ = [
    "ALWAYS_SKIPPED_DIRS",
    "CATEGORIES",
    "CLASS_KINDS",
    "DEFAULT_MAX_FILE_BYTES",
    "DOC_LANGUAGES",
    "GIT_DIR_RULE",
    "GRAMMARS",
    "KNOWN_LANGUAGES",
    "MAX_EXCLUDE_GLOBS",
    "MAX_GLOB_CHARS",
    "MODULE_KINDS",
    "TEST",
    "Category",
    "DenyList",
    "Repository",
    "SafeGit",
    "SearchControls",
    "SkipLog",
    "SkipReason",
    "SkipSummary",
    "SourceLines",
    "SourceState",
    "Staleness",
    "TestsMode",
    "change_signature",
    "chunk_categories",
    "chunk_file",
    "detect_language",
    "export_tree",
    "find_repository",
    "find_secrets",
    "generated_reason",
    "is_test_chunk",
    "is_test_path",
    "parse",
    "read_source_file",
    "read_source_lines",
    "read_source_text",
    "redact",
    "remote_urls",
    "resolve_commit",
    "source_state",
    "staleness",
    "walk_repository",
    "walk_settings",
]
