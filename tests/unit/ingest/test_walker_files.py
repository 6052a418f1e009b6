"""Repository walking, the files themselves: binary, undecodable, oversize and empty files, symlinks
(out of the root, to denied or ignored files), a deterministic order, unreadable folders and files, a
root that is missing or unlistable, a tree deeper than the recursion limit, and a FIFO.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from cluster.errors import ScanError
from cluster.ingest.skips import SkipLog, SkipReason
from cluster.ingest.walker import WalkSettings, walk_repository
from tests.support.repo_walks import opened_path, walked, walked_with, write


def test_binary_undecodable_oversize_and_empty_files_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, "image.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    write(tmp_path, "latin1.txt", "caf\xe9\n".encode("latin-1"))
    write(tmp_path, "big.py", "y = 2\n" * 100)
    write(tmp_path, "empty.py", "")
    write(tmp_path, "ok.py", "z = 'é'\n")
    files = list(walk_repository(tmp_path, WalkSettings(max_file_bytes=100)))
    assert [f.path for f in files] == ["ok.py"]
    only = files[0]
    assert only.text == "z = 'é'\n"
    assert only.size == len("z = 'é'\n".encode())
    assert only.abs_path == (tmp_path / "ok.py").resolve()


def test_symlinks_leading_out_of_the_root_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside, "secret.py")
    repo = tmp_path / "repo"
    write(repo, "main.py")
    (repo / "linked_dir").symlink_to(outside, target_is_directory=True)
    (repo / "linked_file.py").symlink_to(outside / "secret.py")
    (repo / "alias.py").symlink_to(repo / "main.py")
    assert walked(repo) == ["alias.py", "main.py"]


def test_files_come_in_a_deterministic_sorted_path_order(tmp_path: Path) -> None:
    for rel in ["b.py", "a/z.py", "a.py", "a/b/c.py", "A.py", "a-b/x.py", "_u.py"]:
        write(tmp_path, rel)
    first = walked(tmp_path)
    assert first == sorted(first)
    assert first == walked(tmp_path)
    assert len(first) == 7


def test_symlinks_to_denied_ignored_or_outside_files_are_refused_and_recorded(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside, "elsewhere.py")
    repo = tmp_path / "repo"
    write(repo, ".gitignore", "private/\n")
    write(repo, ".env", "KEY=x\n")
    write(repo, "private/notes.py")
    write(repo, "main.py")
    links = {
        "to_env.txt": repo / ".env",
        "to_private.py": repo / "private" / "notes.py",
        "to_outside.py": outside / "elsewhere.py",
        "to_outside_dir": outside,
        "dangling.py": repo / "missing.py",
        "to_main.py": repo / "main.py",
        "src_link": repo / "private",
    }
    for name, target in links.items():
        (repo / name).symlink_to(target, target_is_directory=target.is_dir())
    (repo / ".env.link").symlink_to(repo / "main.py")  # the link's own name is denied
    skips = SkipLog()
    files = list(walk_repository(repo, WalkSettings(), skips))
    assert [f.path for f in files] == [".gitignore", "main.py", "to_main.py"]
    assert files[-1].text == "x = 1\n" and files[-1].abs_path == repo.resolve() / "to_main.py"
    summary = skips.summary()
    assert summary.paths == {
        SkipReason.SECRET_FILE.value: [".env", ".env.link"],
        SkipReason.SYMLINK.value: [
            "dangling.py",
            "src_link",
            "to_env.txt",
            "to_outside.py",
            "to_outside_dir",
            "to_private.py",
        ],
    }


def test_a_symlinked_gitignore_is_not_read(tmp_path: Path) -> None:
    write(tmp_path, "rules.txt", "*.py\n")
    (tmp_path / ".gitignore").symlink_to(tmp_path / "rules.txt")
    write(tmp_path, "app.py")
    assert [p for p in walked(tmp_path) if p.endswith(".py")] == ["app.py"]


def test_an_unreadable_subfolder_is_recorded_and_the_walk_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "locked/inside.py")
    write(tmp_path, "open/ok.py")
    locked = str(tmp_path.resolve() / "locked")
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        if opened_path(path, {}) == locked:
            raise PermissionError(13, "Permission denied", locked)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    skips = SkipLog()
    assert walked_with(tmp_path, WalkSettings(), skips) == ["open/ok.py"]
    assert skips.summary().paths == {SkipReason.UNREADABLE.value: ["locked/"]}


def test_an_unreadable_file_is_recorded_and_the_walk_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "a.py")
    write(tmp_path, "b.py")
    real_open = os.open

    def guarded(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if opened_path(path, kwargs).endswith("/a.py"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded)
    skips = SkipLog()
    assert walked_with(tmp_path, WalkSettings(), skips) == ["b.py"]
    assert skips.summary().paths == {SkipReason.UNREADABLE.value: ["a.py"]}


def test_a_missing_root_a_file_root_and_an_unlistable_root_raise_scan_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "file.py")
    for root in (tmp_path / "missing", tmp_path / "file.py"):
        with pytest.raises(ScanError) as caught:
            walk_repository(root, WalkSettings())
        assert caught.value.root == str(root)
    real_scandir = os.scandir
    root = tmp_path.resolve()

    def scandir(path: Any) -> Any:
        if opened_path(path, {}) == str(root):
            raise PermissionError(13, "Permission denied", str(root))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(ScanError, match="cannot list it"):
        walk_repository(tmp_path, WalkSettings())


def test_binary_too_large_and_mostly_undecodable_files_are_recorded_and_a_few_bad_bytes_are_replaced(
    tmp_path: Path,
) -> None:
    write(tmp_path, "nul_late.txt", b"text\n" * 3000 + b"\x00")  # a NUL past the first 8 KiB
    write(tmp_path, "latin1_lots.txt", "\xe9\xe8\xe0".encode("latin-1") * 20)
    write(tmp_path, "stray.py", b"# caf\xe9\n" + b"x = 1\n" * 100)
    write(tmp_path, "big.py", "y = 2\n" * 400)
    write(tmp_path, "empty.py", "")
    skips = SkipLog()
    files = list(walk_repository(tmp_path, WalkSettings(max_file_bytes=2000), skips))
    assert [f.path for f in files] == ["stray.py"]
    assert files[0].text.startswith("# caf\ufffd\nx = 1\n")
    assert skips.summary().paths == {
        SkipReason.BINARY.value: ["latin1_lots.txt"],
        SkipReason.TOO_LARGE.value: ["big.py", "nul_late.txt"],
    }
    roomy = SkipLog()
    assert "nul_late.txt" not in [f.path for f in walk_repository(tmp_path, WalkSettings(), roomy)]
    assert roomy.summary().paths[SkipReason.BINARY.value] == ["latin1_lots.txt", "nul_late.txt"]


def test_a_deeply_nested_tree_is_walked_without_recursion(tmp_path: Path) -> None:
    depth = 1200  # deeper than Python's recursion limit
    folder = str(tmp_path)
    for _ in range(depth):
        folder = os.path.join(folder, "d")
        os.mkdir(folder)
    deep_file = os.path.join(folder, "deep.py")
    with open(deep_file, "w") as handle:
        handle.write("x = 1\n")
    try:
        assert walked(tmp_path) == ["d/" * depth + "deep.py"]
    finally:  # remove it bottom-up here: pytest's own cleanup recurses and would fail on it
        os.unlink(deep_file)
        for _ in range(depth):
            os.rmdir(folder)
            folder = os.path.dirname(folder)


@pytest.mark.timeout(60)  # reading a FIFO would block forever
def test_a_fifo_in_the_tree_is_skipped_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "pipe_link.py").symlink_to(tmp_path / "pipe.py")
    write(tmp_path, "app.py")
    skips = SkipLog()
    assert walked_with(tmp_path, WalkSettings(), skips) == ["app.py"]
    assert skips.summary().paths == {SkipReason.SYMLINK.value: ["pipe_link.py"]}
