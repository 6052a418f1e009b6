"""Non-semantic code tools: identifier tokens, symbol search, file search, neighbours, overview."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cluster.errors import IndexNotFound, ReadRefused, SamespaceError
from cluster.index.catalog import IndexCatalog, point_id, point_payload
from cluster.index.store.engines import open_vector_store
from cluster.index.store.protocol import VectorStore
from cluster.index.tokens import identifier_tokens
from cluster.ingest.chunking import chunk_file
from cluster.search.code_map import CodeMap
from cluster.search.maps import CodeMaps
from cluster.search.models import CodeEntry, FileHit, SymbolHit, snippet
from cluster.search.ranking import merge_file_hits, merge_symbol_hits
from cluster.settings import ChunkingSettings
from cluster.space import EncoderIdentity
from cluster.types import Chunk, StoredPoint

POLYGLOT = Path(__file__).parents[2] / "fixtures" / "polyglot"
SETTINGS = ChunkingSettings()
SMALL_WINDOWS = ChunkingSettings(window_lines=8, overlap_lines=2)
WIDTH = 8
IDENTITY = EncoderIdentity(model="m", weights_sha256="a" * 64, width=WIDTH, max_seq_length=256)

TAX_SOURCE = '''"""Tax tables."""


class TaxTable:
    """Rates by bracket."""

    RATE = 3

    def __init__(self, rows):
        self.rows = rows

    def lookup(self, income):
        for row in self.rows:
            if row.low <= income < row.high:
                return row.rate
        return None

    TRAILER = 1


def long_function(a, b):
    x = a
    x += 1
    x += 2
    x += 3
    x += 4
    x += 5
    x += 6
    x += 7
    x += 8
    x += 9
    x += 10
    x += 11
    x += 12
    return x + b


def parse_config(path):
    return TaxTable(path).lookup(3)
'''

README = """# Demo project

A tiny repository for tests.


## Usage

Call `parse_config` with a path.
"""


# --- helpers ---------------------------------------------------------------------------------


def payload(chunk: Chunk, repo: str = "demo", build: str = "demo__b1") -> dict[str, Any]:
    return point_payload(repo, chunk, IDENTITY, IDENTITY, "p0", build)


def payloads_of(
    files: dict[str, str], settings: ChunkingSettings = SETTINGS, repo: str = "demo"
) -> list[dict[str, Any]]:
    return [payload(c, repo) for path, text in files.items() for c in chunk_file(path, text, settings)]


def polyglot_files() -> dict[str, str]:
    return {
        f.relative_to(POLYGLOT).as_posix(): f.read_text(encoding="utf-8")
        for f in sorted(POLYGLOT.rglob("*"))
        if f.is_file() and f.name != ".gitignore"
    }


def row(
    path: str, start: int, end: int, symbol: str | None, kind: str, text: str | None = None, language: str = "python"
) -> dict[str, Any]:
    body = text if text is not None else "\n".join(f"line {n} of {symbol or kind}" for n in range(start, end + 1))
    return payload(
        Chunk(path=path, start_line=start, end_line=end, language=language, symbol=symbol, kind=kind, text=body)
    )


def hits(found: list[SymbolHit]) -> list[tuple[str | None, str, str, int]]:
    return [(h.symbol, h.match, h.path, h.start_line) for h in found]


@pytest.fixture(scope="module")
def poly() -> CodeMap:
    return CodeMap.from_payloads("poly", payloads_of(polyglot_files(), repo="poly"))


@pytest.fixture(scope="module")
def tax() -> CodeMap:
    return CodeMap.from_payloads("demo", payloads_of({"src/tax.py": TAX_SOURCE, "README.md": README}, SMALL_WINDOWS))


# --- identifier_tokens -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("HTTPServerError", ["http", "server", "error"]),
        ("getUserById", ["get", "user", "by", "id"]),
        ("parse_config", ["parse", "config"]),
        ("PARSE_CONFIG_V2", ["parse", "config", "v", "2"]),
        ("utf8Decode", ["utf", "8", "decode"]),
        ("TaxTable.lookup", ["tax", "table", "lookup"]),
        ("std::vector<int>", ["std", "vector", "int"]),
        ("src/pkg/text_util.py", ["src", "pkg", "text", "util", "py"]),
        ("parse config file", ["parse", "config", "file"]),
        ("XMLHttpRequest2", ["xml", "http", "request", "2"]),
        ("a  b", ["a", "b"]),
        ("__init__", ["init"]),
        ("größeWert", ["größe", "wert"]),
        ("ÜberHTTPServer", ["über", "http", "server"]),
        ("", []),
        ("  ..::--  ", []),
    ],
)
def test_identifier_tokens_split_case_snake_acronyms_and_digits(text: str, tokens: list[str]) -> None:
    assert identifier_tokens(text) == tokens


def test_identifier_tokens_keep_duplicates_in_order() -> None:
    assert identifier_tokens("get_user getUser") == ["get", "user", "get", "user"]


# --- search_symbols: hand-made payloads ------------------------------------------------------


def test_symbol_tiers_rank_exact_member_case_insensitive_prefix_substring_tokens() -> None:
    code_map = CodeMap.from_payloads(
        "demo",
        [
            row("a/tokens.py", 1, 3, "config_parser", "function"),
            row("a/sub.py", 1, 3, "reparse_config", "function"),
            row("a/prefix.py", 1, 3, "parse_config_file", "function"),
            row("a/ci.py", 1, 3, "Parse_Config", "function"),
            row("a/member.py", 1, 3, "Loader.parse_config", "method"),
            row("a/exact.py", 1, 3, "parse_config", "function"),
            row("a/none.py", 1, 3, "unrelated", "function"),
        ],
    )
    found = code_map.search_symbols("parse_config")
    assert [(h.path, h.match) for h in found] == [
        ("a/exact.py", "exact"),
        ("a/member.py", "member"),
        ("a/ci.py", "exact-ci"),
        ("a/prefix.py", "prefix"),
        ("a/sub.py", "substring"),
        ("a/tokens.py", "tokens"),
    ]
    scores = [h.score for h in found]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)
    assert all(0 < s <= 1 for s in scores)
    assert code_map.search_symbols("parse_config", limit=2) == found[:2]


def test_qualified_queries_match_full_and_member_symbols_and_cpp_separators() -> None:
    code_map = CodeMap.from_payloads(
        "demo",
        [
            row("tax.py", 10, 20, "TaxTable.lookup", "method"),
            row("other.py", 1, 5, "Outer.TaxTable.lookup", "method"),
            row("impl.cc", 3, 9, "TaxTable::lookup", "function", language="cpp"),
            row("free.py", 1, 2, "lookup", "function"),
        ],
    )
    assert hits(code_map.search_symbols("TaxTable.lookup")) == [
        ("TaxTable::lookup", "exact", "impl.cc", 3),
        ("TaxTable.lookup", "exact", "tax.py", 10),
        ("Outer.TaxTable.lookup", "member", "other.py", 1),
        ("lookup", "tokens", "free.py", 1),  # shares one of the query's three tokens
    ]
    assert hits(code_map.search_symbols("TaxTable::lookup"))[:2] == hits(code_map.search_symbols("TaxTable.lookup"))[:2]
    by_member = code_map.search_symbols("lookup")
    assert [(h.path, h.match) for h in by_member] == [
        ("free.py", "exact"),
        ("impl.cc", "member"),
        ("other.py", "member"),
        ("tax.py", "member"),
    ]
    assert code_map.search_symbols("lookup()") == by_member
    assert [h.match for h in code_map.search_symbols("LOOKUP")] == ["exact-ci", "member", "member", "member"]


def test_ties_put_definitions_before_windows_and_sections_then_path_then_line() -> None:
    code_map = CodeMap.from_payloads(
        "demo",
        [
            row("docs/a.md", 1, 4, "install", "section", language="markdown"),
            row("z.py", 30, 40, "install", "function"),
            row("z.py", 5, 9, "install", "function"),
            row("b.py", 7, 9, "install", "method"),
            row("a.txt", 1, 9, "install", "window", language="text"),
        ],
    )
    assert [(h.path, h.start_line) for h in code_map.search_symbols("install")] == [
        ("b.py", 7),
        ("z.py", 5),
        ("z.py", 30),
        ("a.txt", 1),
        ("docs/a.md", 1),
    ]


def test_chunks_without_a_symbol_match_only_by_their_first_line_tokens() -> None:
    code_map = CodeMap.from_payloads(
        "demo",
        [
            row("cfg.txt", 1, 3, None, "window", "load config values\nparse_config here too\nend", language="text"),
            row("mod.py", 1, 2, None, "module", "import os\nparse = 1"),
            row("x.py", 1, 2, "parse_config", "function", "def parse_config():\n    pass"),
        ],
    )
    found = code_map.search_symbols("parse config")
    assert [(h.symbol, h.path, h.match) for h in found] == [
        ("parse_config", "x.py", "tokens"),
        (None, "cfg.txt", "tokens"),
    ]
    assert found[0].score > found[1].score
    assert code_map.search_symbols("parse_config")[0].match == "exact"
    assert [h.path for h in code_map.search_symbols("parse_config")] == ["x.py", "cfg.txt"]


def test_empty_blank_and_unmatched_queries_return_nothing() -> None:
    code_map = CodeMap.from_payloads("demo", [row("x.py", 1, 2, "parse_config", "function")])
    for query in ["", "   ", "()", "::", "zzz_nothing_like_it"]:
        assert code_map.search_symbols(query) == []
    assert code_map.search_symbols("parse_config", limit=0) == []
    assert CodeMap.from_payloads("demo", []).search_symbols("x") == []


def test_identifier_styles_meet_through_tokens() -> None:
    code_map = CodeMap.from_payloads(
        "demo", [row("u.ts", 1, 3, "getUserById", "function", "function getUserById(id) {\n}", language="typescript")]
    )
    for query in ["get_user_by_id", "get user by id", "GetUserByID"]:
        found = code_map.search_symbols(query)
        assert [h.symbol for h in found] == ["getUserById"], query
    assert code_map.search_symbols("get_user_by_id")[0].match == "tokens"
    assert code_map.search_symbols("getuserbyid")[0].match == "exact-ci"
    assert code_map.search_symbols("getUser")[0].match == "prefix"
    assert code_map.search_symbols("UserBy")[0].match == "substring"


def test_go_type_groups_match_each_name() -> None:
    code_map = CodeMap.from_payloads(
        "demo", [row("t.go", 1, 4, "Point, Size", "type", "type (\n\tPoint struct{}\n\tSize int\n)", language="go")]
    )
    assert [h.match for h in code_map.search_symbols("Size")] == ["exact"]
    assert [h.match for h in code_map.search_symbols("Point, Size")] == ["exact"]
    assert [h.match for h in code_map.search_symbols("Poi")] == ["prefix"]


def test_snippets_are_capped_by_lines_and_chars() -> None:
    long_lines = "\n".join(f"line {n}" for n in range(100))
    assert snippet(long_lines).split("\n") == [f"line {n}" for n in range(35)]
    wide = "\n".join("x" * 100 for _ in range(30))
    assert len(snippet(wide)) <= 1400 and wide.startswith(snippet(wide)) and snippet(wide).endswith("x")
    assert snippet("y" * 5000) == "y" * 1400
    code_map = CodeMap.from_payloads("demo", [row("x.py", 1, 100, "big", "function", long_lines)])
    assert code_map.search_symbols("big")[0].snippet == snippet(long_lines)


def test_merge_symbol_hits_orders_across_repos_by_score_then_ties() -> None:
    alpha = CodeMap.from_payloads(
        "alpha", [row("a.py", 1, 2, "parse_config", "function"), row("b.py", 1, 2, "parse_config_file", "function")]
    )
    beta = CodeMap.from_payloads(
        "beta",
        [
            row("a.py", 1, 2, "parse_config", "function"),
            row("c.md", 1, 2, "parse_config", "section", language="markdown"),
        ],
    )
    merged = merge_symbol_hits([alpha.search_symbols("parse_config"), beta.search_symbols("parse_config")], 3)
    assert [(h.repo, h.path, h.match) for h in merged] == [
        ("alpha", "a.py", "exact"),
        ("beta", "a.py", "exact"),
        ("beta", "c.md", "exact"),
    ]
    assert merge_symbol_hits([], 5) == [] and merge_symbol_hits([merged], 0) == []


# --- search_symbols: real chunks -------------------------------------------------------------


def test_polyglot_symbols_are_found_with_exact_line_ranges(poly: CodeMap) -> None:
    slug = poly.search_symbols("slugify")
    assert hits(slug) == [("slugify", "exact", "pkg/textutil.py", 20)]
    assert slug[0].end_line == 22 and slug[0].kind == "function" and slug[0].language == "python"
    assert slug[0].snippet.startswith("def slugify(title: str) -> str:")
    assert hits(poly.search_symbols("RetryWithBackoff"))[0] == ("RetryWithBackoff", "exact", "cmd/server.go", 9)
    assert hits(poly.search_symbols("retry backoff"))[0][:2] == ("RetryWithBackoff", "tokens")
    assert hits(poly.search_symbols("debounce"))[:2] == [
        ("debounce", "exact", "web/debounce.ts", 5),
        ("DebounceOptions", "prefix", "web/debounce.ts", 1),
    ]
    assert hits(poly.search_symbols("configuration")) == [("Configuration", "exact-ci", "docs/install.md", 5)]
    assert hits(poly.search_symbols("word counter"))[0][:2] == ("WordCounter", "tokens")
    assert [h.symbol for h in poly.search_symbols("json")][:2] == ["load_json_or_default", "write_json_atomically"]


def test_windows_of_one_definition_are_one_hit_and_classes_span_their_members(tax: CodeMap) -> None:
    assert [(c.start_line, c.end_line) for c in tax.file_entries("src/tax.py") if c.symbol == "long_function"] == [
        (21, 28),
        (27, 34),
        (33, 35),
    ]
    long_hits = tax.search_symbols("long_function")
    assert [(h.start_line, h.end_line, h.match) for h in long_hits] == [(21, 35, "exact")]
    table = tax.search_symbols("TaxTable")
    assert (table[0].symbol, table[0].start_line, table[0].end_line, table[0].match) == ("TaxTable", 4, 18, "exact")
    assert sum(1 for h in table if h.symbol == "TaxTable") == 1  # its trailing run is part of the same hit
    assert [(h.symbol, h.match) for h in tax.search_symbols("lookup")] == [("TaxTable.lookup", "member")]
    qualified = tax.search_symbols("TaxTable.lookup")
    assert [(h.symbol, h.match) for h in qualified][:2] == [("TaxTable.lookup", "exact"), ("TaxTable", "tokens")]
    usage = tax.search_symbols("Usage")
    assert [(h.symbol, h.kind, h.path) for h in usage] == [("Usage", "section", "README.md")]


# --- search_files ----------------------------------------------------------------------------


def test_files_match_basename_then_stem_then_substring_then_tokens_and_shorter_first() -> None:
    code_map = CodeMap.from_payloads(
        "demo",
        [
            row("src/deep/nested/config.py", 1, 2, "load", "function"),
            row("config.py", 1, 2, "read", "function"),
            row("src/config", 1, 2, None, "window", language="text"),
            row("src/config_loader.py", 1, 2, None, "module"),
            row("lib/ConfigTools/app_settings.py", 1, 2, "x", "function"),
            row("src/my_config_utils.py", 1, 2, None, "module"),
            row("unrelated.py", 1, 2, None, "module"),
        ],
    )
    found = code_map.search_files("config.py")
    assert [(h.path, h.match) for h in found] == [
        ("config.py", "basename"),
        ("src/deep/nested/config.py", "basename"),
        ("src/config_loader.py", "tokens"),  # 'config' and 'py' both occur in the path
        ("src/my_config_utils.py", "tokens"),
        ("lib/ConfigTools/app_settings.py", "tokens"),
    ]
    assert [(h.path, h.match) for h in code_map.search_files("CONFIG")] == [
        ("src/config", "basename"),
        ("config.py", "stem"),
        ("src/deep/nested/config.py", "stem"),
        ("src/config_loader.py", "path"),
        ("src/my_config_utils.py", "path"),
        ("lib/ConfigTools/app_settings.py", "path"),
    ]
    assert [(h.path, h.match) for h in code_map.search_files("utils config")] == [("src/my_config_utils.py", "tokens")]
    assert [h.path for h in code_map.search_files("./src/deep/")] == ["src/deep/nested/config.py"]
    assert len(code_map.search_files("config", limit=2)) == 2
    for query in ["", "  ", "/", "nothing-like-this"]:
        assert code_map.search_files(query) == []


def test_file_hits_list_definitions_in_line_order_capped(poly: CodeMap, tax: CodeMap) -> None:
    (hit,) = poly.search_files("textutil")
    assert hit.path == "pkg/textutil.py" and hit.language == "python" and hit.match == "stem"
    assert [(s.symbol, s.kind, s.start_line, s.end_line) for s in hit.symbols] == [
        ("levenshtein_distance", "function", 8, 17),
        ("slugify", "function", 20, 22),
        ("WordCounter", "class", 25, 36),
    ]
    assert hit.symbols_total == 3
    capped = tax.search_files("tax.py", symbols_per_file=2)[0]
    assert [s.symbol for s in capped.symbols] == ["TaxTable", "TaxTable.__init__"] and capped.symbols_total == 5
    assert [s.symbol for s in tax.search_files("tax.py")[0].symbols] == [
        "TaxTable",
        "TaxTable.__init__",
        "TaxTable.lookup",
        "long_function",
        "parse_config",
    ]
    assert tax.search_files("tax.py", symbols_per_file=0)[0].symbols == []
    assert [h.path for h in poly.search_files("text util")] == ["pkg/textutil.py"]
    assert [h.path for h in poly.search_files("docs/")] == ["docs/install.md"]


def test_merge_file_hits_keeps_the_file_order_across_repos() -> None:
    alpha = CodeMap.from_payloads("alpha", [row("src/long/path/x.py", 1, 2, None, "module")])
    beta = CodeMap.from_payloads("beta", [row("x.py", 1, 2, None, "module"), row("xa.py", 1, 2, None, "module")])
    merged = merge_file_hits([alpha.search_files("x.py"), beta.search_files("x.py")], 5)
    assert [(h.repo, h.path, h.match) for h in merged] == [
        ("beta", "x.py", "basename"),
        ("alpha", "src/long/path/x.py", "basename"),
        ("beta", "xa.py", "tokens"),
    ]
    assert merge_file_hits([alpha.search_files("x.py"), beta.search_files("x.py")], 1) == merged[:1]
    assert all(isinstance(h, FileHit) for h in merged)


# --- neighbors -------------------------------------------------------------------------------


def spans(entries: list[CodeEntry]) -> list[tuple[int, int]]:
    return [(e.start_line, e.end_line) for e in entries]


def test_neighbors_anchor_the_smallest_containing_chunk_and_walk_both_ways(tax: CodeMap) -> None:
    around = tax.neighbors("src/tax.py", 13, count=2)
    assert (around.anchor.symbol, around.anchor.start_line, around.anchor.end_line) == ("TaxTable.lookup", 12, 16)
    assert around.repo == "demo" and around.path == "src/tax.py" and around.line == 13
    assert spans(around.before) == [(4, 7), (9, 10)]
    assert spans(around.after) == [(18, 18), (21, 28)]
    assert around.anchor.text.startswith("    def lookup(self, income):")
    everything = tax.neighbors("src/tax.py", 13, count=50)
    assert spans(everything.before) == [(1, 1), (4, 7), (9, 10)]
    assert spans(everything.after) == [(18, 18), (21, 28), (27, 34), (33, 35), (38, 39)]
    alone = tax.neighbors("src/tax.py", 13, count=0)
    assert alone.before == [] and alone.after == []


def test_neighbors_outside_every_chunk_take_the_nearest(tax: CodeMap) -> None:
    assert spans([tax.neighbors("src/tax.py", 2).anchor]) == [(1, 1)]  # blank line: 1 is nearer than 4
    assert spans([tax.neighbors("src/tax.py", 3).anchor]) == [(4, 7)]
    assert spans([tax.neighbors("src/tax.py", 999).anchor]) == [(38, 39)]
    assert spans([tax.neighbors("src/tax.py", -5).anchor]) == [(1, 1)]
    last = tax.neighbors("src/tax.py", 999, count=1)
    assert spans(last.before) == [(33, 35)] and last.after == []


def test_neighbors_of_a_window_keep_the_overlapping_windows_so_no_line_is_skipped(tax: CodeMap) -> None:
    middle = tax.neighbors("src/tax.py", 31, count=1)  # inside 27-34 only
    assert spans([middle.anchor]) == [(27, 34)]
    assert spans(middle.before) == [(21, 28)] and spans(middle.after) == [(33, 35)]
    code_map = CodeMap.from_payloads(
        "demo", [row("t.txt", s, s + 39, None, "window", language="text") for s in (1, 31, 61, 91)]
    )
    around = code_map.neighbors("t.txt", 75, count=1)
    assert spans([around.anchor]) == [(61, 100)]
    assert spans(around.before) == [(31, 70)] and spans(around.after) == [(91, 130)]
    assert spans(code_map.neighbors("t.txt", 75, count=5).before) == [(1, 40), (31, 70)]


def test_neighbors_prefer_chunks_that_do_not_overlap_and_skip_duplicates() -> None:
    code_map = CodeMap.from_payloads(
        "demo",
        [
            row("m.py", 1, 5, "first", "function"),
            row("m.py", 3, 12, "wide", "window", text="same"),
            row("m.py", 6, 10, "anchor", "function", text="same"),
            row("m.py", 6, 10, "anchor_copy", "function", text="same"),  # same span, same text
            row("m.py", 11, 15, "next", "function"),
        ],
    )
    around = code_map.neighbors("m.py", 8, count=1)
    assert around.anchor.symbol == "anchor"
    assert [e.symbol for e in around.before] == ["first"]
    assert [e.symbol for e in around.after] == ["next"]
    wide = code_map.neighbors("m.py", 8, count=9).after
    assert wide and all(e.symbol != "anchor_copy" for e in wide)
    adjacent = CodeMap.from_payloads(
        "demo",
        [
            row("n.py", 1, 5, "first", "function"),
            row("n.py", 4, 7, "overlapping", "window"),
            row("n.py", 6, 10, "anchor", "function"),
            row("n.py", 9, 12, "overlapping_after", "window"),
            row("n.py", 11, 15, "next", "function"),
        ],
    )
    around = adjacent.neighbors("n.py", 8, count=2)
    assert [e.symbol for e in around.before] == ["first"]  # its lines reach the anchor: the overlap is not needed
    assert [e.symbol for e in around.after] == ["next"]


def test_neighbors_of_an_unknown_file_are_refused_naming_it(poly: CodeMap) -> None:
    with pytest.raises(ReadRefused, match=r"pkg/missing\.py") as caught:
        poly.neighbors("pkg/missing.py", 1)
    assert caught.value.repo == "poly" and isinstance(caught.value, SamespaceError)
    assert str(pickle.loads(pickle.dumps(caught.value))) == str(caught.value)
    assert poly.neighbors("./pkg/storage.py", 6).anchor.symbol == "write_json_atomically"


# --- overview --------------------------------------------------------------------------------


def test_overview_counts_files_languages_dirs_types_references_and_readme(tax: CodeMap) -> None:
    code_map = CodeMap.from_payloads(
        "demo",
        payloads_of(
            {
                "README.md": README,
                "src/tax.py": TAX_SOURCE,
                "src/use.py": (
                    "from tax import TaxTable, parse_config\n\n\ndef run():\n    return parse_config(TaxTable)\n"
                ),
                "cmd/main.go": "package main\n\ntype Server struct {\n\tport int\n}\n\nfunc main() {}\n",
                "notes.txt": "parse_config and long_function are described here.\n",
            },
            SMALL_WINDOWS,
        ),
    )
    view = code_map.overview()
    assert view.repo == "demo" and view.files == 5 and view.chunks == len(code_map.entries)
    assert view.languages == {"python": 2, "go": 1, "markdown": 1, "text": 1}
    assert list(view.top_dirs.items()) == [(".", 2), ("src", 2), ("cmd", 1)]
    assert [(t.symbol, t.kind, t.path, t.line, t.references) for t in view.top_types] == [
        ("TaxTable", "class", "src/tax.py", 4, 3),
        ("Server", "struct", "cmd/main.go", 3, 0),
    ]
    referenced = {r.symbol: r.references for r in view.most_referenced}
    # parse_config: README usage section, src/use.py import line + run(), notes.txt (its own chunk excluded)
    assert referenced["parse_config"] == 4
    assert referenced["TaxTable"] == 3  # parse_config's body, src/use.py's import and run() (not its own runs)
    assert referenced["long_function"] == 1
    assert not any(symbol.endswith("__init__") for symbol in referenced)  # dunders are called implicitly
    assert referenced["main"] == 1  # 'package main' is a whole-word mention: a cheap count, not a resolver
    counts = [r.references for r in view.most_referenced]
    assert counts == sorted(counts, reverse=True) and all(c > 0 for c in counts) and len(counts) <= 15
    assert view.readme == README.rstrip("\n")
    assert code_map.overview() is view  # built once
    assert tax.overview().readme is not None


def test_overview_readme_is_capped_and_optional(poly: CodeMap) -> None:
    long_readme = "\n".join(f"Paragraph {n} " + "word " * 20 for n in range(100))
    code_map = CodeMap.from_payloads("demo", payloads_of({"README": long_readme, "docs/README.md": "# no\n"}))
    readme = code_map.overview().readme
    assert readme is not None and len(readme) == 1500 and long_readme.startswith(readme)
    assert poly.overview().readme is None  # docs/install.md is no README, and only the root one counts
    empty = CodeMap.from_payloads("empty", []).overview()
    assert (empty.files, empty.chunks, empty.languages, empty.top_types, empty.readme) == (0, 0, {}, [], None)


def test_overview_of_the_polyglot_repo(poly: CodeMap) -> None:
    view = poly.overview()
    assert (view.files, view.chunks) == (5, 17)
    assert view.languages == {"python": 2, "go": 1, "markdown": 1, "typescript": 1}
    assert view.top_dirs == {"pkg": 2, "cmd": 1, "docs": 1, "web": 1}
    assert {(t.symbol, t.kind) for t in view.top_types} == {("DebounceOptions", "interface"), ("WordCounter", "class")}
    assert {r.symbol for r in view.most_referenced} >= {"HealthHandler", "DebounceOptions"}


# --- building --------------------------------------------------------------------------------


def test_rows_without_path_lines_or_text_are_skipped_and_duplicates_collapse() -> None:
    good = row("x.py", 1, 2, "f", "function")
    code_map = CodeMap.from_payloads(
        "demo",
        [
            good,
            dict(good),
            {**good, "path": None},
            {**good, "start_line": "1"},
            {**good, "text": None},
            {"path": "y.py", "start_line": 1.0, "end_line": 2, "text": "y = 1"},
        ],
    )
    assert [(e.path, e.kind, e.language, e.symbol) for e in code_map.entries] == [
        ("x.py", "function", "python", "f"),
        ("y.py", "window", "text", None),
    ]
    assert code_map.paths == ["x.py", "y.py"]
    same = [good, {"path": "y.py", "start_line": 1, "end_line": 2, "text": "y = 1"}]
    assert code_map == CodeMap.from_payloads("demo", same)
    assert code_map != CodeMap.from_payloads("other", [good])


def test_a_thousand_files_build_and_answer_quickly() -> None:
    rows = [
        row(f"pkg{i % 20}/mod_{i}.py", 1 + 10 * j, 8 + 10 * j, f"Handler{i}.do_thing_{j}", "method")
        for i in range(1000)
        for j in range(5)
    ]
    code_map = CodeMap.from_payloads("big", rows)
    assert code_map.search_symbols("Handler7.do_thing_3")[0].symbol == "Handler7.do_thing_3"
    assert len(code_map.search_symbols("do thing", limit=10)) == 10
    assert code_map.search_files("mod_999.py")[0].path == "pkg19/mod_999.py"
    assert code_map.overview().files == 1000


# --- from the store --------------------------------------------------------------------------


def catalog_on(store: VectorStore) -> IndexCatalog:
    return IndexCatalog(store, clock=lambda: 1_700_000_000.0)


def make_catalog(path: Path) -> IndexCatalog:
    return catalog_on(open_vector_store("embedded", data_dir=path, url=None))


def commit(catalog: IndexCatalog, name: str, files: dict[str, str]) -> tuple[str, list[dict[str, Any]]]:
    build = catalog.begin_build(name, IDENTITY, "/repo")
    rng = np.random.default_rng(len(files))
    chunks = [c for path, text in files.items() for c in chunk_file(path, text, SMALL_WINDOWS)]
    points = []
    for chunk in chunks:
        vector = rng.normal(size=WIDTH)
        points.append(
            StoredPoint(
                id=point_id(name, chunk),
                vector=(vector / np.linalg.norm(vector)).tolist(),
                payload=point_payload(name, chunk, IDENTITY, IDENTITY, "p0", build),
            )
        )
    catalog.write(build, points)
    catalog.commit_build(build, files=len(files), providers=["p0"])
    return build, [p.payload for p in points]


def test_a_map_scrolled_from_a_committed_build_equals_the_one_from_its_payloads(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    files = {**polyglot_files(), "src/tax.py": TAX_SOURCE, "README.md": README}
    _, written = commit(catalog, "poly", files)
    maps = CodeMaps(catalog)
    scrolled = maps.get("poly")
    direct = CodeMap.from_payloads("poly", written)
    assert scrolled == direct and len(scrolled.entries) == catalog.record("poly").chunks
    assert scrolled.overview() == direct.overview()
    assert scrolled.search_symbols("TaxTable") == direct.search_symbols("TaxTable")
    assert maps.get("poly") is scrolled  # cached for the serving build


def test_code_maps_follow_the_serving_build_and_refuse_unknown_repos(tmp_path: Path) -> None:
    store = open_vector_store("embedded", data_dir=tmp_path, url=None)
    catalog = catalog_on(store)
    maps = CodeMaps(catalog)
    assert maps.search_symbols(None, "anything") == [] and maps.search_files(None, "x") == []
    with pytest.raises(SamespaceError, match="indexed repos: none"):
        maps.overview(None)
    first, _ = commit(catalog, "alpha", {"a.py": "def parse_config():\n    return 1\n"})
    assert maps.overview(None).repo == "alpha"  # the only index
    assert maps.neighbors(None, "a.py", 1).anchor.symbol == "parse_config"
    assert maps.cached_builds() == {"alpha": first}
    commit(catalog, "beta", {"b.py": "def parse_config_file():\n    return 2\n", "README.md": README})
    found = maps.search_symbols(None, "parse_config", 5)
    assert [(h.repo, h.symbol, h.match) for h in found] == [
        ("alpha", "parse_config", "exact"),
        ("beta", "parse_config_file", "prefix"),
    ]
    assert [(h.repo, h.path) for h in maps.search_files(None, "py", 5)] == [("alpha", "a.py"), ("beta", "b.py")]
    with pytest.raises(SamespaceError, match="indexed repos: alpha, beta"):
        maps.overview(None)
    with pytest.raises(SamespaceError, match="alpha, beta"):
        maps.neighbors(None, "a.py", 1)
    with pytest.raises(IndexNotFound, match="unknown repo 'gamma'; indexed repos: alpha, beta"):
        maps.search_symbols("gamma", "x")
    with pytest.raises(ReadRefused, match=r"b\.py"):
        maps.neighbors("alpha", "b.py", 1)
    assert maps.overview("beta").readme is not None

    second, _ = commit(catalog, "alpha", {"a.py": "def load_settings():\n    return 1\n"})
    assert maps.cached_builds()["alpha"] == first  # still cached until the next read
    assert [h.symbol for h in maps.search_symbols("alpha", "load_settings")] == ["load_settings"]
    assert maps.search_symbols("alpha", "parse_config") == []
    assert maps.cached_builds()["alpha"] == second
    store.delete_alias("beta")  # an index that stops serving loses its map on the next read
    maps.prune()
    assert set(maps.cached_builds()) == {"alpha"}
