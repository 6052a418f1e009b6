"""The quality bench's same-run baselines (function units, BM25, dense) and its delta report (no Ray)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from bench.baselines import (
    FUNCTION_BM25,
    FUNCTION_DENSE,
    bm25_baseline,
    dense_baseline,
    function_units,
    run_baselines,
    source_units,
    top_k,
)
from bench.quality_corpus import Query

if TYPE_CHECKING:
    from cluster.local import LocalEncoder

SOURCE = textwrap.dedent("""\
    import functools


    @functools.lru_cache
    @staticmethod
    def cached(a, b):
        return a + b


    class Shelf:
        LIMIT = 3

        def put(self, item):
            def check(x):
                return x is not None

            return check(item)

        class Inner:
            async def fetch(self):
                return 1


    async def gather():
        return [1]
    """)

# One function per topic; the query words occur in exactly one body.
TINY = {
    "pkg/archive.py": textwrap.dedent("""\
        def compress_archive(folder, level):
            # gzip every file of the folder into one tarball archive
            tarball = folder + ".tar.gz"
            return tarball, level
        """),
    "pkg/colors.py": textwrap.dedent("""\
        def blend_colors(red, green, blue):
            # mix the three colour channels into a single hex string
            return "#%02x%02x%02x" % (red, green, blue)
        """),
    "pkg/clock.py": textwrap.dedent("""\
        class Timer:
            def elapsed_seconds(self, started, stopped):
                # wall clock time between start and stop
                return stopped - started
        """),
}


def write_tiny(root: Path) -> Path:
    for rel, text in TINY.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def query(text: str, path: str, start: int, end: int) -> Query:
    return Query(query=text, path=path, symbol="x", start_line=start, end_line=end)


@pytest.fixture(scope="module")
def encoder() -> LocalEncoder:
    from cluster.local import LocalEncoder
    from cluster.settings import EmbeddingSettings

    return LocalEncoder(EmbeddingSettings(cpu_threads=2))


def test_function_units_are_every_def_at_any_depth_from_its_first_decorator_and_never_a_class() -> None:
    units = source_units(SOURCE, "m.py")
    assert [(u.symbol, u.start_line, u.end_line) for u in units] == [
        ("cached", 4, 7),
        ("Shelf.put", 13, 17),
        ("Shelf.put.check", 14, 15),
        ("Shelf.Inner.fetch", 20, 21),
        ("gather", 24, 25),
    ]
    cached = units[0]
    assert cached.text == "@functools.lru_cache\n@staticmethod\ndef cached(a, b):\n    return a + b\n"
    assert units[1].text.startswith("    def put(self, item):\n") and units[1].text.endswith("return check(item)\n")
    assert all("class " not in u.text and "LIMIT" not in u.text for u in units)
    assert cached.hit() == {"path": "m.py", "start_line": 4, "end_line": 7, "symbol": "cached"}


def test_function_units_keep_crlf_line_numbers_and_read_every_file_with_corpus_relative_paths(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "m.py").write_bytes(b"x = 1\r\n\r\ndef f():\r\n    return 'caf\xc3\xa9'\r\n")
    (tmp_path / "a" / "n.py").write_text("def g():\n    pass\n")
    (tmp_path / "a" / "notes.txt").write_text("def h():\n    pass\n")
    units = function_units(tmp_path)
    assert [(u.path, u.symbol, u.start_line, u.end_line) for u in units] == [
        ("a/b/m.py", "f", 3, 4),
        ("a/n.py", "g", 1, 2),
    ]
    assert units[0].text == "def f():\r\n    return 'café'\r\n"
    with pytest.raises(ValueError, match="no function"):
        function_units(tmp_path / "a" / "b" / "missing")


def test_top_k_is_best_first_with_ties_to_the_lower_index() -> None:
    scores = np.array([0.1, 0.9, 0.5, 0.9, 0.2], dtype=np.float32)
    assert top_k(scores, 3).tolist() == [1, 3, 2]
    assert top_k(scores, 10).tolist() == [1, 3, 2, 4, 0]
    tied = np.array([1, 1, 2, 2, 1, 0, 0, 1, 1, 1, 2, 1], dtype=np.float32)
    assert top_k(tied, 4).tolist() == [2, 3, 10, 0]  # the tie at the cut goes to the lowest index too


def test_bm25_ranks_first_the_function_whose_body_holds_the_query_words(tmp_path: Path) -> None:
    units = function_units(write_tiny(tmp_path))
    queries = [
        query("gzip the folder into a tarball archive", "pkg/archive.py", 1, 4),
        query("mix colour channels into a hex string", "pkg/colors.py", 1, 3),
        query("wall clock time between start and stop", "pkg/clock.py", 2, 4),
        query("quantum entanglement of photons", "pkg/clock.py", 2, 4),  # no shared term: nothing returned
    ]
    run = bm25_baseline(units, queries)
    assert run.label == FUNCTION_BM25 and run.units == 3
    assert run.ranks == [1, 1, 1, None]
    assert len(run.latencies_s) == 4 and all(s > 0 for s in run.latencies_s)


@pytest.mark.slow  # loads the packaged model
def test_dense_baseline_with_the_packaged_model_finds_each_function_by_meaning(
    tmp_path: Path, encoder: LocalEncoder
) -> None:
    units = function_units(write_tiny(tmp_path))
    queries = [
        query("Create a compressed tar file from a directory.", "pkg/archive.py", 1, 4),
        query("Combine RGB values into a colour code.", "pkg/colors.py", 1, 3),
        query("How long did the timer run?", "pkg/clock.py", 2, 4),
    ]
    run = dense_baseline(units, queries, encoder)
    assert run.label == FUNCTION_DENSE and run.units == 3
    assert run.ranks == [1, 1, 1]
    assert len(run.latencies_s) == 3 and all(s > 0 for s in run.latencies_s)
    misses = dense_baseline(units, [query("Create a compressed tar file.", "pkg/other.py", 1, 4)], encoder, k=2)
    assert misses.ranks == [None]


@pytest.mark.slow  # loads the packaged model
def test_run_baselines_gives_dense_then_bm25_over_the_same_units(tmp_path: Path, encoder: LocalEncoder) -> None:
    lines: list[str] = []
    queries = [query("gzip the folder into a tarball archive", "pkg/archive.py", 1, 4)]
    runs = run_baselines(write_tiny(tmp_path), queries, encoder, emit=lines.append)
    assert [r.label for r in runs] == [FUNCTION_DENSE, FUNCTION_BM25]
    assert [r.ranks for r in runs] == [[1], [1]] and all(r.units == 3 for r in runs)
    assert lines[0] == "baselines: 3 function units; 1 queries"


def test_deltas_are_points_against_the_function_dense_script_and_p50_against_hybrid() -> None:
    from bench.quality_report import delta_points, delta_table, deltas, format_points

    assert delta_points(0.461, 0.387) == 7.4 and format_points(7.4) == "+7.4"
    assert format_points(delta_points(0.387, 0.461)) == "-7.4"
    assert format_points(delta_points(0.5, 0.5)) == "+0.0"
    assert format_points(delta_points(0.50001, 0.5)) == "+0.0" and format_points(delta_points(0.49999, 0.5)) == "+0.0"

    def m(r1: float, r10: float, mrr: float, p50: float) -> dict[str, object]:
        return {"recall@1": r1, "recall@5": r10, "recall@10": r10, "mrr@10": mrr, "latency": {"p50_ms": p50}}

    lines = [
        (FUNCTION_DENSE + " ²", m(0.387, 0.741, 0.495, 90.0)),
        ("dense", m(0.40, 0.70, 0.50, 40.0)),
        ("hybrid", m(0.461, 0.80, 0.55, 50.0)),
        ("hybrid + rerank ¹", {}),
        (FUNCTION_BM25 + " ²", m(0.16, 0.45, 0.24, 0.1)),
    ]
    rows = deltas(lines)
    assert rows[0] == {
        "row": FUNCTION_DENSE + " ²",
        "available": True,
        "recall@1_points": 0.0,
        "recall@10_points": 0.0,
        "mrr@10_points": 0.0,
        "p50_vs_hybrid": 1.8,
    }
    assert rows[2]["recall@1_points"] == 7.4 and rows[2]["recall@10_points"] == 5.9
    assert rows[2]["mrr@10_points"] == 5.5 and rows[2]["p50_vs_hybrid"] == 1.0
    assert rows[1]["recall@10_points"] == -4.1 and rows[1]["p50_vs_hybrid"] == 0.8
    assert rows[3] == {"row": "hybrid + rerank ¹", "available": False}
    text = delta_table(rows)
    assert "| hybrid | +7.4 | +5.9 | +5.5 | 1.00× |" in text
    assert "| dense | +1.3 | -4.1 | +0.5 | 0.80× |" in text
    assert "| hybrid + rerank ¹ | n/a | n/a | n/a | n/a |" in text
    assert rows[4]["p50_vs_hybrid"] == 0.002 and f"| {FUNCTION_BM25} ² | -22.7 | -29.1 | -25.5 | <0.01× |" in text

    no_reference = deltas([("hybrid", m(0.5, 0.8, 0.6, 50.0))])
    assert no_reference[0]["recall@1_points"] is None and no_reference[0]["p50_vs_hybrid"] == 1.0
    assert "| hybrid | n/a | n/a | n/a | 1.00× |" in delta_table(no_reference)
