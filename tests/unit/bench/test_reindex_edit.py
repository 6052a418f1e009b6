"""bench.reindex_edit: the incremental step's one edited file, from the measured repository (not this one)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bench.reindex_edit import MARKER, edit_one_file, pick_edit
from cluster.build import collect_chunks
from cluster.settings import SamespaceSettings
from cluster.types import content_hash

GO = (
    "package shop\n\nfunc Total(prices []int) int {\n\tsum := 0\n"
    "\tfor _, p := range prices {\n\t\tsum += p\n\t}\n\treturn sum\n}\n"
)
PY_A = "def area(width, height):\n    return width * height\n"
PY_B = "class Cart:\n    def total(self):\n        return 0"  # no trailing newline
README = "# Shop\n\nA small shop.\n"


def _repo(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def _chunks(repo: Path) -> list:
    return collect_chunks(repo, SamespaceSettings())[0]


def test_a_python_file_is_chosen_first_and_gains_a_new_function(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"src/z_cart.py": PY_B, "src/b_area.py": PY_A, "cmd/shop.go": GO, "README.md": README})
    chunks = _chunks(repo)
    before = {p: (repo / p).read_text() for p in ("src/z_cart.py", "cmd/shop.go", "README.md")}

    edit = edit_one_file(repo, chunks)

    assert (edit.path, edit.language) == ("src/b_area.py", "python")
    text = (repo / edit.path).read_text()
    compile(text, edit.path, "exec")  # still Python
    assert text.startswith(PY_A)
    symbols = {c.symbol for c in _chunks(repo) if c.path == edit.path}
    assert "samespace_bench_marker" in symbols  # the edited build has a new chunk to embed
    assert {p: (repo / p).read_text() for p in before} == before  # nothing else touched


def test_without_python_the_first_code_file_gets_a_line_comment(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"cmd/shop.go": GO, "README.md": README, "b/other.go": GO})
    edit = edit_one_file(repo, _chunks(repo))

    assert (edit.path, edit.language) == ("b/other.go", "go")
    text = (repo / edit.path).read_text()
    assert text == GO + f"\n// {MARKER}\n"
    assert content_hash(text) != content_hash(GO)
    assert any(c.path == edit.path for c in _chunks(repo))  # still indexed after the edit


def test_a_file_without_a_final_newline_is_appended_on_a_line_of_its_own(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"cart.py": PY_B})
    edit = edit_one_file(repo, _chunks(repo))
    text = (repo / edit.path).read_text()
    assert text.startswith(PY_B + "\n")
    compile(text, edit.path, "exec")


def test_the_choice_does_not_depend_on_the_order_of_the_chunks(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {f"pkg/m{i}.py": PY_A.replace("area", f"area{i}") for i in range(6)} | {"x.go": GO})
    chunks = _chunks(repo)
    shuffled = list(chunks)
    random.Random(7).shuffle(shuffled)
    assert pick_edit(shuffled) == pick_edit(chunks) == pick_edit(list(reversed(chunks)))
    assert pick_edit(chunks).path == "pkg/m0.py"


def test_a_repository_with_nothing_to_edit_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {"data.json": '{"a": 1}\n'})
    chunks = _chunks(repo)
    assert chunks  # indexed, but JSON has no safe append
    with pytest.raises(ValueError, match="nothing to edit"):
        pick_edit(chunks)
