"""cluster.ingest.git_state on real git repositories: source state, refs, change signatures,
staleness, and a ref's tree exported from the object database without touching the checkout."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from cluster.errors import RefNotFound
from cluster.ingest.git_state import (
    SourceState,
    change_signature,
    export_tree,
    resolve_commit,
    source_state,
    staleness,
)

GIT_ID = ["-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "commit.gpgsign=false"]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *GIT_ID, "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "pkg" / "a.py").write_text("def a():\n    return 1\n")
    (root / "pkg" / "b.py").write_text("def b():\n    return 2\n")
    (root / ".gitignore").write_text("build/\n")
    commit_all(root, "first")
    return root


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    later = time.time() + 2  # a distinct mtime, whatever the file system's resolution
    os.utime(path, (later, later))


def test_the_source_state_names_commit_branch_and_dirtiness(repo: Path, tmp_path: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    assert source_state(repo) == SourceState(vcs="git", commit=head, branch="main", dirty=False)
    write(repo / "pkg" / "a.py", "def a():\n    return 10\n")
    assert source_state(repo).dirty
    git(repo, "checkout", "-q", "--detach")
    assert source_state(repo).branch is None
    plain = tmp_path / "plain"
    plain.mkdir()
    assert source_state(plain) == SourceState(vcs="folder")
    with pytest.raises(RefNotFound, match="not inside a git work tree"):
        source_state(plain, "main")


def test_refs_resolve_to_commits_and_anything_else_is_refused(repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "tag", "v1")
    write(repo / "pkg" / "c.py", "def c():\n    return 3\n")
    second = commit_all(repo, "second")
    assert resolve_commit(repo, "main") == second
    assert resolve_commit(repo, "v1") == resolve_commit(repo, "main~1") == resolve_commit(repo, first[:12]) == first
    state = source_state(repo, "main")
    assert (state.commit, state.branch, state.ref, state.dirty) == (second, "main", "main", False)
    assert source_state(repo, "v1").branch is None
    for bad in ("-c", "--output=/tmp/x", "main..v1", "main:pkg/a.py", "$(touch x)", "a b", "", "main\n"):
        with pytest.raises(RefNotFound, match="not a ref name"):
            resolve_commit(repo, bad)
    with pytest.raises(RefNotFound, match="does not resolve"):
        resolve_commit(repo, "no-such-branch")


def test_the_change_signature_moves_with_every_indexable_change_only(repo: Path, tmp_path: Path) -> None:
    seen = {change_signature(repo)}

    def changed() -> bool:
        signature = change_signature(repo)
        new = signature not in seen
        seen.add(signature)
        return new

    assert not changed()  # stable
    write(repo / "build" / "out.js", "ignored")
    assert not changed()  # an ignored file is no change
    write(repo / "pkg" / "a.py", "def a():\n    return 10\n")
    assert changed()
    write(repo / "pkg" / "a.py", "def a():\n    return 11\n")
    assert changed()  # a second edit of an already modified file
    write(repo / "pkg" / "new.py", "x = 1\n")
    assert changed()  # untracked
    commit_all(repo, "edit")
    assert changed()
    plain = tmp_path / "plain"
    write(plain / "x.py", "x = 1\n")
    before = change_signature(plain)
    assert change_signature(plain) == before
    write(plain / "x.py", "x = 2\n")
    assert change_signature(plain) != before


def test_staleness_counts_changed_files_and_commits_since_the_build(repo: Path, tmp_path: Path) -> None:
    built = source_state(repo)
    built_at = time.time() + 1  # every write below is later
    assert staleness(repo, built, built_at).model_dump() == {
        "changed_files": 0,
        "commits_behind": 0,
        "commit_now": built.commit,
    }
    write(repo / "pkg" / "a.py", "def a():\n    return 10\n")
    commit_all(repo, "one")
    write(repo / "pkg" / "b.py", "def b():\n    return 20\n")
    now = commit_all(repo, "two")
    write(repo / "pkg" / "new.py", "x = 1\n")  # untracked
    (repo / "pkg" / "gone.py").unlink(missing_ok=True)
    stale = staleness(repo, built, built_at)
    assert (stale.changed_files, stale.commits_behind, stale.commit_now) == (3, 2, now)

    ref_built = source_state(repo, "main")
    write(repo / "pkg" / "c.py", "def c():\n    return 3\n")
    assert staleness(repo, ref_built, built_at).changed_files == 0  # a ref build ignores the working tree
    commit_all(repo, "three")
    assert staleness(repo, ref_built, built_at).model_dump(exclude={"commit_now"}) == {
        "changed_files": 2,  # c.py and new.py, committed
        "commits_behind": 1,
    }

    plain = tmp_path / "plain"
    write(plain / "x.py", "x = 1\n")
    folder_built_at = time.time() + 10  # x.py is older than the build, y.py newer
    write(plain / "y.py", "y = 1\n")
    later = folder_built_at + 5
    os.utime(plain / "y.py", (later, later))
    assert staleness(plain, SourceState(vcs="folder"), folder_built_at).model_dump() == {
        "changed_files": 1,
        "commits_behind": None,
        "commit_now": None,
    }


def test_a_ref_is_exported_from_the_object_database_and_the_checkout_is_untouched(repo: Path, tmp_path: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    (repo / "pkg" / "link.py").symlink_to("a.py")
    write(repo / "pkg" / "big.txt", "x" * 5000)
    commit_all(repo, "link and big")
    write(repo / "pkg" / "a.py", "uncommitted\n")  # the checkout differs from every commit
    status_before = git(repo, "status", "--porcelain")  # (this one may refresh the index: before the stamp)
    index_before = (repo / ".git" / "index").stat().st_mtime_ns

    dest = tmp_path / "export"
    dest.mkdir()
    summary = export_tree(repo, resolve_commit(repo, "main"), dest, max_file_bytes=1000)
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert files == [".gitignore", "pkg/a.py", "pkg/b.py"]
    assert (dest / "pkg" / "a.py").read_text() == "def a():\n    return 1\n"  # the commit's text
    assert summary.files == 3 and sorted(summary.skipped) == ["pkg/big.txt", "pkg/link.py"]
    assert (repo / ".git" / "index").stat().st_mtime_ns == index_before
    assert git(repo, "status", "--porcelain") == status_before
    assert git(repo, "worktree", "list").count("\n") == 0  # no worktree was added

    sub = tmp_path / "sub-export"
    sub.mkdir()
    export_tree(repo / "pkg", base, sub, max_file_bytes=1000)
    assert sorted(p.name for p in sub.iterdir()) == ["a.py", "b.py"]  # the subfolder's own paths


def test_a_hostile_repository_config_runs_nothing(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    hook = f"touch {marker}"
    git(repo, "config", "core.fsmonitor", hook)
    git(repo, "config", "diff.external", hook)
    git(repo, "config", "filter.evil.smudge", hook)
    git(repo, "config", "filter.evil.clean", hook)
    (repo / ".gitattributes").write_text("* filter=evil\n")
    subprocess.run(
        ["git", *GIT_ID, "-c", "core.fsmonitor=false", "-c", "filter.evil.clean=cat", "-C", str(repo), "add", "-A"],
        check=True,
    )
    subprocess.run(
        ["git", *GIT_ID, "-c", "core.fsmonitor=false", "-C", str(repo), "commit", "-qm", "attrs"], check=True
    )
    marker.unlink(missing_ok=True)
    write(repo / "pkg" / "a.py", "changed\n")
    built = source_state(repo)
    change_signature(repo)
    staleness(repo, built, 0.0)
    dest = tmp_path / "export"
    dest.mkdir()
    export_tree(repo, resolve_commit(repo, "HEAD"), dest, max_file_bytes=10_000)
    assert not marker.exists()
