"""Non-semantic code tools, files: file search (match tiers, each file's definitions, merging across
repos) and a line's neighbours (the anchor chunk and the chunks before and after it)."""

from __future__ import annotations

import pickle

import pytest

from cluster.errors import ReadRefused, SamespaceError
from cluster.search.code_map import CodeMap
from cluster.search.models import CodeEntry, FileHit
from cluster.search.ranking import merge_file_hits
from tests.support.code_maps import (
    row,
)

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
