"""Repository walking: .gitignore rules, junk folders, binary and oversize files, order."""

from __future__ import annotations

from pathlib import Path

from cluster.walker import WalkSettings, walk_repository


def write(root: Path, rel: str, content: str | bytes = "x = 1\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def walked(root: Path, settings: WalkSettings | None = None) -> list[str]:
    return [f.path for f in walk_repository(root, settings or WalkSettings())]


def test_the_root_gitignore_is_honoured(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "*.log\nbuild/\n!keep.log\n")
    write(tmp_path, "app.py")
    write(tmp_path, "debug.log", "noise\n")
    write(tmp_path, "keep.log", "kept\n")
    write(tmp_path, "build/out.py")
    write(tmp_path, "src/build/gen.py")
    assert walked(tmp_path) == [".gitignore", "app.py", "keep.log"]


def test_a_nested_gitignore_applies_relative_to_its_own_folder(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "*.tmp\n")
    write(tmp_path, "sub/.gitignore", "/local.py\n*.gen\n!wanted.tmp\n")
    write(tmp_path, "local.py")
    write(tmp_path, "x.gen", "root gen\n")
    write(tmp_path, "a.tmp", "tmp\n")
    write(tmp_path, "sub/local.py")
    write(tmp_path, "sub/deeper/local.py")
    write(tmp_path, "sub/y.gen", "gen\n")
    write(tmp_path, "sub/wanted.tmp", "wanted\n")
    write(tmp_path, "sub/other.tmp", "other\n")
    assert walked(tmp_path) == [
        ".gitignore",
        "local.py",
        "sub/.gitignore",
        "sub/deeper/local.py",
        "sub/wanted.tmp",
        "x.gen",
    ]


def test_git_and_junk_folders_are_always_skipped(tmp_path: Path) -> None:
    for junk in [".git/config", ".venv/lib.py", "node_modules/m/i.js", "a/__pycache__/c.py"]:
        write(tmp_path, junk)
    write(tmp_path, ".samespace/state.json", "{}\n")
    write(tmp_path, "a/real.py")
    assert walked(tmp_path) == ["a/real.py"]


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


def test_extra_ignores_apply_like_root_gitignore_patterns(tmp_path: Path) -> None:
    write(tmp_path, "keep.py")
    write(tmp_path, "vendor/lib.py")
    write(tmp_path, "gen_models.py")
    settings = WalkSettings(extra_ignores=("vendor/", "gen_*.py"))
    assert walked(tmp_path, settings) == ["keep.py"]


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
