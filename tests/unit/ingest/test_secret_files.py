"""The secret deny-list: secret files under the names real repositories give them, and every listed
name in any case (.ENV, ID_RSA, Credentials), are never opened; source files and folders that only
look alike are still walked."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.ingest.secret_files import SECRET_DENY, DenyList
from cluster.ingest.skips import SkipLog, SkipReason
from cluster.ingest.walker import WalkSettings, walk_repository

COMMON_NAMES = [
    # names the deny-list already held
    ".env.production",
    "web/.env.local",
    "android/app/release.keystore",
    "android/app/upload.jks",
    "certs/client.p12",
    "certs/client.pfx",
    "home/.ssh_backup/id_ed25519",
    "putty/server.ppk",
    "public/.htpasswd",
    ".netrc",
    ".git-credentials",
    "infra/terraform.tfstate",
    ".vault-token",
    # names it did not
    "config/secrets.yaml",
    "config/secrets.yml",
    ".streamlit/secrets.toml",
    "credentials.json",
    "keys/service-account-prod.json",
    "gcp/my_service_account.json",
    "firebase/acme-firebase-adminsdk-x1y2z.json",
    "client_secret_123.apps.googleusercontent.com.json",
    "infra/terraform.tfvars",
    "infra/prod.auto.tfvars",
    "wordpress/wp-config.php",
    "deploy/kubeconfig",
    "deploy/prod.kubeconfig",
    "deploy/kubeconfig.yaml",
    "jenkins/credentials.xml",
    "home/.m2/settings.xml",
    "settings-security.xml",
    "backup/pgpass.conf",
    "home/.mylogin.cnf",
    "home/.bash_history",
    "home/.psql_history",
    "aws-copy/credentials",
    ".terraformrc",
    "home/.config/gh/hosts.yml",
]

CASE_VARIANTS = [
    ".ENV",
    ".Env.Production",
    "keys/ID_RSA",
    "keys/Id_Ed25519",
    "Credentials",
    "deploy/Server.PEM",
    "certs/Client.P12",
    ".NETRC",
    ".Git-Credentials",
    ".NPMRC",
    "Infra/Terraform.TFSTATE",
    "config/Secrets.YAML",
    "keys/Service-Account.JSON",
    ".AWS/credentials",
    "home/.SSH/known_hosts",
]

LOOK_ALIKES = [
    "keys/id_rsa.pub",
    "keys/ID_RSA.PUB",
    "src/id_map.py",
    "src/credentials/Provider.java",
    "src/credentials/__init__.py",
    "pkg/kubeconfig/kubeconfig.go",
    "pkg/kubeconfig/loader_test.go",
    "Credentials.java",
    "credentials.py",
    "src/secrets.py",
    "docs/secrets.md",
    "infra/terraform.tfvars.example",
    "wordpress/wp-config-sample.php",
    "infra/main.tf",
    "docs/.envoy.md",
    "git/config",
]


@pytest.mark.parametrize("path", COMMON_NAMES)
def test_secret_files_under_their_common_names_are_refused(path: str) -> None:
    assert DenyList.default().refuses(path)


@pytest.mark.parametrize("path", CASE_VARIANTS)
def test_a_listed_name_is_refused_in_any_case(path: str) -> None:
    assert DenyList.default().refuses(path)


@pytest.mark.parametrize("path", LOOK_ALIKES)
def test_files_and_folders_that_only_look_alike_are_not_refused(path: str) -> None:
    assert not DenyList.default().refuses(path)


def test_an_operators_patterns_keep_their_meaning_and_reincludes_match_as_written() -> None:
    rules = DenyList([*SECRET_DENY, "[A-Z]*.secret"], reinclude=[".env.example"])
    assert rules.refuses("Vault.secret") and rules.refuses("notes/Q1.secret")
    assert not rules.refuses(".env.example") and not rules.refuses("vault.txt")
    assert rules.refuses(".ENV.EXAMPLE")  # a re-include lifts the path as written, never a case variant


def test_the_walk_never_opens_a_secret_file_in_any_case_and_walks_look_alike_folders(tmp_path: Path) -> None:
    for rel in [*COMMON_NAMES, *CASE_VARIANTS, *LOOK_ALIKES]:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("value = 1\n")
    skips = SkipLog()
    walked = {f.path for f in walk_repository(tmp_path, WalkSettings(), skips)}
    assert walked == set(LOOK_ALIKES)
    assert skips.count(SkipReason.SECRET_FILE) >= len(COMMON_NAMES) + len(CASE_VARIANTS) - 2  # .AWS/, .SSH/ as folders
