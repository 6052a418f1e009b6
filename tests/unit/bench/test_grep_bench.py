"""bench.grep on a tiny corpus: the same lines as ripgrep, a planted mismatch flagged, the rows' numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import grep as bench

FILES = {
    "a.py": "import ray\nclass Foo(Bar):\n    def go(self):\n        raise ValueError('no')  # TODO\n",
    "no_newline.py": "x = 1\nimport  ray",  # no line feed at the end
    "crlf.py": "import ray\r\nclass Win(object):\r\n    num_cpus = 2\r\n",  # `:$` fails before the \r, as in rg
    "unicode.py": "名前 = 'import ray'\n# café: DEPRECATED, ray.get([x])\n",
    "keys.py": 'password = "hunter2hunter2"\n',  # served redacted
    "empty.py": "",  # left out: nothing to match
    "notes.txt": "import ray\n",  # not listed by --glob '*.py'
}


@pytest.fixture(scope="module")
def rg() -> str:
    return bench.rg_binary()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, rg: str) -> bench.Corpus:
    root = tmp_path_factory.mktemp("grep-corpus")
    for name, text in FILES.items():
        (root / name).write_bytes(text.encode("utf-8"))
    return bench.collect(root, rg, "*.py")


def rg_lines(source: bench.Corpus, rg: str, case: bench.Case) -> set[tuple[str, int]]:
    return bench.parse_rg(bench.run_rg(bench.rg_command(rg, case, source.paths), source.root))


def test_the_corpus_is_the_listed_text_files(source: bench.Corpus) -> None:
    facts = source.facts()
    assert source.paths == ["a.py", "crlf.py", "keys.py", "no_newline.py", "unicode.py"]
    assert (facts["listed_by_rg"], facts["files"], facts["left_out"]) == (6, 5, 1)
    assert facts["lines"] == 4 + 3 + 1 + 2 + 2  # the last line of no_newline.py counts
    assert not facts["acceptance_size"]
    assert len(source.load_s) == 2 and all(s > 0 for s in source.load_s)


def test_every_bench_pattern_finds_the_lines_rg_finds(source: bench.Corpus, rg: str) -> None:
    for case in bench.CASES:
        same = bench.compare(bench.ours_lines(source.corpus, case), rg_lines(source, rg, case))
        assert same.equal, (case, same)
    imports = bench.Case("import ray", r"\bimport\s+ray\b")
    expected = {("a.py", 1), ("crlf.py", 1), ("no_newline.py", 2), ("unicode.py", 1)}
    assert bench.ours_lines(source.corpus, imports) == expected == rg_lines(source, rg, imports)
    classes = bench.Case("class line", r"^class \w+\(.*\):$")
    assert bench.ours_lines(source.corpus, classes) == {("a.py", 2)}  # not crlf.py's line 2 (its \r)


def test_a_planted_mismatch_is_flagged(source: bench.Corpus, rg: str) -> None:
    case = bench.Case("import ray", r"\bimport\s+ray\b")
    doctored = rg_lines(source, rg, case) - {("crlf.py", 1)} | {("a.py", 3)}
    same = bench.compare(bench.ours_lines(source.corpus, case), doctored)
    assert not same.equal
    assert (same.only_ours, same.only_rg, same.ours, same.rg) == ([("crlf.py", 1)], [("a.py", 3)], 4, 4)
    row = bench.row(case, [0.001], [0.001], [0.002], same, source)
    assert not row["equal"] and (row["only_ours"], row["only_rg"]) == (1, 1)
    assert [(d["side"], d["path"], d["line"]) for d in row["differing"]] == [
        ("ours only", "crlf.py", 1),
        ("rg only", "a.py", 3),
    ]


def test_real_differences_are_flagged_with_their_cause(source: bench.Corpus, rg: str) -> None:
    assert "Unicode" in bench.diagnose(source.root, source.corpus, "unicode.py", 1)  # 名前: non-ASCII
    secret = bench.Case("secret", "hunter2")  # in the file, redacted in the served text
    same = bench.compare(bench.ours_lines(source.corpus, secret), rg_lines(source, rg, secret))
    assert (same.only_ours, same.only_rg) == ([], [("keys.py", 1)])
    assert "redacted" in bench.diagnose(source.root, source.corpus, "keys.py", 1)
    assert bench.diagnose(source.root, source.corpus, "a.py", 1) == "unexplained"


def test_a_measured_row_has_its_fields_and_ratios_from_its_times(source: bench.Corpus, rg: str) -> None:
    row = bench.measure(source, bench.Case("TODO", "TODO"), 3, rg)
    assert row["equal"] and row["matches"] == row["rg_matches"] == 1
    for key in ("ours_s", "ours_page_s", "ours_max_page_s", "rg_s"):
        assert len(row[key]) == 3 and all(s > 0 for s in row[key])
    ours, rg_p50 = bench.percentile(row["ours_s"], 0.5), bench.percentile(row["rg_s"], 0.5)
    assert row["ratio"] == round(ours / rg_p50, 3)
    assert row["page_ratio"] == round(bench.percentile(row["ours_page_s"], 0.5) / rg_p50, 3)
    assert row["ours_p50_ms"] == round(ours * 1000, 3) and row["rg_p50_ms"] == round(rg_p50 * 1000, 3)
    assert row["ours_p90_ms"] == round(max(row["ours_s"]) * 1000, 3)  # nearest rank of 3: the largest


def test_percentiles_ratios_and_the_summary() -> None:
    same = bench.Comparison(True, 2, 2, [], [])
    case = bench.Case("x", "x")
    row = bench.row(case, [0.010, 0.030, 0.020], [0.004, 0.001, 0.002], [0.040, 0.020, 0.060], same)
    assert (row["ours_p50_ms"], row["ours_p90_ms"], row["rg_p50_ms"], row["rg_p90_ms"]) == (20.0, 30.0, 40.0, 60.0)
    assert (row["ratio"], row["page_ratio"], row["ours_max_page_p50_ms"]) == (0.5, 0.05, None)
    slow = bench.row(case, [0.4], [0.001], [0.1], bench.Comparison(False, 1, 2, [], [("a", 1)]))
    mid = bench.row(case, [0.1], [0.001], [0.1], same)
    totals = bench.summary([row, slow, mid])
    assert (totals["median_ratio"], totals["max_ratio"], totals["median_page_ratio"]) == (1.0, 4.0, 0.01)
    assert totals["median_within_3x"] and not totals["all_within_3x"] and not totals["all_equal"]
    assert bench.design(totals)["choice"] == "scan"
    assert bench.design({**totals, "median_ratio": 1.5})["choice"] == "consider a trigram index"


@pytest.mark.parametrize("case", bench.CATASTROPHES, ids=lambda c: c.label)
def test_a_catastrophic_pattern_answers_at_once(case: bench.Case, tmp_path: Path, rg: str) -> None:
    out = bench.catastrophic(case, tmp_path, rg, re_timeout_s=0.3)
    assert out["line_chars"] == bench.CATASTROPHE_CHARS
    assert out["ours_s"] < 3.0 and out["ours_matches"] == 0 == out["rg_matches"]
    assert out["python_re"] == "timed out after 0.3 s" and out["python_re_s"] is None


def test_python_re_reports_a_quick_answer(tmp_path: Path) -> None:
    (tmp_path / "short.txt").write_text("aaa\n")
    out = bench.python_re(tmp_path / "short.txt", r"(a+)+$", 5.0)
    assert out["python_re"] == "matched: True" and out["python_re_s"] < 5.0


def test_main_writes_its_results_and_exits_1_on_a_mismatch(
    source: bench.Corpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "grep.json"
    argv = ["--root", str(source.root), "--repeat", "1", "--re-timeout", "0.2", "--out", str(out)]
    assert bench.main(argv) == 0
    result = json.loads(out.read_text())
    assert [r["pattern"] for r in result["rows"]] == [c.pattern for c in bench.CASES]
    assert result["summary"]["all_equal"] and result["corpus"]["files"] == 5
    assert set(result["versions"]) >= {"google-re2", "ripgrep", "rg --version"}
    assert "NOT AN ACCEPTANCE RUN" in capsys.readouterr().out
    real = bench.parse_rg
    monkeypatch.setattr(bench, "parse_rg", lambda output: real(output) | {("a.py", 3)})  # rg "finds" one more
    assert bench.main(argv) == 1
    assert "MISMATCH" in capsys.readouterr().out
