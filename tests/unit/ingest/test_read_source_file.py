"""A whole file as the file resource serves it: its exact text (line ends and the last newline kept,
credentials redacted), confined as read_code is (no symlink followed out, never a secret file), and
refused past the size a file is indexed at."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cluster.errors import ReadRefused
from cluster.ingest import read_source_file


def test_the_whole_text_is_served_exactly_and_its_lines_counted_as_the_chunker_counts(tmp_path: Path) -> None:
    text = "one\r\ntwo\n\nfour\n"
    (tmp_path / "a.py").write_bytes(text.encode())
    got = read_source_file("r", tmp_path, "a.py", 1 << 20)
    assert (got.text, got.start_line, got.end_line, got.total_lines, got.truncated) == (text, 1, 4, 4, False)


def test_a_credential_is_redacted_and_a_file_over_the_size_is_refused(tmp_path: Path) -> None:
    token = "gh" + "p_" + "Zq7Xk2Rv9Lm4Tp8Wn3Hs6Jd1Gf5Bc0AyQ3ZK"
    (tmp_path / "conf.py").write_text(f'TOKEN = "{token}"\nNAME = "shop"\n')
    got = read_source_file("r", tmp_path, "conf.py", 1 << 20)
    assert token not in got.text and 'NAME = "shop"\n' in got.text
    (tmp_path / "big.py").write_text("x = 1\n" * 100)
    with pytest.raises(ReadRefused, match="over 599 bytes now"):
        read_source_file("r", tmp_path, "big.py", 599)
    assert read_source_file("r", tmp_path, "big.py", 600).total_lines == 100


def test_a_link_out_of_the_root_a_secret_file_and_a_path_outside_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (tmp_path / "outside.py").write_text("CANARY = 1\n")
    os.symlink(tmp_path / "outside.py", root / "link.py")
    (root / ".env").write_text("KEY=1\n")
    for path, reason in [
        ("link.py", "outside the repository"),
        ("../outside.py", "outside the repository"),
        (".env", "deny-list"),
        ("missing.py", "no such file"),
    ]:
        with pytest.raises(ReadRefused, match=reason):
            read_source_file("r", root, path, 1 << 20)
