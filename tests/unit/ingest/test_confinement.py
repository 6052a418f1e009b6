"""Confinement that cannot be walked around: a folder inside the allowed roots never leads git (or
the walk) to a repository elsewhere, a git folder is never a root, a refusal does not tell what
exists outside the roots, and the reindex job confines its folder again before it reads anything.

Each case plants what a hostile folder could hold and checks that a canary in a repository outside
the roots is never exported or read, and that the refusal says why.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import ray

import cluster.ingest.git_state as git_state
import cluster.settings
from cluster.errors import PathRefused, ScanError
from cluster.ingest import (
    change_signature,
    export_tree,
    find_repository,
    remote_urls,
    source_state,
    walk_repository,
)
from cluster.ingest.walker import WalkSettings
from cluster.settings import IndexSettings, SamespaceSettings
from cluster.sync import admit_folder, confine, indexable_folder

CANARY = "canary" + "-" + "7f3c9a0e5b"  # only ever in the repository outside the roots
GIT_ID = ["-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "commit.gpgsign=false"]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *GIT_ID, "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def new_repo(folder: Path, files: dict[str, str]) -> str:
    """A repository at `folder` with `files` committed on main; returns the commit."""
    folder.mkdir(parents=True, exist_ok=True)
    git(folder, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    git(folder, "add", "-A")
    git(folder, "commit", "-qm", "first")
    return git(folder, "rev-parse", "HEAD")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def other(tmp_path: Path) -> Path:
    """A repository outside the allowed roots, with a canary committed in it."""
    folder = tmp_path / "outside" / "private"
    new_repo(folder, {"secret.py": f"TOKEN = '{CANARY}'\n"})
    return folder


def dot_git_file(proj: Path, other: Path) -> None:
    proj.mkdir(parents=True)
    (proj / ".git").write_text(f"gitdir: {other / '.git'}\n")


def dot_git_symlink(proj: Path, other: Path) -> None:
    proj.mkdir(parents=True)
    (proj / ".git").symlink_to(other / ".git", target_is_directory=True)


def alternates(proj: Path, other: Path) -> None:
    new_repo(proj, {"app.py": "x = 1\n"})
    (proj / ".git" / "objects" / "info" / "alternates").write_text(f"{other / '.git' / 'objects'}\n")
    (proj / ".git" / "refs" / "heads" / "main").write_text(git(other, "rev-parse", "HEAD") + "\n")


def commondir(proj: Path, other: Path) -> None:
    new_repo(proj, {"app.py": "x = 1\n"})
    (proj / ".git" / "commondir").write_text(f"{other / '.git'}\n")


def symlinked_objects(proj: Path, other: Path) -> None:
    new_repo(proj, {"app.py": "x = 1\n"})
    objects = proj / ".git" / "objects"
    subprocess.run(["rm", "-rf", str(objects)], check=True)
    objects.symlink_to(other / ".git" / "objects", target_is_directory=True)
    (proj / ".git" / "refs" / "heads" / "main").write_text(git(other, "rev-parse", "HEAD") + "\n")


POINTERS = [
    pytest.param(dot_git_file, "is a file pointing to a git folder elsewhere", id="dot-git-file"),
    pytest.param(dot_git_symlink, r"\.git is a symlink", id="dot-git-symlink"),
    pytest.param(alternates, r"borrows objects from another repository \(objects/info/alternates\)", id="alternates"),
    pytest.param(commondir, "commondir points to another repository's git folder", id="commondir"),
    pytest.param(symlinked_objects, "is a symlink inside the git folder", id="symlinked-objects"),
]


def failure(action: Callable[[], object]) -> Exception | None:
    try:
        action()
    except Exception as exc:  # noqa: BLE001 - the test looks at what was raised
        return exc
    return None


def exported_text(dest: Path) -> str:
    return "".join(path.read_text(errors="replace") for path in dest.rglob("*") if path.is_file())


@pytest.mark.parametrize(("plant", "refusal"), POINTERS)
def test_a_git_pointer_in_a_folder_inside_the_roots_never_exports_another_repository(
    tmp_path: Path, home: Path, other: Path, plant: Callable[[Path, Path], None], refusal: str
) -> None:
    root = tmp_path / "allowed"
    proj = root / "proj"
    plant(proj, other)
    dest = tmp_path / "export"
    dest.mkdir()
    commit = git(other, "rev-parse", "HEAD")  # what a client could have learnt, or a ref resolves to
    exported = failure(lambda: export_tree(proj, commit, dest, 1 << 20))
    assert CANARY not in exported_text(dest)
    assert isinstance(exported, PathRefused) and exported.reason
    assert exported.setting.startswith("the git folder rule")
    for read in (lambda: source_state(proj, "main"), lambda: source_state(proj), lambda: change_signature(proj)):
        with pytest.raises(PathRefused, match=refusal):
            read()
    with pytest.raises(PathRefused, match=refusal):  # refused when the client asks, with the reason
        confine(str(proj), [root], home)
    with pytest.raises(PathRefused, match=refusal):  # and whoever asks
        indexable_folder(str(proj), home)
    with pytest.raises(ScanError, match=refusal):  # the walk refuses it too
        list(walk_repository(proj, WalkSettings()))


def test_a_git_folder_swapped_for_a_link_while_git_runs_exports_nothing(
    tmp_path: Path, other: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = tmp_path / "allowed" / "proj"
    new_repo(proj, {"app.py": "x = 1\n"})
    commit = git(other, "rev-parse", "HEAD")
    real_run = subprocess.run

    def run(argv: list[str], **kwargs: Any) -> Any:
        if "ls-tree" in argv and (proj / ".git").is_dir():  # checked already: swapped now
            (proj / ".git").rename(tmp_path / "moved.git")
            (proj / ".git").symlink_to(other / ".git", target_is_directory=True)
        return real_run(argv, **kwargs)

    monkeypatch.setattr(git_state.subprocess, "run", run)
    dest = tmp_path / "export"
    dest.mkdir()
    exported = failure(lambda: export_tree(proj, commit, dest, 1 << 20))
    assert CANARY not in exported_text(dest)
    assert isinstance(exported, PathRefused) and "was replaced while git read it" in exported.reason


def test_a_subfolder_of_a_repository_whose_git_is_a_pointer_is_refused_too(
    tmp_path: Path, home: Path, other: Path
) -> None:
    root = tmp_path / "allowed"
    dot_git_file(root / "proj", other)
    (root / "proj" / "sub").mkdir()
    with pytest.raises(PathRefused, match="is a file pointing to a git folder elsewhere"):
        confine(str(root / "proj" / "sub"), [root], home)
    with pytest.raises(PathRefused, match="is a file pointing"):
        source_state(root / "proj" / "sub", "main")


def test_the_remotes_of_a_repository_a_pointer_leads_to_are_not_reported(tmp_path: Path, other: Path) -> None:
    git(other, "remote", "add", "origin", f"https://ci:{CANARY}@git.example.com/private.git")
    proj = tmp_path / "allowed" / "proj"
    dot_git_file(proj, other)
    assert remote_urls(proj) == []


def test_http_alternates_are_refused(tmp_path: Path, home: Path) -> None:
    proj = tmp_path / "proj"
    new_repo(proj, {"app.py": "x = 1\n"})
    (proj / ".git" / "objects" / "info" / "http-alternates").write_text("https://example.invalid/objects\n")
    with pytest.raises(PathRefused, match=r"objects/info/http-alternates"):
        indexable_folder(str(proj), home)


def test_a_worktree_made_by_git_worktree_add_is_refused_with_a_clear_message(tmp_path: Path, home: Path) -> None:
    main = tmp_path / "main"
    new_repo(main, {"app.py": "x = 1\n"})
    git(main, "worktree", "add", "-q", str(tmp_path / "feature"), "-b", "feature")
    with pytest.raises(PathRefused, match=r"a worktree made by `git worktree add`.*index the main checkout"):
        indexable_folder(str(tmp_path / "feature"), home)
    assert indexable_folder(str(main), home) == main.resolve()  # the main checkout still may be


def test_an_ordinary_repository_and_its_subfolders_still_index_and_export(tmp_path: Path, home: Path) -> None:
    repo = tmp_path / "repo"
    commit = new_repo(repo, {"pkg/a.py": "def a():\n    return 1\n", "top.py": "x = 1\n"})
    assert indexable_folder(str(repo / "pkg"), home) == (repo / "pkg").resolve()
    found = find_repository((repo / "pkg").resolve())
    assert found is not None and found.work_tree == repo.resolve() and found.prefix((repo / "pkg").resolve()) == "pkg/"
    state = source_state(repo / "pkg", "main")
    assert state.vcs == "git" and state.commit == commit
    dest = tmp_path / "export"
    dest.mkdir()
    assert export_tree(repo / "pkg", commit, dest, 1 << 20).files == 1
    assert [p.name for p in dest.rglob("*.py")] == ["a.py"]  # the subfolder's files only


def test_the_callers_git_variables_do_not_point_git_elsewhere(
    tmp_path: Path, other: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_ALTERNATE_OBJECT_DIRECTORIES", str(other / ".git" / "objects"))
    assert source_state(plain).vcs == "folder"


# ---- a git folder is never a root -----------------------------------------------------------------


def test_a_git_folder_or_a_folder_inside_one_is_never_indexed(tmp_path: Path, home: Path) -> None:
    repo = tmp_path / "repo"
    new_repo(repo, {"app.py": "x = 1\n"})
    header = "AUTHORIZATION: basic " + CANARY
    git(repo, "config", "http.https://github.com/.extraheader", header)
    bare = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    for folder in (repo / ".git", repo / ".git" / "refs", bare, bare / "refs"):
        with pytest.raises(PathRefused, match="lies inside a git folder"):
            indexable_folder(str(folder), home)
        with pytest.raises(PathRefused, match="lies inside a git folder"):
            confine(str(folder), [tmp_path], home)
        walked = failure(lambda folder=folder: [source.text for source in walk_repository(folder, WalkSettings())])
        assert isinstance(walked, ScanError) and "inside a git folder" in str(walked)


# ---- a refusal never tells what exists outside the roots ------------------------------------------------


def test_outside_the_roots_missing_and_existing_paths_get_the_same_refusal_without_a_look(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "allowed"
    root.mkdir()
    outside = tmp_path / "outside"
    (outside / "exists").mkdir(parents=True)
    (root / "to-existing").symlink_to(outside / "exists", target_is_directory=True)
    (root / "to-missing").symlink_to(outside / "missing", target_is_directory=True)
    looked: list[str] = []
    real_lstat, real_stat = os.lstat, os.stat

    def spy(real: Callable[..., os.stat_result]) -> Callable[..., os.stat_result]:
        def call(path: object, *args: object, **kwargs: object) -> os.stat_result:
            looked.append(os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else "")
            return real(path, *args, **kwargs)

        return call

    monkeypatch.setattr(os, "lstat", spy(real_lstat))
    monkeypatch.setattr(os, "stat", spy(real_stat))
    refusals = []
    for path in (outside / "exists", outside / "missing", root / ".." / "outside" / "exists"):
        with pytest.raises(PathRefused) as refused:
            confine(str(path), [root], home)
        refusals.append(refused.value)
    assert looked and not [path for path in looked if path.startswith(str(outside))]  # lexically outside: unread
    for path in (root / "to-existing", root / "to-missing"):  # inside, leading out: the same answer
        with pytest.raises(PathRefused) as refused:
            confine(str(path), [root], home)
        refusals.append(refused.value)
    assert len({(refusal.reason, refusal.setting) for refusal in refusals}) == 1
    assert "outside the allowed roots" in refusals[0].reason and str(outside) not in refusals[0].reason


# ---- the job confines its folder again ----------------------------------------------------------


class RayStarted(Exception):
    pass


@pytest.fixture
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The reindex job's entrypoint with `tmp_path/allowed` as the only root; Ray is never reached."""
    root = tmp_path / "allowed"
    root.mkdir()
    settings = SamespaceSettings(index=IndexSettings(allowed_roots=[root]))
    monkeypatch.setattr(cluster.settings, "load_settings", lambda: settings)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))

    def no_ray(*args: object, **kwargs: object) -> None:
        raise RayStarted()

    monkeypatch.setattr(ray, "init", no_ray)
    return root


def run_job(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    """`python -m jobs.reindex ARGS` in this process (the job is an entrypoint, not a library); its exit code."""
    monkeypatch.setattr(sys, "argv", ["python -m jobs.reindex", *args])
    with pytest.raises(SystemExit) as exited:
        runpy.run_module("jobs.reindex", run_name="__main__")
    return int(exited.value.code or 0)


def test_a_confined_job_refuses_a_folder_outside_the_roots_before_reading_anything(
    job: Path, tmp_path: Path, other: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_job(monkeypatch, "--repo", str(other), "--name", "x", "--confined") == 2
    assert "outside the allowed roots" in capsys.readouterr().err
    proj = job / "proj"
    dot_git_file(proj, other)  # planted after the request was admitted
    assert run_job(monkeypatch, "--repo", str(proj), "--name", "x", "--confined", "--ref", "main") == 2
    assert "is a file pointing to a git folder elsewhere" in capsys.readouterr().err
    ok = job / "ok"
    ok.mkdir()
    with pytest.raises(RayStarted):  # inside the roots: the job goes on
        run_job(monkeypatch, "--repo", str(ok), "--name", "x", "--confined")
    with pytest.raises(RayStarted):  # not confined: any indexable folder
        run_job(monkeypatch, "--repo", str(other), "--name", "x")


def test_an_unconfined_job_still_refuses_what_is_never_indexed(
    job: Path, other: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_job(monkeypatch, "--repo", str(other / ".git"), "--name", "x") == 2
    assert "lies inside a git folder" in capsys.readouterr().err


def test_admit_folder_confines_only_what_a_client_asked_for(tmp_path: Path, home: Path) -> None:
    root, elsewhere = tmp_path / "allowed", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    assert admit_folder(str(elsewhere), [root], home, confined=False) == elsewhere.resolve()
    with pytest.raises(PathRefused, match="outside the allowed roots"):
        admit_folder(str(elsewhere), [root], home, confined=True)
