"""Repository walking: ignore files (.gitignore, .git/info/exclude, core.excludesFile, .samespaceignore),
the secret deny-list and re-includes, symlinks, junk folders, binary and oversize files, skips, order.

Secrets are assembled at run time so this file never holds a literal credential.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pathspec import GitIgnoreSpec

from cluster.errors import ScanError
from cluster.ingest.git_files import git_config_value
from cluster.ingest.secret_files import SECRET_DENY, DenyList
from cluster.ingest.skips import SkipLog, SkipReason
from cluster.ingest.walker import WalkSettings, walk_repository, walk_settings
from cluster.settings import ChunkingSettings, IngestSettings, SamespaceSettings

SECRET_TEXT = "canary" + "-" + "d41d8cd98f00b204e980"  # a marker that must never leave a denied file


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


# ---------------------------------------------------------------------------------------------
# Secrets never walked, git's other ignore files, .samespaceignore, symlinks, skips


DENIED = [
    (".env", ".env"),
    ("app/.env.local", "app/.env.local"),
    ("deploy/prod.env", "deploy/prod.env"),
    (".envrc", ".envrc"),
    ("id_rsa", "id_rsa"),
    ("keys/id_ed25519", "keys/id_ed25519"),
    ("keys/id_work", "keys/id_work"),
    ("ci/deploy_rsa", "ci/deploy_rsa"),
    ("tls/server.pem", "tls/server.pem"),
    ("tls/server.key", "tls/server.key"),
    ("AuthKey_ABC.p8", "AuthKey_ABC.p8"),
    ("certs/client.p12", "certs/client.p12"),
    ("certs/client.pfx", "certs/client.pfx"),
    ("android/app.jks", "android/app.jks"),
    ("android/release.keystore", "android/release.keystore"),
    ("putty.ppk", "putty.ppk"),
    (".ssh/config", ".ssh/"),
    ("home/.ssh/id_custom", "home/.ssh/"),
    (".aws/credentials", ".aws/"),
    (".gnupg/gpg.conf", ".gnupg/"),
    (".azure/accessTokens.json", ".azure/"),
    ("home/.config/gcloud/credentials.db", "home/.config/gcloud/"),
    (".docker/config.json", ".docker/config.json"),
    ("home/.docker/config.json", "home/.docker/config.json"),
    (".kube/config", ".kube/config"),
    (".npmrc", ".npmrc"),
    ("web/.npmrc", "web/.npmrc"),
    (".pypirc", ".pypirc"),
    (".netrc", ".netrc"),
    (".git-credentials", ".git-credentials"),
    ("site/.htpasswd", "site/.htpasswd"),
    (".pgpass", ".pgpass"),
    (".vault-token", ".vault-token"),
    ("infra/terraform.tfstate", "infra/terraform.tfstate"),
    ("infra/terraform.tfstate.backup", "infra/terraform.tfstate.backup"),
]


@pytest.mark.parametrize(("rel", "recorded"), DENIED)
def test_a_secret_file_is_never_opened_and_is_recorded_by_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rel: str, recorded: str
) -> None:
    write(tmp_path, rel, f"canary {SECRET_TEXT}\n")
    write(tmp_path, "main.py")
    opened = spy_opens(monkeypatch)
    skips = SkipLog()
    assert [f.path for f in walk_repository(tmp_path, WalkSettings(), skips)] == ["main.py"]
    assert not any(str(path).endswith(rel) for path in opened)
    summary = skips.summary()
    assert summary.counts == {SkipReason.SECRET_FILE.value: 1}
    assert summary.paths[SkipReason.SECRET_FILE.value] == [recorded]
    assert SECRET_TEXT not in summary.model_dump_json()


def test_look_alikes_of_secret_names_are_walked(tmp_path: Path) -> None:
    allowed = [
        "id_rsa.pub",
        "src/id_map.py",
        "src/keys.py",
        "environment.py",
        "docs/ssh.md",
        "kube/config",
        "docker/config.json",
        "env/settings.py",
        "pem_parser.py",
        "key.txt",
    ]
    for rel in allowed:
        write(tmp_path, rel)
    skips = SkipLog()
    assert walked_with(tmp_path, WalkSettings(), skips) == sorted(allowed)
    assert skips.summary().counts == {}


def test_extra_deny_patterns_extend_the_deny_list(tmp_path: Path) -> None:
    write(tmp_path, "secrets.yaml", "token: x\n")
    write(tmp_path, "vault/dev.hcl", "x\n")
    write(tmp_path, "app.py")
    settings = walk_settings(
        SamespaceSettings(ingest=IngestSettings(extra_deny=["secrets.yaml", "vault/"])), environ={}
    )
    skips = SkipLog()
    assert walked_with(tmp_path, settings, skips) == ["app.py"]
    assert skips.summary().paths[SkipReason.SECRET_FILE.value] == ["secrets.yaml", "vault/"]


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


def test_samespaceignore_cannot_lift_the_deny_list_but_ingest_reinclude_can(tmp_path: Path) -> None:
    write(tmp_path, ".samespaceignore", "!.env.example\n!.env\n")
    write(tmp_path, ".gitignore", "build/\n")
    write(tmp_path, ".env.example", "API_KEY=\n")
    write(tmp_path, ".env", f"API_KEY={SECRET_TEXT}\n")
    write(tmp_path, "build/schema.py")
    write(tmp_path, "app.py")
    assert walked(tmp_path) == [".gitignore", ".samespaceignore", "app.py"]
    ingest = IngestSettings(reinclude=[".env.example", "build/"])
    settings = walk_settings(SamespaceSettings(ingest=ingest), environ={})
    skips = SkipLog()
    assert walked_with(tmp_path, settings, skips) == [
        ".env.example",
        ".gitignore",
        ".samespaceignore",
        "app.py",
        "build/schema.py",
    ]
    assert skips.summary().paths == {SkipReason.SECRET_FILE.value: [".env"]}


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


def test_a_symlink_to_git_config_holding_a_token_is_refused_and_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_url = "https://ci-bot:" + SECRET_TEXT + "@github.com/acme/repo.git"
    write(tmp_path, ".git/config", f'[remote "origin"]\n\turl = {token_url}\n')
    (tmp_path / "remote.cfg").symlink_to(tmp_path / ".git" / "config")
    (tmp_path / "gitdir").symlink_to(tmp_path / ".git", target_is_directory=True)
    write(tmp_path, "app.py")
    opened = spy_opens(monkeypatch)
    skips = SkipLog()
    files = list(walk_repository(tmp_path, WalkSettings(), skips))
    assert [f.path for f in files] == ["app.py"]
    assert not any(SECRET_TEXT in f.text for f in files)
    assert not any(path.endswith(("remote.cfg", "gitdir")) for path in opened)  # the links are never opened
    assert skips.summary().paths == {SkipReason.SYMLINK.value: ["gitdir", "remote.cfg"]}


def test_symlinks_to_denied_ignored_or_outside_files_are_refused_and_recorded(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside, "elsewhere.py")
    repo = tmp_path / "repo"
    write(repo, ".gitignore", "private/\n")
    write(repo, ".env", "KEY=x\n")
    write(repo, "private/notes.py")
    write(repo, "main.py")
    links = {
        "to_env.txt": repo / ".env",
        "to_private.py": repo / "private" / "notes.py",
        "to_outside.py": outside / "elsewhere.py",
        "to_outside_dir": outside,
        "dangling.py": repo / "missing.py",
        "to_main.py": repo / "main.py",
        "src_link": repo / "private",
    }
    for name, target in links.items():
        (repo / name).symlink_to(target, target_is_directory=target.is_dir())
    (repo / ".env.link").symlink_to(repo / "main.py")  # the link's own name is denied
    skips = SkipLog()
    files = list(walk_repository(repo, WalkSettings(), skips))
    assert [f.path for f in files] == [".gitignore", "main.py", "to_main.py"]
    assert files[-1].text == "x = 1\n" and files[-1].abs_path == repo.resolve() / "to_main.py"
    summary = skips.summary()
    assert summary.paths == {
        SkipReason.SECRET_FILE.value: [".env", ".env.link"],
        SkipReason.SYMLINK.value: [
            "dangling.py",
            "src_link",
            "to_env.txt",
            "to_outside.py",
            "to_outside_dir",
            "to_private.py",
        ],
    }


def test_a_symlinked_gitignore_is_not_read(tmp_path: Path) -> None:
    write(tmp_path, "rules.txt", "*.py\n")
    (tmp_path / ".gitignore").symlink_to(tmp_path / "rules.txt")
    write(tmp_path, "app.py")
    assert [p for p in walked(tmp_path) if p.endswith(".py")] == ["app.py"]


def test_an_unreadable_subfolder_is_recorded_and_the_walk_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "locked/inside.py")
    write(tmp_path, "open/ok.py")
    locked = str(tmp_path.resolve() / "locked")
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        if opened_path(path, {}) == locked:
            raise PermissionError(13, "Permission denied", locked)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    skips = SkipLog()
    assert walked_with(tmp_path, WalkSettings(), skips) == ["open/ok.py"]
    assert skips.summary().paths == {SkipReason.UNREADABLE.value: ["locked/"]}


def test_an_unreadable_file_is_recorded_and_the_walk_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "a.py")
    write(tmp_path, "b.py")
    real_open = os.open

    def guarded(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if opened_path(path, kwargs).endswith("/a.py"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded)
    skips = SkipLog()
    assert walked_with(tmp_path, WalkSettings(), skips) == ["b.py"]
    assert skips.summary().paths == {SkipReason.UNREADABLE.value: ["a.py"]}


def test_a_missing_root_a_file_root_and_an_unlistable_root_raise_scan_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "file.py")
    for root in (tmp_path / "missing", tmp_path / "file.py"):
        with pytest.raises(ScanError) as caught:
            walk_repository(root, WalkSettings())
        assert caught.value.root == str(root)
    real_scandir = os.scandir
    root = tmp_path.resolve()

    def scandir(path: Any) -> Any:
        if opened_path(path, {}) == str(root):
            raise PermissionError(13, "Permission denied", str(root))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(ScanError, match="cannot list it"):
        walk_repository(tmp_path, WalkSettings())


def test_binary_too_large_and_mostly_undecodable_files_are_recorded_and_a_few_bad_bytes_are_replaced(
    tmp_path: Path,
) -> None:
    write(tmp_path, "nul_late.txt", b"text\n" * 3000 + b"\x00")  # a NUL past the first 8 KiB
    write(tmp_path, "latin1_lots.txt", "\xe9\xe8\xe0".encode("latin-1") * 20)
    write(tmp_path, "stray.py", b"# caf\xe9\n" + b"x = 1\n" * 100)
    write(tmp_path, "big.py", "y = 2\n" * 400)
    write(tmp_path, "empty.py", "")
    skips = SkipLog()
    files = list(walk_repository(tmp_path, WalkSettings(max_file_bytes=2000), skips))
    assert [f.path for f in files] == ["stray.py"]
    assert files[0].text.startswith("# caf\ufffd\nx = 1\n")
    assert skips.summary().paths == {
        SkipReason.BINARY.value: ["latin1_lots.txt"],
        SkipReason.TOO_LARGE.value: ["big.py", "nul_late.txt"],
    }
    roomy = SkipLog()
    assert "nul_late.txt" not in [f.path for f in walk_repository(tmp_path, WalkSettings(), roomy)]
    assert roomy.summary().paths[SkipReason.BINARY.value] == ["latin1_lots.txt", "nul_late.txt"]


def test_the_skip_log_holds_paths_and_never_contents(tmp_path: Path) -> None:
    write(tmp_path, ".env", f"KEY={SECRET_TEXT}\n")
    write(tmp_path, "blob.bin", SECRET_TEXT.encode() + b"\x00")
    (tmp_path / "link.py").symlink_to(tmp_path / ".env")
    skips = SkipLog()
    list(walk_repository(tmp_path, WalkSettings(), skips))
    dumped = skips.summary().model_dump_json()
    assert SECRET_TEXT not in dumped
    assert skips.summary().total == 3


def test_a_deeply_nested_tree_is_walked_without_recursion(tmp_path: Path) -> None:
    depth = 1200  # deeper than Python's recursion limit
    folder = str(tmp_path)
    for _ in range(depth):
        folder = os.path.join(folder, "d")
        os.mkdir(folder)
    deep_file = os.path.join(folder, "deep.py")
    with open(deep_file, "w") as handle:
        handle.write("x = 1\n")
    try:
        assert walked(tmp_path) == ["d/" * depth + "deep.py"]
    finally:  # remove it bottom-up here: pytest's own cleanup recurses and would fail on it
        os.unlink(deep_file)
        for _ in range(depth):
            os.rmdir(folder)
            folder = os.path.dirname(folder)


@pytest.mark.timeout(60)  # reading a FIFO would block forever
def test_a_fifo_in_the_tree_is_skipped_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "pipe_link.py").symlink_to(tmp_path / "pipe.py")
    write(tmp_path, "app.py")
    skips = SkipLog()
    assert walked_with(tmp_path, WalkSettings(), skips) == ["app.py"]
    assert skips.summary().paths == {SkipReason.SYMLINK.value: ["pipe_link.py"]}


def test_the_deny_list_refuses_paths_below_denied_folders_and_inside_git(tmp_path: Path) -> None:
    rules = DenyList(SECRET_DENY, reinclude=[".env.example"])
    for refused in [".env", "a/.ssh/known_hosts", ".git/config", "sub/.git/config", "keys/id_rsa", ".aws/x/y"]:
        assert rules.refuses(refused), refused
    for allowed in [".env.example", "app.py", "id_rsa.pub", "git/config", "docs/.envoy.md"]:
        assert not rules.refuses(allowed), allowed


def test_the_deny_lists_one_regex_pre_check_agrees_with_gitignore_matching() -> None:
    patterns = [*SECRET_DENY, "/top_only.txt", "vault/**/*.hcl", "docs/*.secret", "!docs/ok.secret", "[Ss]ecrets/"]
    rules = DenyList(patterns)
    spec = GitIgnoreSpec.from_lines(patterns)
    paths = [
        ".env",
        "a/.env",
        ".env.x",
        "a/b/.envrc",
        "x.env",
        "envy.py",
        "id_rsa",
        "id_rsa.pub",
        "a/id_x",
        "b_rsa",
        "rsa",
        "top_only.txt",
        "a/top_only.txt",
        "vault/a/b/c.hcl",
        "vault/c.hcl",
        "vault2/c.hcl",
        "docs/x.secret",
        "docs/ok.secret",
        "docs/a/x.secret",
        "Secrets/",
        "secrets/",
        "a/secrets/",
        "a.pem",
        "a/.ssh/",
        ".ssh",
        ".docker/config.json",
        "a/.docker/config.json",
        ".kube/config",
        "main.py",
        "a/.config/gcloud/",
        ".config/gcloud",
        "x.tfstate.backup",
        "terraform.tfvars",
    ]
    assert [rules.denies(p) for p in paths] == [bool(spec.match_file(p)) for p in paths]
    assert sum(rules.denies(p) for p in paths) > 15


def opened_path(path: Any, kwargs: dict[str, Any]) -> str:
    """The full path an os.open or os.scandir call names: a name below a folder handle (dir_fd), a
    folder handle itself, or a path."""
    if isinstance(path, int):
        return os.readlink(f"/proc/self/fd/{path}")
    dir_fd = kwargs.get("dir_fd")
    if dir_fd is None:
        return os.fspath(path)
    return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), os.fspath(path))


def spy_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every full path os.open is asked for while the test runs (the walker opens files only this way)."""
    opened: list[str] = []
    real_open = os.open

    def spy(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        opened.append(opened_path(path, kwargs))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    return opened


def walked_with(root: Path, settings: WalkSettings, skips: SkipLog) -> list[str]:
    return [f.path for f in walk_repository(root, settings, skips)]
