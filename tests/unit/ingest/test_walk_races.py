"""Paths swapped after they were checked: a folder (or file) of the tree replaced by a symlink while
the walk is under way, or after an indexed path was checked for a read, never leads the read out of
the root. Each case swaps in a link to a folder outside holding a canary, and checks the canary is
never read."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cluster.ingest.walker as walker
from cluster.errors import ReadRefused
from cluster.ingest.secret_files import SECRET_DENY, DenyList
from cluster.ingest.skips import SkipLog, SkipReason
from cluster.ingest.source import read_source_lines
from cluster.ingest.walker import WalkSettings, walk_repository

CANARY = "canary" + "-" + "aws-4c1d9e"  # stands for ~/.aws/credentials: never read


def write(root: Path, rel: str, text: str = "x = 1\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the root that looks like the root's own, with the canary in every file."""
    folder = tmp_path / "outside"
    for rel in ("sub/credentials.py", "sub/z.py", "a/z.py", "pkg/mod.py"):
        write(folder, rel, f"key = '{CANARY}'\n")
    return folder


def swap_for_link(folder: Path, target: Path, keep: Path) -> None:
    """Replace `folder` by a symlink to `target`; the real folder is moved to `keep`."""
    folder.rename(keep)
    folder.symlink_to(target, target_is_directory=True)


class Listing:
    """What os.scandir returns: the entries as they were listed, before the swap."""

    def __init__(self, entries: list[os.DirEntry[str]]) -> None:
        self._entries = entries

    def __enter__(self) -> Listing:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __iter__(self) -> Iterator[os.DirEntry[str]]:
        return iter(self._entries)

    def close(self) -> None:
        return None


def test_a_folder_replaced_by_a_link_between_listing_and_opening_is_not_entered(
    tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    write(root, "app.py")
    write(root, "sub/credentials.py")
    real_scandir = os.scandir
    swapped: list[bool] = []

    def scandir(path: Any = ".") -> Any:
        with real_scandir(path) as it:
            entries = list(it)
        for entry in entries:
            entry.is_dir(follow_symlinks=False)  # the type as listed, before the swap
        if not swapped and any(entry.name == "sub" for entry in entries):
            swap_for_link(root / "sub", outside / "sub", tmp_path / "moved-sub")
            swapped.append(True)
        return Listing(entries)

    monkeypatch.setattr(os, "scandir", scandir)
    skips = SkipLog()
    files = list(walk_repository(root, WalkSettings(), skips))
    assert swapped
    assert [f.path for f in files] == ["app.py"]
    assert not any(CANARY in f.text for f in files)
    assert skips.summary().paths == {SkipReason.SYMLINK.value: ["sub/"]}


@pytest.mark.parametrize("held", [None, 1], ids=["handle-held", "handle-reopened"])
def test_a_folder_swapped_for_a_link_while_the_walk_is_inside_it_is_never_read_through(
    tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch, held: int | None
) -> None:
    if held is not None:  # 1: the walk lets go of `a` on its way down, and opens it again on its way back
        monkeypatch.setattr(walker, "MAX_HELD_FOLDERS", held, raising=False)
    root = tmp_path / "repo"
    write(root, "a/b/c/deep.py")
    write(root, "a/z.py")  # read after the walk comes back up from a/b/c
    texts = []
    for source in walk_repository(root, WalkSettings()):
        texts.append((source.path, source.text))
        if source.path == "a/b/c/deep.py":  # the consumer's turn: the folder is swapped now
            swap_for_link(root / "a", outside / "a", tmp_path / "moved-a")
    assert not any(CANARY in text for _, text in texts)
    assert [path for path, _ in texts] == ["a/b/c/deep.py", "a/z.py"]  # the folder as listed, moved or not


def test_a_file_replaced_by_a_link_after_listing_is_not_read(
    tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    write(root, "a.py")
    write(root, "b.py")
    texts = []
    skips = SkipLog()
    for source in walk_repository(root, WalkSettings(), skips):
        texts.append(source.text)
        (root / "b.py").unlink()
        (root / "b.py").symlink_to(outside / "sub" / "credentials.py")
    assert not any(CANARY in text for text in texts)
    assert skips.summary().paths == {SkipReason.SYMLINK.value: ["b.py"]}


class SwapAfterCheck(DenyList):
    """The deny-list a read consults after it checked the path: the swap happens then."""

    def __init__(self, swap: Any) -> None:
        super().__init__(SECRET_DENY)
        self._swap = swap
        self.checks = 0

    def refuses(self, rel_path: str) -> bool:
        self.checks += 1
        if self.checks == 2:
            self._swap()
        return super().refuses(rel_path)


@pytest.mark.parametrize("swapped", ["folder", "file"])
def test_an_indexed_path_replaced_by_a_link_after_it_was_checked_is_not_read(
    tmp_path: Path, outside: Path, swapped: str
) -> None:
    root = tmp_path / "repo"
    write(root, "pkg/mod.py", "def mod():\n    return 1\n")

    def swap() -> None:
        if swapped == "folder":
            swap_for_link(root / "pkg", outside / "pkg", tmp_path / "moved-pkg")
        else:
            (root / "pkg" / "mod.py").unlink()
            (root / "pkg" / "mod.py").symlink_to(outside / "pkg" / "mod.py")

    deny = SwapAfterCheck(swap)
    with pytest.raises(ReadRefused, match="a symlink now stands on its path"):
        read_source_lines("repo", root, "pkg/mod.py", 1, 5, max_lines=10, deny=deny)
    assert deny.checks == 2  # the swap did happen between the check and the read
