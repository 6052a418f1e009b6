"""The reindex's history step over the fake ports (a real catalogue): a first build mines the history,
an incremental one only the commits since, a bounded one says what remains and backfills on request."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.errors import StoreError
from cluster.settings import SamespaceSettings
from tests.support.fakes.build_ports import Run
from tests.support.scripted_history import ScriptedRepo, build_shop_history, run_git

pytestmark = pytest.mark.slow  # each test scripts a git history and reindexes it: a stream of git processes


@pytest.fixture
def shop(tmp_path: Path) -> ScriptedRepo:
    return build_shop_history(tmp_path / "shop")


def mined(run: Run) -> list[int]:
    """The commits each history write of the last run carried."""
    return [rows for method, rows in run.index.calls if method == "write_history"]


def test_a_first_build_mines_the_history_and_one_new_commit_is_all_the_next_mines(
    tmp_path: Path, shop: ScriptedRepo
) -> None:
    run = Run(tmp_path)
    run(shop.root)
    assert mined(run) == [12]
    state = run.index.history_state("shop")
    assert state is not None and state.newest == shop.first_parents()[0] and state.commits == 12 and not state.more
    (shop.root / "pkg" / "c.py").write_text("def n(value):\n    return value + 1\n")
    run_git(shop.root, "commit", "-qam", "n adds one", date="2026-03-01T10:00:00Z")
    run(shop.root)
    assert mined(run) == [1]
    assert any(line.startswith("history: mined 1 commits after") for line in run.lines)
    history = run.index.catalog.history.load("shop")
    assert [c.commit for c in history.commits] == shop.first_parents()
    assert history.commits[0].subject == "n adds one"
    run(shop.root)
    assert mined(run) == [] and any(line.startswith("history: up to date at") for line in run.lines)


def test_a_commit_that_changes_no_indexed_file_is_mined_though_the_build_is_up_to_date(
    tmp_path: Path, shop: ScriptedRepo
) -> None:
    run = Run(tmp_path)
    run(shop.root)
    (shop.root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")  # binary: never indexed
    run_git(shop.root, "add", "logo.png")
    run_git(shop.root, "commit", "-qm", "a logo", date="2026-03-02T10:00:00Z")
    run(shop.root)
    assert any(line.startswith("up to date:") for line in run.lines) and "begin_build" not in run.methods()
    assert mined(run) == [1]
    newest = run.index.catalog.history.load("shop").commits[0]
    assert (newest.subject, [f.path for f in newest.files], newest.symbols) == ("a logo", ["logo.png"], [])


def test_a_bounded_first_build_says_older_commits_remain(tmp_path: Path, shop: ScriptedRepo) -> None:
    run = Run(tmp_path)
    run.reindex._settings = SamespaceSettings(  # noqa: SLF001 - the bound is the test's
        store={"data_dir": tmp_path / "data"}, index={"history_commits": 5}
    )
    run(shop.root)
    state = run.index.history_state("shop")
    assert mined(run) == [5] and state is not None and state.more and state.commits == 5
    run(shop.root)
    state = run.index.history_state("shop")
    assert mined(run) == [] and state is not None and state.more and state.commits == 5


def test_a_backfill_goes_on_after_the_index_is_served_a_batch_at_a_time_until_whole(
    tmp_path: Path, shop: ScriptedRepo
) -> None:
    run = Run(tmp_path)
    run.reindex._settings = SamespaceSettings(  # noqa: SLF001 - the bound and the backfill are the test's
        store={"data_dir": tmp_path / "data"}, index={"history_commits": 5, "history_backfill": True}
    )
    run(shop.root)
    assert mined(run) == [5, 5, 2]  # one job: the newest 5, then older batches of 5 until the root
    stored = [line for line in run.lines if line.startswith("history:") and "stored" in line]
    assert stored == [
        "history: 5 commits stored, older ones remain",
        "history: 10 commits stored, older ones remain",
        "history: 12 commits stored",
    ]
    assert run.lines.index(stored[0]) > max(i for i, line in enumerate(run.lines) if line.startswith("committed"))
    state = run.index.history_state("shop")
    assert state is not None and not state.more and state.commits == 12
    history = run.index.catalog.history.load("shop")
    assert [c.commit for c in history.commits] == shop.first_parents()
    run(shop.root)
    assert mined(run) == []  # whole: nothing more to mine


def test_a_plain_folder_has_no_history_and_a_failed_one_fails_nothing(
    tmp_path: Path, shop: ScriptedRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "a.py").write_text("def a():\n    return 1\n")
    run = Run(tmp_path)
    run(folder, name="plain")
    assert mined(run) == [] and run.index.history_state("plain") is None

    def refused(*args: object, **options: object) -> None:
        raise StoreError("upsert", "disk full")

    monkeypatch.setattr(run.index, "write_history", refused)
    record = run(shop.root)
    assert record.name == "shop" and run.index.record("shop") is not None  # the index was still built
    assert "history: not mined: StoreError: vector store upsert failed: disk full" in run.lines


def test_a_rewritten_history_is_mined_again_and_keeps_no_commit_of_the_old_line(
    tmp_path: Path, shop: ScriptedRepo
) -> None:
    run = Run(tmp_path)
    run(shop.root)
    run_git(shop.root, "reset", "-q", "--hard", "HEAD~2")
    (shop.root / "pkg" / "c.py").write_text("def n(value):\n    return -value\n")
    run_git(shop.root, "add", "-A")
    run_git(shop.root, "commit", "-qm", "n negates", date="2026-03-04T10:00:00Z")
    run(shop.root)
    assert any("is no longer in the history of" in line for line in run.lines)
    assert mined(run) == [11]
    history = run.index.catalog.history.load("shop")
    assert [c.commit for c in history.commits] == shop.first_parents()
