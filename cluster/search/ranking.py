"""How the code tools order what they find: symbol-match tiers and their scores, file-match ranks,
and the merge of per-repository results.

Every tier's score range lies strictly below the one above it, so a score alone orders hits
across repositories; ties go to definitions before windows, sections and module runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cluster.search.models import FileHit, SymbolHit

__all__ = [
    "DEFINITION_KINDS",
    "FILE_MATCH_RANK",
    "SCORE_EXACT",
    "SCORE_EXACT_CI",
    "SCORE_MEMBER",
    "SCORE_MEMBER_CI",
    "file_hit_key",
    "kind_rank",
    "merge_file_hits",
    "merge_symbol_hits",
    "prefix_score",
    "substring_score",
    "symbol_hit_key",
    "tokens_score",
]

# Kinds that name a definition (rank before windows, sections and module runs in ties).
DEFINITION_KINDS = frozenset(
    {"function", "method", "class", "struct", "interface", "enum", "trait", "type", "impl", "record", "union", "macro"}
)

# Tier scores of search_symbols; every tier's range lies strictly below the one above it.
SCORE_EXACT = 1.0
SCORE_MEMBER = 0.95
SCORE_EXACT_CI = 0.9
SCORE_MEMBER_CI = 0.85
_PREFIX_BASE, _PREFIX_SPAN = 0.6, 0.2  # [0.6, 0.8]
_SUBSTRING_BASE, _SUBSTRING_SPAN = 0.4, 0.15  # [0.4, 0.55]
_TOKENS_SYMBOL, _TOKENS_DEFINITION = 0.3, 0.08  # (0, 0.38]

# search_files: exact basename, then name without extension, then path substring, then tokens.
FILE_MATCH_RANK = {"basename": 0, "stem": 1, "path": 2, "tokens": 3}


def kind_rank(kind: str) -> int:
    """0 for definitions (function, method, class, ...), 1 for windows, sections and module runs."""
    return 0 if kind in DEFINITION_KINDS else 1


def prefix_score(query_chars: int, matched_chars: int) -> float:
    """A name starting with the query: the more of the name the query covers, the higher."""
    return _PREFIX_BASE + _PREFIX_SPAN * query_chars / matched_chars


def substring_score(query_chars: int, symbol_chars: int) -> float:
    """A name holding the query elsewhere: the more of the name the query covers, the higher."""
    return _SUBSTRING_BASE + _SUBSTRING_SPAN * query_chars / symbol_chars


def tokens_score(query_tokens: set[str], symbol_tokens: frozenset[str], definition_tokens: frozenset[str]) -> float:
    """Identifier tokens shared with the name (Jaccard) and found on the definition's line; 0 when none."""
    shared = len(query_tokens & symbol_tokens)
    jaccard = shared / len(query_tokens | symbol_tokens) if shared else 0.0
    found = len(query_tokens & definition_tokens) / len(query_tokens)
    return _TOKENS_SYMBOL * jaccard + _TOKENS_DEFINITION * found


def symbol_hit_key(hit: SymbolHit) -> tuple[float, int, str, str, int]:
    return (-hit.score, kind_rank(hit.kind), hit.repo, hit.path, hit.start_line)


def file_hit_key(hit: FileHit) -> tuple[int, int, str, str]:
    return (FILE_MATCH_RANK.get(hit.match, len(FILE_MATCH_RANK)), len(hit.path), hit.path, hit.repo)


def merge_symbol_hits(lists: Iterable[Sequence[SymbolHit]], limit: int) -> list[SymbolHit]:
    """Per-repository results merged best first (score, then the same tie rules), cut to `limit`."""
    merged = [hit for hits in lists for hit in hits]
    merged.sort(key=symbol_hit_key)
    return merged[: max(limit, 0)]


def merge_file_hits(lists: Iterable[Sequence[FileHit]], limit: int) -> list[FileHit]:
    """Per-repository file hits merged in search_files order, cut to `limit`."""
    merged = [hit for hits in lists for hit in hits]
    merged.sort(key=file_hit_key)
    return merged[: max(limit, 0)]
