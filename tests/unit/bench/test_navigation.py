"""bench.navigation on a tiny package with known calls: jedi's truth, grep's lines and our callers
give the expected sites, and the P/R/F1 arithmetic is right on a hand-made example."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.navigation_eval import (
    Counts,
    build_graph,
    eligible,
    evaluate_package,
    prf,
    sample,
    scored_sites,
    target_of,
)
from bench.navigation_truth import Grep, JediTruth, Target, import_lines, is_call
from cluster.graph import CodeGraph

UTIL = """\
def helper(x):
    return x + 1


class Shape:
    def __init__(self, size):
        self.size = helper(size)

    def area(self):
        return self.size * self.size
"""

MAIN = """\
from pkg.util import helper as h, Shape
from pkg import util


def run():
    s = Shape(2)
    return s.area() + h(1)


def twice():
    return util.helper (3) + run()


reference_only = util.helper
"""

OTHER = """\
def helper(y):
    return y


def unrelated():
    return helper(0)
"""


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("nav")
    (base / "pkg").mkdir()
    (base / "pkg" / "__init__.py").write_text("")
    (base / "pkg" / "util.py").write_text(UTIL)
    (base / "pkg" / "main.py").write_text(MAIN)
    (base / "pkg" / "other.py").write_text(OTHER)
    return base


@pytest.fixture(scope="module")
def graph(root: Path) -> CodeGraph:
    return build_graph(root, "nav")[0]


def test_prf_is_micro_averaged_over_site_pairs() -> None:
    counts = Counts()
    counts.add({("a.py", 1), ("a.py", 2), ("b.py", 3)}, {("a.py", 1), ("b.py", 3), ("c.py", 9)})  # 2 tp, 1 fp, 1 fn
    counts.add({("d.py", 4)}, {("d.py", 4), ("d.py", 5), ("d.py", 6)})  # 1 tp, 0 fp, 2 fn
    assert (counts.tp, counts.fp, counts.fn) == (3, 1, 3)
    m = prf(counts)
    assert m["precision"] == pytest.approx(0.75)
    assert m["recall"] == pytest.approx(0.5)
    assert m["f1"] == pytest.approx(2 * 0.75 * 0.5 / 1.25)  # 0.6
    assert prf(Counts(0, 0, 4)) == {"precision": None, "recall": 0.0, "f1": None, "tp": 0, "fp": 0, "fn": 4}
    assert prf(Counts(0, 2, 4))["f1"] == 0.0


def test_call_and_import_lines() -> None:
    assert is_call("    return helper (3)", 11, "helper")
    assert not is_call("x = util.helper", 9, "helper")
    assert import_lines("import os\nfrom a import (\n    b,\n)\nx = 1\n") == {1, 2, 3, 4}


def test_jedi_truth_follows_the_alias_and_counts_constructor_calls(root: Path) -> None:
    jedi_truth = JediTruth(root)
    truth = jedi_truth.truth(Target("pkg/util.py", 1, "helper"))
    # util.py:7 a call; main.py:7 through the alias h; main.py:11 with a space before "("; main.py:14 a mention
    assert truth.calls == {("pkg/util.py", 7), ("pkg/main.py", 7), ("pkg/main.py", 11)}
    assert truth.references == truth.calls | {("pkg/main.py", 14)}  # import lines are in neither
    init = jedi_truth.truth(Target("pkg/util.py", 6, "__init__", owner=(5, "Shape")))
    assert init.calls == {("pkg/main.py", 6)}  # Shape(2) reaches Shape.__init__
    method = jedi_truth.truth(Target("pkg/util.py", 9, "area"))
    assert method.calls == {("pkg/main.py", 7)}
    # impact: helper <- Shape.__init__ (util:7) <- run (main:6) <- twice (main:11)
    chain = jedi_truth.transitive_calls(Target("pkg/util.py", 1, "helper"), 3)
    assert chain == truth.calls | {("pkg/main.py", 6)}
    assert jedi_truth.transitive_calls(Target("pkg/util.py", 1, "helper"), 1) == truth.calls


def test_grep_finds_every_name_call_and_no_def_line(root: Path) -> None:
    grep = Grep(root)
    # no alias (h(1)), but other.py's own helper calls: grep cannot tell them apart
    assert grep.calls(["helper"]) == {("pkg/util.py", 7), ("pkg/main.py", 11), ("pkg/other.py", 6)}
    assert grep.calls(["__init__", "Shape"]) == {("pkg/main.py", 6)}
    assert ("pkg/main.py", 1) in grep.references(["helper"])  # the import line: grep is naive


def test_our_callers_on_the_tiny_package(graph: CodeGraph) -> None:
    defs = {(d.path, d.qualified): d for d in eligible(graph)}
    assert set(defs) == {
        ("pkg/util.py", "helper"), ("pkg/util.py", "Shape.__init__"), ("pkg/util.py", "Shape.area"),
        ("pkg/main.py", "run"), ("pkg/main.py", "twice"), ("pkg/other.py", "helper"), ("pkg/other.py", "unrelated"),
    }  # fmt: skip
    helper = defs[("pkg/util.py", "helper")]
    ours = scored_sites(graph.callers(helper.qualified, path=helper.path, depth=1, limit=1000))
    sure = {site for site, confidence in ours.items() if confidence >= 0.5}
    assert sure == {("pkg/util.py", 7), ("pkg/main.py", 7), ("pkg/main.py", 11)}
    assert ("pkg/other.py", 6) not in sure  # the other helper's call
    init = defs[("pkg/util.py", "Shape.__init__")]
    assert target_of(graph, init) == Target("pkg/util.py", 6, "__init__", owner=(5, "Shape"))
    init_sites = scored_sites(graph.callers(init.qualified, path=init.path, depth=1, limit=1000))
    assert ("pkg/main.py", 6) in init_sites


def test_sample_is_seeded_and_in_file_order(graph: CodeGraph) -> None:
    defs = eligible(graph)
    assert sample(defs, 100, 0) == defs
    first = sample(defs, 3, 7)
    assert first == sample(defs, 3, 7) and len(first) == 3
    assert first == sorted(first, key=lambda d: (d.path, d.line))


def test_evaluate_package_scores_ours_and_grep_against_jedi(root: Path, tmp_path: Path) -> None:
    result = evaluate_package("pkg", tmp_path, n=100, impact_n=100, seed=0, thresholds=[1.0, 0.5, 0.0], root=root)
    assert result.sampled == result.measured == 7 and not result.jedi_failed
    grep = result.grep_callers
    assert grep.tp > 0 and grep.fp >= 1  # other.py's helper(0) counted for util.helper at least
    assert result.callers[0.0].fn <= result.callers[0.5].fn <= result.callers[1.0].fn
    ours = prf(result.callers[0.5])
    assert ours["f1"] is not None and ours["f1"] > (prf(grep)["f1"] or 0)
    assert result.impact[0.0].tp > 0
