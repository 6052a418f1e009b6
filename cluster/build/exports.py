"""The files of a ref build: exported from the repository's objects into the build's own folder
(`<data_dir>/exports/<build>`, 0700; the checkout is never touched), dropped with the build."""

from __future__ import annotations

import shutil
from pathlib import Path

from cluster.build.ports import Emit
from cluster.index import export_folder, exports_root, index_of
from cluster.ingest import SourceState, export_tree, walk_settings
from cluster.settings import SamespaceSettings


def export_ref(settings: SamespaceSettings, repo: Path, source: SourceState, build: str, emit: Emit) -> Path:
    """Export the ref's files (at `source.commit`) into the build's folder; returns the folder."""
    assert source.commit is not None  # a ref's source state always names its commit
    target = export_folder(settings.store.data_dir, build)
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    target.mkdir(mode=0o700)
    summary = export_tree(repo, source.commit, target, walk_settings(settings).max_file_bytes)
    emit(f"exported {summary.files} files of {source.ref} ({source.commit}) from the repository's objects")
    return target


def drop_other_exports(settings: SamespaceSettings, name: str, keep: Path) -> None:
    """Remove the exported files of this index's earlier ref builds (the serving one stays)."""
    for folder in exports_root(settings.store.data_dir).iterdir():
        if index_of(folder.name) == name and folder.resolve() != keep.resolve():
            shutil.rmtree(folder, ignore_errors=True)


def drop_export(folder: Path) -> None:
    """Remove a build's exported files (the build failed)."""
    shutil.rmtree(folder, ignore_errors=True)
