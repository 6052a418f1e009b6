"""The mined history answers what git answers: `git log -L :func:file`, `git log --since`, `A..B`."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.history import (
    Change,
    CommitRecord,
    History,
    LineRange,
    SymbolChange,
    WindowEnd,
    mine_history,
    parse_window_end,
)
from tests.support.scripted_history import AWS_KEY, ScriptedRepo, build_shop_history, run_git


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> ScriptedRepo:
    return build_shop_history(tmp_path_factory.mktemp("history") / "shop")


@pytest.fixture(scope="module")
def history(shop: ScriptedRepo) -> History:
    mined = mine_history(shop.root, "HEAD")
    return History("shop", mined.commits, mined.spans)


def changed(history: History, symbol: str, path: str) -> list[str]:
    """The commits `symbol_history` says changed the symbol's lines (a file renamed changes none)."""
    return [c.commit for c in history.symbol_history(symbol, path).commits if c.lines]


def test_every_first_parent_commit_is_mined_newest_first(shop: ScriptedRepo, history: History) -> None:
    assert [c.commit for c in history.commits] == shop.first_parents()
    merge = next(c for c in history.commits if c.commit == shop.shas["merge"])
    assert merge.merge and merge.parent == shop.git("rev-parse", f"{shop.shas['merge']}^1")


@pytest.mark.parametrize(
    ("symbol", "function", "path"),
    [("f", "f", "pkg/core.py"), ("Cart.m", "m", "pkg/core.py"), ("h2", "h2", "pkg/b.py"), ("n", "n", "pkg/c.py")],
)
def test_symbol_history_is_git_line_log(
    shop: ScriptedRepo, history: History, symbol: str, function: str, path: str
) -> None:
    """Through a merge (g's side), a file renamed (a.py -> core.py) and a function renamed (h -> h2)."""
    assert changed(history, symbol, path) == shop.line_log(function, path)


def test_a_function_moved_to_another_file_is_followed_where_git_line_log_stops(
    shop: ScriptedRepo, history: History
) -> None:
    moved = shop.shas["moved"]
    before_the_move = shop.line_log("g", "pkg/core.py", rev=f"{moved}^")  # git, asked again at the old place
    assert shop.line_log("g", "pkg/util.py")[-1] == moved  # git -L sees g born in util.py
    assert changed(history, "g", "pkg/util.py") == shop.line_log("g", "pkg/util.py") + before_the_move
    entry = next(c for c in history.symbol_history("g", "pkg/util.py").commits if c.commit == moved)
    assert (entry.change, entry.previous_path, entry.previous_symbol) == (Change.MOVED, "pkg/core.py", "g")


def test_a_revert_is_one_more_change(shop: ScriptedRepo, history: History) -> None:
    commits = changed(history, "g", "pkg/util.py")
    assert commits[:2] == [shop.shas["revert"], shop.shas["g1"]]


def test_a_file_rename_is_in_the_history_without_changed_lines(shop: ScriptedRepo, history: History) -> None:
    entry = next(c for c in history.symbol_history("f", "pkg/core.py").commits if c.commit == shop.shas["renamed"])
    assert (entry.change, entry.lines, entry.previous_path) == (Change.MOVED, [], "pkg/a.py")


def test_a_bare_name_follows_its_one_symbol_and_lists_the_candidates_of_several(history: History) -> None:
    assert changed(history, "g", "") == changed(history, "g", "pkg/util.py")  # one g, renamed file and move followed
    assert history.symbol_history("__init__").commits[-1].change is Change.ADDED
    two = History("two", [added_in("c2", "b.py", "run"), added_in("c1", "a.py", "run")])
    answer = two.symbol_history("run")
    assert answer.commits == [] and answer.candidates == ["a.py: run", "b.py: run"]
    assert [c.commit for c in two.symbol_history("run", "b.py").commits] == ["c2"]
    assert two.symbol_history("walk").note == "no change to 'walk' was mined"


def added_in(commit: str, path: str, symbol: str) -> CommitRecord:
    change = SymbolChange(path=path, symbol=symbol, kind="function", change=Change.ADDED, lines=[])
    return CommitRecord(
        commit=commit, parent=None, author="a", authored_at=1, committed_at=1, subject="s", symbols=[change]
    )


def window_truth(shop: ScriptedRepo, since: str) -> dict[tuple[str, str], set[str]]:
    """git's answer, per function alive at HEAD: the commits since `since` that touched its lines."""
    functions = [("f", "f", "pkg/core.py"), ("g", "g", "pkg/util.py"), ("Cart.m", "m", "pkg/core.py")]
    functions += [("h2", "h2", "pkg/b.py"), ("n", "n", "pkg/c.py")]
    return {(path, symbol): set(shop.line_log(fn, path, f"--since={since}")) for symbol, fn, path in functions}


@pytest.mark.parametrize("since", ["2026-01-18", "2026-02-03T00:00:00Z"])
def test_what_changed_since_a_date_is_git_log_since(shop: ScriptedRepo, history: History, since: str) -> None:
    items, cut = history.what_changed(parse_window_end(since, lambda: 0.0))
    assert not cut
    assert {item.commit for item in items} <= set(shop.first_parents(f"--since={since}"))
    for (path, symbol), truth in window_truth(shop, since).items():
        ours = {item.commit for item in items if (item.path, item.symbol) == (path, symbol) and item.lines}
        assert ours == truth, (path, symbol)


def test_what_changed_since_a_commit_is_the_range_after_it(shop: ScriptedRepo, history: History) -> None:
    items, _ = history.what_changed(WindowEnd(commit=shop.shas["moved"]))
    in_range = shop.first_parents(f"{shop.shas['moved']}..HEAD")
    assert sorted({item.commit for item in items}) == sorted(in_range)
    until = history.what_changed(WindowEnd(commit=shop.shas["base"]), WindowEnd(commit=shop.shas["f1"]))[0]
    assert [(i.path, i.symbol, i.change) for i in until] == [("pkg/a.py", "f", Change.MODIFIED)]


def test_what_changed_under_a_path_and_its_limit(shop: ScriptedRepo, history: History) -> None:
    items, cut = history.what_changed(WindowEnd(at=0), path="pkg/b.py")
    assert {i.path for i in items} == {"pkg/b.py"} and not cut
    assert [i.commit for i in items] == shop.first_parents("--", "pkg/b.py")
    first_two, cut = history.what_changed(WindowEnd(at=0), limit=2)
    assert len(first_two) == 2 and cut


def test_a_hostile_message_is_one_commit_its_credential_redacted_and_a_secret_file_never_recorded(
    shop: ScriptedRepo, history: History
) -> None:
    record = next(c for c in history.commits if c.commit == shop.shas["hostile"])
    assert record.subject == "Odd message" and "diff --git a/pkg/x.py" in record.body
    assert AWS_KEY not in record.message and "[redacted:" in record.message
    assert [f.path for f in record.files] == ["pkg/b.py"]  # .env was committed too
    assert [(s.symbol, s.change) for s in record.symbols] == [("h2", Change.MODIFIED)]
    assert all(".env" not in f.path for c in history.commits for f in c.files)


def test_an_incremental_mine_reads_only_the_new_commit(shop: ScriptedRepo, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    shop.git("clone", "-q", str(shop.root), str(clone))
    first = mine_history(clone, "HEAD")
    (clone / "pkg" / "b.py").write_text("def h2(order):\n    return order\n")
    run_git(clone, "commit", "-qam", "h2 simplified", date="2026-03-01T10:00:00Z")
    again = mine_history(clone, "HEAD", stop=first.newest)
    assert len(again.commits) == 1 and not again.more
    assert [(s.symbol, s.change) for s in again.commits[0].symbols] == [("h2", Change.MODIFIED)]


def test_a_bounded_first_mine_says_older_commits_remain_and_continues_from_there(shop: ScriptedRepo) -> None:
    newest = mine_history(shop.root, "HEAD", limit=5)
    assert len(newest.commits) == 5 and newest.more
    oldest = newest.oldest
    assert oldest is not None and oldest.parent is not None
    rest = mine_history(shop.root, oldest.parent)
    assert [c.commit for c in newest.commits + rest.commits] == shop.first_parents() and not rest.more


def test_durations_dates_and_shas_read_as_window_ends() -> None:
    now = 1_800_000_000.0
    assert parse_window_end("7d", lambda: now).at == now - 7 * 86400
    assert parse_window_end("12h", lambda: now).at == now - 12 * 3600
    assert parse_window_end("2026-01-01", lambda: now).at == 1767225600.0
    assert parse_window_end("a" * 40, lambda: now).commit == "a" * 40
    with pytest.raises(ValueError, match="not a duration"):
        parse_window_end("main", lambda: now)


def test_patch_lines_that_look_like_headers_and_quoted_paths_are_read_as_git_wrote_them(tmp_path: Path) -> None:
    repo = ScriptedRepo(tmp_path / "odd")
    lines = 'def banner():\n    return """\n-- a/evil.py\n++ b/evil.py\n@@ -1 +1 @@\n"""\n'
    repo.write("tab\there é.py", lines)
    repo.commit("one", "one", "2026-01-01T00:00:00Z")
    repo.write("tab\there é.py", lines.replace("-- a/evil.py\n++ b/evil.py", "--- a/evil.py\n+++ b/evil.py"))
    repo.commit("two", "two", "2026-01-02T00:00:00Z")
    mined = mine_history(repo.root, "HEAD").commits
    assert [[f.path for f in c.files] for c in mined] == [["tab\there é.py"], ["tab\there é.py"]]
    assert [(s.symbol, s.change, s.lines) for s in mined[0].symbols] == [
        ("banner", Change.MODIFIED, [LineRange(start=3, end=4)])
    ]
