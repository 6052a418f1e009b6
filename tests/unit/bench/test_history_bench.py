"""bench.history on the scripted shop history: git's answers, ours and the file-history baseline."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import history as bench
from tests.support.scripted_history import build_shop_history


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("bench-history")
    shop = build_shop_history(work / "shop")
    return bench.run(shop.root, work, sample=50, seed=0, dates=["2026-01-18"], limit=None)


def test_the_sample_is_every_function_named_once_in_its_file(tmp_path: Path) -> None:
    shop = build_shop_history(tmp_path / "shop")
    sampled = {(f.path, f.qualified) for f in bench.sample_functions(shop.root, 50, 0)}
    assert sampled == {
        ("pkg/core.py", "f"),
        ("pkg/core.py", "Cart.__init__"),
        ("pkg/core.py", "Cart.m"),
        ("pkg/util.py", "g"),
        ("pkg/b.py", "h2"),
        ("pkg/c.py", "n"),
    }


def test_ours_recalls_all_of_git_and_beats_file_history(result: dict) -> None:
    ours, files = result["symbol_history"], result["file_history_baseline"]
    assert ours["recall"] == 1.0
    # g's two commits before its move to util.py are ours alone (git -L stops at the move)
    assert ours["precision"] == round(ours["pairs"] / (ours["pairs"] + 2), 3)
    assert files["recall"] < 1.0  # `git log -- path` loses a function's commits before its file's rename
    assert files["f1"] < ours["f1"]
    assert result["commits_mined"] == 12 and not result["more"]  # the first-parent line
    window = result["what_changed"]["2026-01-18"]
    assert (window["precision"], window["recall"]) == (1.0, 1.0)
    exact = result["symbol_history_vs_git_span"]  # git following the functions' own lines
    assert exact["recall"] == 1.0 and exact["pairs"] == ours["pairs"]


def test_scores_are_micro_averaged_over_pairs() -> None:
    a, b = bench.Sampled("a.py", "a", "a"), bench.Sampled("b.py", "b", "b")
    got = bench.scores({a: {"1", "2"}, b: {"3"}}, {a: {"1"}, b: {"3", "4", "5"}})
    assert got == {"precision": 0.5, "recall": 0.667, "f1": 0.571, "pairs": 3}


def test_commit_search_finds_each_subject_as_the_store_serves_it(result: dict, tmp_path: Path) -> None:
    history = result["history"]
    (tmp_path / "repo").symlink_to(result["repo"])  # where the bench cloned it: git grep runs there
    found = bench.commit_search(history, tmp_path, queries=50, seed=0, encoder=None)
    assert found["subjects"] == 12  # every first-parent subject names one commit
    assert found["recall_at_3"]["keyword"] >= 0.9 and found["recall_at_3"]["git_grep"] == 1.0
    assert "dense" not in found["recall_at_3"]
