"""The embedded store's data dir is private: 0700 folders, 0600 files.

The real Qdrant Edge engine writes here, under the umask the index actor sets before it opens
the store.
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.index_actor import STORE_UMASK
from cluster.index.store.edge import EdgeStore
from cluster.types import SparseTerms, StoredPoint

WIDTH = 8


@pytest.fixture
def store_umask() -> Iterator[None]:
    previous = os.umask(STORE_UMASK)  # what IndexActor.__init__ does in its own process
    try:
        yield
    finally:
        os.umask(previous)


def _modes(root: Path) -> dict[str, int]:
    """Every folder and file under `root` (root included), by relative path, to its permission bits."""
    modes = {".": stat.S_IMODE(root.stat().st_mode)}
    for directory, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            path = Path(directory) / name
            modes[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return modes


def _build(store: EdgeStore) -> None:
    """What a reindex does to the store: a collection, rows with their keyword leg, an alias switch."""
    store.create_collection("repo__b1", WIDTH, ["path"])
    points = [
        StoredPoint(
            id=str(uuid.uuid4()),
            vector=[float(i == j) for j in range(WIDTH)],
            payload={"path": f"src/m{i}.py", "text": f"def secret_source_{i}(): pass"},
            sparse=SparseTerms(indices=[i + 1], values=[1.0]),
        )
        for i in range(WIDTH)
    ]
    store.upsert("repo__b1", points)
    store.put_metadata("repo__b1", {"files": WIDTH})
    store.set_alias("repo", "repo__b1")
    store.flush()


def test_a_new_data_dir_and_everything_the_engine_writes_in_it_are_private(tmp_path: Path, store_umask: None) -> None:
    data_dir = tmp_path / "state" / "data"
    store = EdgeStore(data_dir)
    _build(store)
    store.close()

    modes = _modes(data_dir)
    assert len(modes) > 10  # the engine's segment files are there, not just our JSON
    folders = {path: mode for path, mode in modes.items() if (data_dir / path).is_dir()}
    files = {path: mode for path, mode in modes.items() if path not in folders}
    assert folders and files
    assert {path: mode for path, mode in folders.items() if mode != 0o700} == {}
    assert {path: mode for path, mode in files.items() if mode & 0o077} == {}  # 0600 (or tighter)


def test_opening_an_existing_world_readable_data_dir_tightens_it_without_following_links(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    previous = os.umask(0o022)  # as an earlier version left it: 0755 folders, 0644 files
    try:
        store = EdgeStore(data_dir)
        _build(store)
        store.close()
    finally:
        os.umask(previous)
    assert any(mode & 0o044 for mode in _modes(data_dir).values())  # the starting point is loose
    outside = tmp_path / "outside.txt"
    outside.write_text("not the store's")
    outside.chmod(0o644)
    (data_dir / "link-out").symlink_to(outside)

    EdgeStore(data_dir).close()

    modes = _modes(data_dir)
    del modes["link-out"]
    assert {path: mode for path, mode in modes.items() if mode & 0o077} == {}
    assert modes["."] == 0o700
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644
    reopened = EdgeStore(data_dir)
    assert reopened.resolve_alias("repo") == "repo__b1" and reopened.count("repo") == WIDTH
    reopened.close()
