"""Repository walking, what is left out: ignore files (.gitignore at the root and nested, .git/info/exclude,
core.excludesFile from the repository, global and XDG configs, .samespaceignore and its re-includes),
junk folders, extra ignores, walks of a subfolder or a folder the repository ignores, git's config reader,
and the walk settings read from settings and the environment.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.errors import ScanError
from cluster.ingest.git_files import git_config_value
from cluster.ingest.secret_files import SECRET_DENY
from cluster.ingest.skips import SkipLog
from cluster.ingest.walker import WalkSettings, walk_repository, walk_settings
from cluster.settings import ChunkingSettings, IngestSettings, SamespaceSettings
from tests.support.repo_walks import spy_opens, walked, walked_with, write


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


def test_extra_ignores_apply_like_root_gitignore_patterns(tmp_path: Path) -> None:
    write(tmp_path, "keep.py")
    write(tmp_path, "vendor/lib.py")
    write(tmp_path, "gen_models.py")
    settings = WalkSettings(extra_ignores=("vendor/", "gen_*.py"))
    assert walked(tmp_path, settings) == ["keep.py"]


def test_git_info_exclude_is_honoured_and_ignored_files_are_not_recorded(tmp_path: Path) -> None:
    write(tmp_path, ".git/info/exclude", "# local only\nnotes/\n*.scratch\n")
    write(tmp_path, "notes/private.md", "private\n")
    write(tmp_path, "a.scratch", "scratch\n")
    write(tmp_path, "app.py")
    skips = SkipLog()
    assert walked_with(tmp_path, WalkSettings(), skips) == ["app.py"]
    assert skips.summary().counts == {}


def test_a_worktree_git_file_is_refused_and_the_folder_it_points_to_is_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    main_git = tmp_path / "main" / ".git"
    write(main_git, "info/exclude", "local.txt\n")
    write(main_git, "worktrees/wt/commondir", "../..\n")
    repo = tmp_path / "wt"
    write(repo, ".git", f"gitdir: {main_git / 'worktrees' / 'wt'}\n")
    write(repo, "app.py")
    opened = spy_opens(monkeypatch)
    with pytest.raises(ScanError, match="is a file pointing to a git folder elsewhere"):
        walk_repository(repo, WalkSettings())
    assert not any(path.startswith(str(tmp_path / "main")) for path in opened)


def test_a_subfolder_walk_honours_every_ignore_file_from_the_repository_top_down(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write(repo, ".git/info/exclude", "local-notes.md\n")
    write(repo, ".gitignore", "*.secret.py\n/sub/private/\n/top-only.py\ndocs/*.md\n")
    write(repo, ".samespaceignore", "sub/generated/\n")
    write(repo, "sub/.gitignore", "/anchored-here.py\n")
    write(repo, "sub/app.py")
    write(repo, "sub/key.secret.py")  # no slash in the top's pattern: it matches at any depth
    write(repo, "sub/private/notes.py")  # anchored at the top: /sub/private/
    write(repo, "sub/generated/out.py")  # the top's .samespaceignore
    write(repo, "sub/local-notes.md")  # .git/info/exclude
    write(repo, "sub/anchored-here.py")  # sub's own pattern, anchored at sub/
    write(repo, "sub/deeper/anchored-here.py")
    write(repo, "sub/top-only.py")  # anchored at the top: only /top-only.py is ignored
    write(repo, "sub/docs/guide.md")  # docs/*.md holds a slash: relative to the top, not to sub/
    expected = [".gitignore", "app.py", "deeper/anchored-here.py", "docs/guide.md", "top-only.py"]
    assert walked(repo / "sub") == expected


def test_a_root_its_repository_ignores_is_ignored_whole_and_a_root_in_a_junk_folder_is_its_own(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    write(repo, ".git/info/exclude", "")
    write(repo, ".gitignore", "build/\nnode_modules/\n*.js\n")
    write(repo, "build/gen/out.py")
    write(repo, "node_modules/pkg/index.js")
    write(repo, "node_modules/pkg/.gitignore", "dist/\n")
    write(repo, "node_modules/pkg/dist/bundle.js")
    assert walked(repo / "build" / "gen") == []  # git ignores build/ and all in it
    assert walked(repo / "build" / "gen", WalkSettings(reinclude=("out.py",))) == ["out.py"]  # the operator's word
    # The repository's walk never enters node_modules/: a package there is a folder of its own.
    assert walked(repo / "node_modules" / "pkg") == [".gitignore", "index.js"]


def test_an_exported_build_in_the_store_is_walked_as_a_folder_of_its_own(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(home, ".git/info/exclude", "")
    write(home, ".gitignore", "*\n")  # a dotfiles repository at home ignores all it does not track
    export = home / ".samespace" / "data" / "exports" / "api.b1"  # inside a junk folder of that repository
    write(export, "app.py")
    assert walked(export) == ["app.py"]
    (home / ".git").rename(home / "dotfiles.git")
    write(home, ".git", f"gitdir: {home / 'dotfiles.git'}\n")  # not even read: git's walk never goes there
    assert walked(export) == ["app.py"]


def test_core_excludes_file_from_the_repository_config_expands_the_injected_home(tmp_path: Path) -> None:
    home, repo = tmp_path / "home", tmp_path / "repo"
    write(home, "my-ignores", "*.local\n")
    write(repo, ".git/config", '[core]\n\trepositoryformatversion = 0\n\texcludesFile = "~/my-ignores" ; note\n')
    write(repo, "settings.local", "x\n")
    write(repo, "app.py")
    assert walked(repo, WalkSettings(home=home)) == ["app.py"]
    assert walked(repo, WalkSettings()) == ["app.py", "settings.local"]  # no home: user files are not read


def test_core_excludes_file_from_the_global_config_then_the_xdg_config_then_the_default(tmp_path: Path) -> None:
    home, xdg, repo = tmp_path / "home", tmp_path / "xdg", tmp_path / "repo"
    write(repo, "a.one", "1\n")
    write(repo, "b.two", "2\n")
    write(repo, "c.three", "3\n")
    write(repo, "app.py")
    write(home, "ignore-one", "*.one\n")
    write(home, "ignore-two", "*.two\n")
    write(xdg, "git/ignore", "*.three\n")  # git's default excludes file
    write(xdg, "git/config", f"[core]\nexcludesfile = {home / 'ignore-two'}\n")
    write(home, ".gitconfig", "[user]\n\tname = x\n[core]\n\texcludesfile = ~/ignore-one\n")
    both = WalkSettings(home=home, xdg_config_home=xdg)
    assert walked(repo, both) == ["app.py", "b.two", "c.three"]  # ~/.gitconfig wins over the XDG config
    (home / ".gitconfig").unlink()
    assert walked(repo, both) == ["a.one", "app.py", "c.three"]  # then the XDG config
    (xdg / "git" / "config").unlink()
    assert walked(repo, both) == ["a.one", "app.py", "b.two"]  # then the default $XDG_CONFIG_HOME/git/ignore
    write(home, ".config/git/ignore", "*.one\n")
    assert walked(repo, WalkSettings(home=home)) == ["app.py", "b.two", "c.three"]  # ~/.config/git/ignore


def test_a_garbled_or_unreadable_git_config_is_tolerated(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(home, ".gitconfig", b'\xff\xfe[core\x00]]\n\texcludesfile\n= = =\n[\n"unterminated\n')
    (home / ".config" / "git" / "ignore").mkdir(parents=True)  # a folder where a file should be
    write(tmp_path / "repo", ".git/config", b"\x00\x01\x02 binary junk")
    write(tmp_path / "repo", "app.py")
    assert walked(tmp_path / "repo", WalkSettings(home=home)) == ["app.py"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("[core]\n\texcludesFile = /a/b\n", "/a/b"),
        ("[CORE]\nEXCLUDESFILE=/a/b\n", "/a/b"),
        ("[core] excludesfile = /same/line\n", "/same/line"),
        ('[core]\n  excludesfile = "/with space/x" # comment\n', "/with space/x"),
        ("[core]\n  excludesfile = /a ; comment\n", "/a"),
        ('[core]\n  excludesfile = "/q\\"uote"\n', '/q"uote'),
        ("[core]\n  excludesfile = /first\n  excludesfile = /last\n", "/last"),
        ("[core]\n  excludesfile = /con\\\ntinued\n", "/continued"),
        ('[core "sub"]\n  excludesfile = /sub\n[other]\n  excludesfile = /other\n', None),
        ("excludesfile = /no-section\n", None),
        ("[core]\n  excludesfile\n", "true"),
        ("[core\n  excludesfile = /broken-header\n", None),
        ("", None),
    ],
)
def test_the_git_config_reader_finds_the_last_value_and_tolerates_odd_lines(text: str, value: str | None) -> None:
    assert git_config_value(text, "core", "excludesfile") == value


def test_samespaceignore_keeps_files_out_of_the_index_and_re_includes_what_git_ignores(tmp_path: Path) -> None:
    write(tmp_path, ".gitignore", "generated/\n*.log\n")
    write(tmp_path, ".samespaceignore", "fixtures/\n!generated/\n")
    write(tmp_path, "sub/.samespaceignore", "!keep.log\nlocal_only.py\n")
    write(tmp_path, "generated/api.py")
    write(tmp_path, "fixtures/big.json", "{}\n")
    write(tmp_path, "x.log", "log\n")
    write(tmp_path, "sub/keep.log", "kept\n")
    write(tmp_path, "sub/local_only.py")
    write(tmp_path, "local_only.py")
    skips = SkipLog()
    assert walked_with(tmp_path, WalkSettings(), skips) == [
        ".gitignore",
        ".samespaceignore",
        "generated/api.py",
        "local_only.py",
        "sub/.samespaceignore",
        "sub/keep.log",
    ]
    assert skips.summary().counts == {}


def test_walk_settings_reads_sizes_and_patterns_from_settings_and_the_git_dirs_from_the_environment() -> None:
    settings = SamespaceSettings(
        chunking=ChunkingSettings(max_file_bytes=1234),
        ingest=IngestSettings(extra_deny=["*.secret"], reinclude=[".env.example"]),
    )
    walk = walk_settings(settings, environ={"HOME": "/home/u", "XDG_CONFIG_HOME": "relative/ignored"})
    assert walk.max_file_bytes == 1234
    assert walk.deny == (*SECRET_DENY, "*.secret") and walk.reinclude == (".env.example",)
    assert (walk.home, walk.xdg_config_home) == (Path("/home/u"), None)
    assert walk_settings(settings, environ={"XDG_CONFIG_HOME": "/x"}).xdg_config_home == Path("/x")
    assert walk_settings(settings, environ={}).home is None
