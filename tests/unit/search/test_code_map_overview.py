"""Non-semantic code tools, whole maps: a repository's overview, building a map from payloads, and the
maps scrolled from committed builds in the store (following the serving build, refusing unknown repos)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cluster.errors import IndexNotFound, ReadRefused, SamespaceError
from cluster.index.catalog import IndexCatalog, point_id, point_payload
from cluster.index.store.engines import open_vector_store
from cluster.index.store.protocol import VectorStore
from cluster.ingest.chunking import chunk_file
from cluster.search.code_map import CodeMap
from cluster.search.maps import CodeMaps
from cluster.types import StoredPoint
from tests.support.code_maps import (
    IDENTITY,
    README,
    SMALL_WINDOWS,
    TAX_SOURCE,
    WIDTH,
    payloads_of,
    polyglot_files,
    row,
)

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
