"""Non-semantic code tools, symbols: identifier tokens, and symbol search over hand-made payloads and
over real chunks (match tiers, ties, qualified names, snippets, merging across repos)."""

from __future__ import annotations

import pytest

from cluster.index.tokens import identifier_tokens
from cluster.search.code_map import CodeMap
from cluster.search.models import snippet
from cluster.search.ranking import merge_symbol_hits
from tests.support.code_maps import (
    hits,
    row,
)

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
