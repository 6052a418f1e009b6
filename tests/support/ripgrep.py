"""ripgrep, the independent truth of grep_code's tests: the `rg` of the `ripgrep` wheel, run over an
explicit list of files, its lines parsed."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

RG = shutil.which("rg")


@dataclass(frozen=True, order=True)
class RgLine:
    path: str
    line: int
    column: int  # 1-based, in characters (rg counts bytes)
    text: str  # without its line break ("\r" dropped)


def ripgrep(
    root: Path, pattern: str, paths: list[str], *, regex: bool = True, case_sensitive: bool = True
) -> list[RgLine]:
    """Every line rg matches in `paths` below `root`, in (path, line) order (rg prints files as its
    threads finish them)."""
    assert RG is not None, "ripgrep (the PyPI wheel `ripgrep`) is not installed"
    flags = [*([] if regex else ["-F"]), *([] if case_sensitive else ["-i"])]
    done = subprocess.run(
        [RG, "-n", "--column", "--no-heading", "--with-filename", *flags, "-e", pattern, "--", *paths],
        cwd=root,
        capture_output=True,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    found = []
    for raw in done.stdout.splitlines():
        path, line, column, text = raw.split(b":", 3)
        chars = len(text[: int(column) - 1].decode("utf-8", "replace")) + 1
        found.append(RgLine(path.decode(), int(line), chars, text.decode("utf-8", "replace").removesuffix("\r")))
    return sorted(found)
