"""The retrieval-quality corpus: docstring removal, query selection, seeded sampling, metrics (no Ray)."""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from bench.quality_corpus import (
    DEV_PACKAGES,
    PACKAGE_SETS,
    TEST_PACKAGES,
    Query,
    build_corpus,
    corpus_dir,
    drop_ambiguous,
    file_queries,
    first_match_rank,
    hit_matches,
    iter_defs,
    load_queries,
    mrr_at,
    package_root,
    query_text,
    read_facts,
    recall_at,
    sample_queries,
    strip_docstrings,
)

SOURCE = textwrap.dedent('''\
    """Module docstring: kept."""

    import re

    PATTERN = "a plain string, not a docstring"


    def documented(x):
        """Parse a configuration value into a number.

        More detail that is not part of the query.
        """
        message = """a multi-line string
        that is code, not a docstring"""
        return int(x), message


    def only_doc():
        """Return nothing at all, on purpose, for testing."""


    class Loader:
        """Load things from somewhere far away."""

        def fetch(self, url):
            """Fetch the resource at the given url and decode it."""
            "a second string statement"
            return url

        @property
        def name(self):
            """The loader's display name, shown in the logs."""  # trailing comment
            return "loader"

        def _private(self):
            """A private helper method with a long docstring."""
            return 1

        def __init__(self):
            """Initialise the loader with all of its defaults."""
            self.x = 1

        class Inner:
            def deep(self):
                """Walk the nested structure depth first, yielding leaves."""
                def local():
                    """A local helper defined inside a function body."""
                    return 2
                return local()


    def inline(): "Inline docstring sharing the line with the def."

    def short():
        """Too short."""
        return 0
''')


def parsed_docstrings(source: bytes) -> list[str]:
    tree = ast.parse(source)
    return [d for site in iter_defs(tree) if (d := ast.get_docstring(site.node)) is not None]


def test_stripping_removes_every_def_docstring_and_still_parses() -> None:
    stripped = strip_docstrings(SOURCE)
    ast.parse(stripped)
    assert parsed_docstrings(stripped) == []
    text = stripped.decode()
    assert "Parse a configuration" not in text and "Load things" not in text and "Inline docstring" not in text
    assert ast.get_docstring(ast.parse(stripped)) == "Module docstring: kept."


def test_stripping_keeps_non_docstring_strings_and_everything_else() -> None:
    stripped = strip_docstrings(SOURCE).decode()
    assert 'PATTERN = "a plain string, not a docstring"' in stripped
    assert '    message = """a multi-line string\n    that is code, not a docstring"""\n' in stripped
    # the string after the removed docstring became fetch's docstring and went too (never a query source)
    original_lines = SOURCE.splitlines(keepends=True)
    kept = stripped.splitlines(keepends=True)
    # every kept line is an original line (or a `pass` stand-in), in the original order
    it = iter(original_lines)
    for line in kept:
        if line.strip() in ("pass", "def inline(): pass"):
            continue
        assert any(line == candidate for candidate in it), line


def test_a_docstring_only_body_becomes_pass_at_the_same_indentation() -> None:
    stripped = strip_docstrings(SOURCE).decode()
    assert "def only_doc():\n    pass\n" in stripped
    assert "def inline(): pass\n" in stripped
    source = 'class A:\n    """Only a docstring."""\n\n    class B:\n        """Nested,\n        two lines."""\n'
    out = strip_docstrings(source).decode()
    assert out == "class A:\n\n    class B:\n        pass\n"  # A still has a statement: B
    ast.parse(out)


def test_crlf_and_non_ascii_offsets_are_cut_at_the_right_bytes() -> None:
    source = (
        'def f():\r\n    x = "é"; """not a docstring"""\r\n    return x\r\n\r\n'
        'def g():\r\n    """Dokumentation für g — äöü."""\r\n'
    )
    out = strip_docstrings(source.encode())
    assert (
        out == 'def f():\r\n    x = "é"; """not a docstring"""\r\n    return x\r\n\r\ndef g():\r\n    pass\r\n'.encode()
    )


def test_a_parenthesized_docstring_falls_back_to_a_placeholder_that_parses() -> None:
    source = 'def f():\n    (\n        "doc in parens"\n    )\n    return 1\n'
    out = strip_docstrings(source)
    ast.parse(out)
    assert b"doc in parens" not in out and parsed_docstrings(out) == []


def test_targets_are_the_def_ranges_in_the_stripped_copy() -> None:
    stripped = strip_docstrings(SOURCE)
    queries = {q.symbol: q for q in file_queries(SOURCE, stripped, "pkg/mod.py", "pkg")}
    lines = stripped.decode().splitlines()
    for q in queries.values():
        def_line = lines[q.start_line - 1].strip()
        assert def_line.startswith(("def ", "@", "async def ")), (q.symbol, def_line)
        name = q.symbol.rsplit(".", 1)[-1]
        header = next(line for line in lines[q.start_line - 1 : q.end_line] if "def " in line)
        assert f"def {name}(" in header
        assert q.query not in "\n".join(lines[q.start_line - 1 : q.end_line])
    name = queries["Loader.name"]
    assert lines[name.start_line - 1].strip() == "@property"
    assert lines[name.end_line - 1].strip() == 'return "loader"'


def test_query_selection_rules() -> None:
    queries = {q.symbol: q.query for q in file_queries(SOURCE, strip_docstrings(SOURCE), "pkg/mod.py", "pkg")}
    assert queries == {
        "documented": "Parse a configuration value into a number.",
        "only_doc": "Return nothing at all, on purpose, for testing.",
        "Loader.fetch": "Fetch the resource at the given url and decode it.",
        "Loader.name": "The loader's display name, shown in the logs.",
        "Loader.Inner.deep": "Walk the nested structure depth first, yielding leaves.",
        "inline": "Inline docstring sharing the line with the def.",
    }  # no class, private, dunder, local function or too-short docstring


def test_query_text_collapses_whitespace_and_reduces_roles() -> None:
    doc = "Return a :class:`~httpx.Response`   for the\n   :meth:`Client.send` call, ``quickly``.\n\nMore."
    assert query_text(doc) == "Return a Response for the Client.send call, quickly."
    assert query_text("Deprecated: use the other function instead please.") is None
    assert query_text("Alias for the thing that does the work.") is None
    assert query_text("Four words only here.") is None
    long = query_text("word " * 200)
    assert long is not None and len(long) <= 300 and not long.endswith(" ")


def test_overloads_are_not_targets() -> None:
    source = textwrap.dedent('''\
        from typing import overload

        @overload
        def f(x: int) -> int:
            """Overload stub documentation, long enough here."""
        def f(x):
            """The implementation documentation, long enough here."""
            return x
    ''')
    queries = file_queries(source, strip_docstrings(source), "m.py")
    assert [(q.symbol, q.query) for q in queries] == [("f", "The implementation documentation, long enough here.")]


def q(query: str, path: str = "p.py", start: int = 1, end: int = 5, symbol: str = "f") -> Query:
    return Query(query=query, path=path, symbol=symbol, start_line=start, end_line=end)


def test_a_query_shared_by_several_functions_is_dropped() -> None:
    kept, dropped = drop_ambiguous([q("same text here"), q("same text here", "b.py"), q("unique")])
    assert [x.query for x in kept] == ["unique"] and dropped == 2


def test_sampling_is_seeded_and_independent_of_input_order() -> None:
    pool = [q(f"query {i}", path=f"f{i % 7}.py", start=i) for i in range(100)]
    first = sample_queries(pool, 20, seed=3)
    assert first == sample_queries(list(reversed(pool)), 20, seed=3)
    assert len(first) == 20 and len(set(first)) == 20
    assert first != sample_queries(pool, 20, seed=4)
    assert first == sorted(first, key=lambda x: (x.path, x.start_line, x.symbol))
    assert len(sample_queries(pool, 500, seed=3)) == 100
    everything = sample_queries(list(reversed(pool)), None, seed=3)
    assert everything == sorted(pool, key=lambda x: (x.path, x.start_line, x.symbol))


def test_the_dev_and_test_sets_are_disjoint_installed_and_dev_comes_first() -> None:
    assert list(PACKAGE_SETS) == ["dev", "test"]
    assert PACKAGE_SETS == {"dev": DEV_PACKAGES, "test": TEST_PACKAGES}
    assert DEV_PACKAGES == ("httpx", "click", "jinja2", "markdown_it")
    assert TEST_PACKAGES == ("requests", "rich", "packaging")
    assert not set(DEV_PACKAGES) & set(TEST_PACKAGES)
    for package in (*DEV_PACKAGES, *TEST_PACKAGES):
        assert (package_root(package) / "__init__.py").is_file(), package


def test_build_corpus_copies_sources_without_docstrings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "site" / "fakepkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "tests").mkdir()
    (pkg / "__init__.py").write_text(SOURCE)
    (pkg / "sub" / "more.py").write_text(
        'def helper_two(a, b):\n    """Combine two values into a single one."""\n    return a + b\n'
    )
    (pkg / "tests" / "test_x.py").write_text('def test_x():\n    """A test that is never copied anywhere."""\n')
    (pkg / "data.txt").write_text("not python")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    out = tmp_path / "out"
    queries = build_corpus(["fakepkg"], out, max_queries=3, seed=1)
    assert sorted(p.relative_to(corpus_dir(out)).as_posix() for p in corpus_dir(out).rglob("*") if p.is_file()) == [
        "fakepkg/__init__.py",
        "fakepkg/sub/more.py",
    ]
    assert len(queries) == 3 and queries == load_queries(out)
    assert queries == build_corpus(["fakepkg"], out, max_queries=3, seed=1)  # deterministic, rebuilt in place
    facts = read_facts(out)
    assert facts["files"] == 2 and facts["candidates"] == 7 and facts["sampled"] == 3
    for query in queries:
        copy = (corpus_dir(out) / query.path).read_text()
        assert query.query.split()[0] not in copy.splitlines()[query.start_line - 1]
        assert "Combine two values" not in copy
    assert json.loads((out / "queries.json").read_text())["queries"][0]["package"] == "fakepkg"
    every = build_corpus(["fakepkg"], out)  # the default: every eligible query, no sampling
    assert len(every) == 7 and set(queries) < set(every) and read_facts(out)["sampled"] == 7
    with pytest.raises(ValueError, match="at least 1"):
        build_corpus(["fakepkg"], out, max_queries=0)


def test_a_packages_test_suite_is_indexed_beside_it_and_changes_no_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "site" / "fakepkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(SOURCE)
    suites = tmp_path / "suites"
    (suites / "fakepkg" / "unit").mkdir(parents=True)
    test_text = 'def test_total():\n    """Check the total of two values."""\n    assert 1\n'
    (suites / "fakepkg" / "unit" / "test_total.py").write_text(test_text)
    (suites / "fakepkg" / "data.json").write_text("{}")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    plain = build_corpus(["fakepkg"], tmp_path / "plain")
    with_suite = build_corpus(["fakepkg"], tmp_path / "suite", test_suites=suites)
    assert with_suite == plain and read_facts(tmp_path / "suite")["test_files"] == 1  # the same truth
    copied = corpus_dir(tmp_path / "suite") / "tests" / "fakepkg" / "unit" / "test_total.py"
    assert copied.read_text() == test_text  # as it is: its docstrings stay
    with pytest.raises(ValueError, match="no test suite for 'fakepkg'"):
        build_corpus(["fakepkg"], tmp_path / "missing", test_suites=tmp_path / "elsewhere")


def test_hits_match_by_path_and_overlapping_lines() -> None:
    target = q("x", path="a/b.py", start=10, end=20)
    assert hit_matches({"path": "a/b.py", "start_line": 18, "end_line": 40}, target)
    assert hit_matches({"path": "a/b.py", "start_line": 1, "end_line": 10}, target)
    assert not hit_matches({"path": "a/b.py", "start_line": 21, "end_line": 30}, target)
    assert not hit_matches({"path": "a/c.py", "start_line": 10, "end_line": 20}, target)
    hits = [{"path": "z.py", "start_line": 1, "end_line": 9}, {"path": "a/b.py", "start_line": 5, "end_line": 12}]
    assert first_match_rank(hits, target) == 2
    assert first_match_rank(hits[:1], target) is None


def test_recall_and_mrr() -> None:
    ranks = [1, 3, None, 12, 2]
    assert recall_at(ranks, 1) == pytest.approx(0.2)
    assert recall_at(ranks, 5) == pytest.approx(0.6)
    assert recall_at(ranks, 10) == pytest.approx(0.6)
    assert mrr_at(ranks, 10) == pytest.approx((1 + 1 / 3 + 1 / 2) / 5)
    assert mrr_at([11], 10) == 0.0
    with pytest.raises(ValueError, match="no ranks"):
        recall_at([], 1)


def test_the_bench_reads_search_code_s_schema_and_never_runs_a_mode_under_a_false_label() -> None:
    from bench.quality_rows import ROWS, STAND_IN, plan_row, read_interface

    old = read_interface({"properties": {"query": {"type": "string"}, "k": {"type": "integer"}}})
    assert old.modes is None and not old.rerank and old.default_mode is None
    plans = {spec.label: plan_row(spec, old, "quality-dev") for spec in (*ROWS, STAND_IN)}
    assert plans["BM25 / keyword"].arguments is None and plans["hybrid"].arguments is None
    assert plans["hybrid + rerank"].arguments is None
    assert plans["dense"].arguments == {"k": 10, "repo": "quality-dev"}  # the default path, said so in its notes
    assert any("default path" in note for note in plans["dense"].notes)
    assert plans["dense + rerank"].arguments == {"k": 10, "repo": "quality-dev"}
    assert plans["default"].arguments == {"k": 10, "repo": "quality-dev"} and plans["default"].expected_mode is None

    new = read_interface(
        {
            "properties": {
                "mode": {"enum": ["hybrid", "dense", "keyword"], "type": "string", "default": "hybrid"},
                "rerank": {"type": "boolean"},
            }
        }
    )
    assert new.modes == ["hybrid", "dense", "keyword"] and new.rerank and new.default_mode == "hybrid"
    assert [(spec.label, plan_row(spec, new, "quality-test").arguments) for spec in ROWS] == [
        ("BM25 / keyword", {"k": 10, "repo": "quality-test", "mode": "keyword", "rerank": False}),
        ("dense", {"k": 10, "repo": "quality-test", "mode": "dense", "rerank": False}),
        ("hybrid", {"k": 10, "repo": "quality-test", "mode": "hybrid", "rerank": False}),
        ("default", {"k": 10, "repo": "quality-test", "rerank": False}),  # no mode: what an agent gets
        ("hybrid + rerank", {"k": 10, "repo": "quality-test", "mode": "hybrid", "rerank": True}),
    ]
    assert [plan_row(spec, new, "quality-test").expected_mode for spec in ROWS] == [
        "keyword",
        "dense",
        "hybrid",
        "hybrid",  # the schema's declared default is what the default row's answers must say ran
        "hybrid",
    ]
    partial = read_interface({"properties": {"mode": {"anyOf": [{"const": "dense"}, {"const": "hybrid"}]}}})
    assert partial.modes == ["dense", "hybrid"] and partial.default_mode is None
    assert plan_row(ROWS[0], partial, "quality-dev").arguments is None


def test_rows_run_once_per_tests_value_and_only_where_search_code_declares_it() -> None:
    from bench.quality_rows import ROWS, plan_row, read_interface, with_tests

    default = ROWS[3]
    assert with_tests([default], None) == [default]
    specs = with_tests([default], ["include", "exclude"])
    assert [(spec.label, spec.tests) for spec in specs] == [
        ("default [tests=include]", "include"),
        ("default [tests=exclude]", "exclude"),
    ]
    declared = read_interface({"properties": {"mode": {"enum": ["hybrid"], "default": "hybrid"}, "tests": {}}})
    assert plan_row(specs[1], declared, "quality-dev").arguments == {"k": 10, "repo": "quality-dev", "tests": "exclude"}
    undeclared = plan_row(specs[1], read_interface({"properties": {"mode": {"enum": ["hybrid"]}}}), "quality-dev")
    assert undeclared.arguments is None and "no `tests` argument" in undeclared.notes[0]


class FakeResult:
    """What the MCP SDK's call_tool returns, as far as run_row reads it."""

    def __init__(self, content: dict[str, Any]) -> None:
        self.is_error = False
        self.structured_content = content
        self.content: list[Any] = []


class FakeClient:
    """An MCP client whose search_code answers with fixed hits and a fixed `mode`."""

    def __init__(self, mode: str, hits: list[dict[str, Any]]) -> None:
        self.mode, self.hits = mode, hits
        self.calls: list[dict[str, Any]] = []

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> FakeResult:
        self.calls.append({"name": name, **arguments})
        return FakeResult({"hits": self.hits, "mode": self.mode, "reranked_by": None})


async def test_the_default_row_sends_no_mode_and_flags_answers_of_another_mode_than_the_declared_default() -> None:
    from bench.quality import run_row
    from bench.quality_rows import ROWS, plan_row, read_interface

    interface = read_interface({"properties": {"mode": {"enum": ["hybrid", "dense"], "default": "hybrid"}}})
    spec = next(s for s in ROWS if s.label == "default")
    target = q("find the thing", path="a.py", start=3, end=9)
    hits = [{"path": "a.py", "start_line": 5, "end_line": 6}]

    row = plan_row(spec, interface, "quality-dev")
    client = FakeClient("hybrid", hits)
    await run_row(client, row, [target])
    assert all("mode" not in call for call in client.calls) and len(client.calls) == 2  # warm-up + 1 query
    assert row.ranks == [1] and row.other_mode == 0 and row.modes_answered == {"hybrid": 1}

    degraded = plan_row(spec, interface, "quality-dev")
    await run_row(FakeClient("keyword", hits), degraded, [target])
    assert degraded.other_mode == 1 and degraded.modes_answered == {"keyword": 1}
    assert any(note.startswith("WARNING: 1 of 1") for note in degraded.notes)


async def test_every_set_runs_its_rows_without_rerank_before_the_reranker_gets_its_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import mcp

    from bench.quality import evaluate
    from bench.quality_rows import SetRun

    schema = {"properties": {"mode": {"enum": ["hybrid", "dense", "keyword"], "default": "hybrid"}, "rerank": {}}}
    calls: list[tuple[str, str | None, bool, bool]] = []  # repo, mode, rerank, key pushed yet
    pushed: list[bool] = []

    class Tool:
        name = "search_code"
        input_schema = schema

    class Tools:
        def __init__(self) -> None:
            self.tools = [Tool()]

    class Session(FakeClient):
        def __init__(self, url: str) -> None:
            super().__init__("hybrid", [])

        async def __aenter__(self) -> Session:
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None

        async def list_tools(self) -> Tools:
            return Tools()

        async def call_tool(self, name: str, arguments: dict[str, Any]) -> FakeResult:
            if arguments["query"] != "warm-up call":
                calls.append((arguments["repo"], arguments.get("mode"), arguments["rerank"], bool(pushed)))
            self.mode = arguments.get("mode", "hybrid")
            return await super().call_tool(name, arguments)

    monkeypatch.setattr(mcp, "Client", Session)
    runs = [SetRun(name, (), Path(name), [q(f"{name} query text")], {}) for name in ("dev", "test")]
    interface = await evaluate("http://fake/mcp/", runs, lambda: pushed.append(True))
    assert interface.default_mode == "hybrid" and pushed == [True]
    assert calls == [
        ("quality-dev", "keyword", False, False),
        ("quality-dev", "dense", False, False),
        ("quality-dev", "hybrid", False, False),
        ("quality-dev", None, False, False),
        ("quality-test", "keyword", False, False),
        ("quality-test", "dense", False, False),
        ("quality-test", "hybrid", False, False),
        ("quality-test", None, False, False),
        ("quality-dev", "hybrid", True, True),
        ("quality-test", "hybrid", True, True),
    ]
    assert all(row.other_mode == 0 and row.ranks == [None] for run in runs for row in run.rows)
