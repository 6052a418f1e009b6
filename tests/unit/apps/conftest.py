"""Every app test keeps what the apps write under `store.data_dir` (the audit log of the admin actions
and tool calls it makes) in its own temporary folder, never in the user's ~/.samespace."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _data_dir_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAMESPACE_STORE__DATA_DIR", str(tmp_path / "samespace-data"))
