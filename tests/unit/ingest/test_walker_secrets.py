"""Repository walking, secrets: the deny-list (files never opened, recorded by path), look-alikes that
are walked, extra deny patterns, what .samespaceignore cannot lift and ingest re-includes can, a symlink
to a git config holding a token, a skip log with paths and never contents, and the deny list's rules.

Secrets are assembled at run time so this file never holds a literal credential.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pathspec import GitIgnoreSpec

from cluster.ingest.secret_files import SECRET_DENY, DenyList
from cluster.ingest.skips import SkipLog, SkipReason
from cluster.ingest.walker import WalkSettings, walk_repository, walk_settings
from cluster.settings import IngestSettings, SamespaceSettings
from tests.support.repo_walks import SECRET_TEXT, spy_opens, walked, walked_with, write

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


def test_the_skip_log_holds_paths_and_never_contents(tmp_path: Path) -> None:
    write(tmp_path, ".env", f"KEY={SECRET_TEXT}\n")
    write(tmp_path, "blob.bin", SECRET_TEXT.encode() + b"\x00")
    (tmp_path / "link.py").symlink_to(tmp_path / ".env")
    skips = SkipLog()
    list(walk_repository(tmp_path, WalkSettings(), skips))
    dumped = skips.summary().model_dump_json()
    assert SECRET_TEXT not in dumped
    assert skips.summary().total == 3


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
