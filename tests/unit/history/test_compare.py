"""compare: the symbols that differ between two commits, checked against `git diff`."""

from __future__ import annotations

import pytest

from cluster.history import Change, compare_commits
from tests.support.scripted_history import AWS_KEY, ScriptedRepo, build_shop_history


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> ScriptedRepo:
    return build_shop_history(tmp_path_factory.mktemp("compare") / "shop")


def test_the_symbols_between_two_commits_with_their_diffs(shop: ScriptedRepo) -> None:
    base, head = shop.shas["m1"], shop.git("rev-parse", "HEAD")
    found = compare_commits("shop", shop.root, base, head)
    names = shop.git("diff", "--name-only", base, head).splitlines()
    assert sorted(found.files) == sorted(n for n in names if n != ".env")  # the secret file is never shown
    by_symbol = {(i.path, i.symbol): i for i in found.items}
    f = by_symbol[("pkg/core.py", "f")]
    assert (f.change, f.diff) == (Change.MODIFIED, "-    return price * 3\n+    return price * 4")
    g = by_symbol[("pkg/util.py", "g")]
    assert (g.change, g.previous_path) == (Change.MOVED, "pkg/core.py")
    assert by_symbol[("pkg/c.py", "n")].change is Change.ADDED
    assert by_symbol[("pkg/b.py", "h2")].change is Change.RENAMED
    assert by_symbol[("pkg/b.py", "h2")].previous_symbol == "h"
    assert not found.truncated and AWS_KEY not in found.model_dump_json()


def test_the_answer_is_capped(shop: ScriptedRepo) -> None:
    found = compare_commits("shop", shop.root, shop.shas["base"], shop.git("rev-parse", "HEAD"), limit=2)
    assert len(found.items) == 2 and found.truncated
