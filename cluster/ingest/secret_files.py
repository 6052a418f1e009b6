"""The secret deny-list: paths that hold credentials far more often than not, never opened.

Used by the walker (a denied file is never read, a denied folder never entered) and, as defence in
depth, by reads (`cluster.ingest.source`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

from pathspec import GitIgnoreSpec

GIT_DIR_NAME = ".git"

# The secret deny-list: files and folders that hold credentials far more often than not. Gitignore
# syntax, matched against repository-relative paths (a pattern without "/" matches at any depth;
# "**/" anchors a two-part path anywhere) and regardless of case (.ENV, ID_RSA, Credentials). Extend
# it with settings.ingest.extra_deny; lift one entry for one path with settings.ingest.reinclude (for
# example ".env.example"). A name that is also a common source folder ("credentials", "kubeconfig")
# is followed by "!name/": the file is denied, a folder of that name is walked (what is in it still
# meets every other pattern, which come after).
SECRET_DENY: tuple[str, ...] = (
    "credentials",
    "!credentials/",
    "kubeconfig",
    "!kubeconfig/",
    # environment files: .env, .env.local, .env.production, prod.env, direnv's .envrc
    ".env",
    ".env.*",
    "*.env",
    ".envrc",
    # SSH private keys (id_rsa, id_ed25519, id_work, deploy_rsa...), but not id_rsa.pub nor id_map.py
    "id_*",
    "!id_*.*",
    "*_rsa",
    "*_dsa",
    "*_ecdsa",
    "*_ed25519",
    # private keys, key stores and password databases
    "*.pem",
    "*.key",
    "*.p8",
    "*.p12",
    "*.pfx",
    "*.pkcs12",
    "*.jks",
    "*.jceks",
    "*.bks",
    "*.keystore",
    "*.keychain",
    "*.keychain-db",
    "*.ppk",
    "*.keytab",
    "*.kdbx",
    # credential folders and files of common tools
    ".ssh/",
    ".aws/",
    ".gnupg/",
    ".azure/",
    "**/.config/gcloud/",
    "**/.config/gh/hosts.yml",
    "application_default_credentials.json",
    "**/.docker/config.json",
    ".dockercfg",
    "**/.kube/config",
    "*.kubeconfig",
    "kubeconfig.yaml",
    "kubeconfig.yml",
    "**/.m2/settings.xml",
    "settings-security.xml",
    "**/.gradle/gradle.properties",
    "**/.cargo/credentials.toml",
    ".terraformrc",
    "credentials.tfrc.json",
    # token and password files
    ".npmrc",
    ".pypirc",
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".htpasswd",
    ".pgpass",
    "pgpass.conf",
    ".my.cnf",
    ".mylogin.cnf",
    ".s3cfg",
    ".boto",
    ".vault-token",
    "wp-config.php",
    # secrets and credentials under their common names, service-account and OAuth client keys
    "secrets.json",
    "secrets.yaml",
    "secrets.yml",
    "secrets.toml",
    "credentials.json",
    "credentials.yaml",
    "credentials.yml",
    "credentials.xml",
    "*service-account*.json",
    "*service_account*.json",
    "*firebase-adminsdk*.json",
    "client_secret*.json",
    # shell and database client histories hold the passwords typed at them
    ".*_history",
    # Terraform variables and state hold every secret of the resources they manage
    "*.tfvars",
    "*.tfvars.json",
    "*.tfstate",
    "*.tfstate.*",
)


class DenyList:
    """The secret deny-list with its re-includes, for one repository-relative path at a time.

    A path is refused when it, or a folder above it, matches the deny-list and is not re-included,
    or when it lies in a ``.git`` folder. Used by the walker and, as defence in depth, by reads.
    """

    def __init__(self, deny: Sequence[str] = SECRET_DENY, reinclude: Sequence[str] = ()) -> None:
        # Case-insensitive: the lower-cased patterns against the lower-cased path (pathspec has no
        # such option), or the patterns as written against the path as written (an operator's
        # "[A-Z]*.secret" keeps its meaning). Either denies; re-includes match as written.
        self._deny = (GitIgnoreSpec.from_lines(deny), GitIgnoreSpec.from_lines([p.lower() for p in deny]))
        self._could_deny = tuple(_any_positive(spec) for spec in self._deny)
        self._reinclude = GitIgnoreSpec.from_lines(reinclude)
        self._has_reinclude = bool(reinclude)

    @staticmethod
    @cache
    def default() -> DenyList:
        return DenyList()

    def denies(self, rel_path: str) -> bool:
        """This one path ("a/b" for a file, "a/b/" for a folder) is denied, in any case, and not re-included."""
        paths = (rel_path, rel_path.lower())
        for spec, could_deny, path in zip(self._deny, self._could_deny, paths, strict=True):
            if could_deny is not None and not could_deny.match(path):
                continue  # the common case, decided by one regex instead of one per pattern
            if spec.match_file(path):
                return not self.reincluded(rel_path)
        return False

    def reincluded(self, rel_path: str) -> bool:
        return self._has_reinclude and bool(self._reinclude.match_file(rel_path))

    def refuses(self, rel_path: str) -> bool:
        """The file at ``rel_path`` lies in ``.git`` or is denied, itself or through a folder above it."""
        parts = rel_path.split("/")
        for i, part in enumerate(parts[:-1]):
            if part == GIT_DIR_NAME or self.denies("/".join(parts[: i + 1]) + "/"):
                return True
        return parts[-1] == GIT_DIR_NAME or self.denies(rel_path)


def _any_positive(spec: GitIgnoreSpec) -> re.Pattern[str] | None:
    """One regex matching whatever any non-negated pattern of ``spec`` matches: a fast pre-check.

    Built from pathspec's compiled patterns; None (no pre-check) if they cannot be combined.
    """
    anywhere = "^(?:.+/)?"  # how pathspec starts a pattern that matches at any depth
    floating: list[str] = []
    anchored: list[str] = []
    for pattern in spec.patterns:
        regex = getattr(pattern, "regex", None)
        if not getattr(pattern, "include", None) or regex is None:
            continue
        text = re.sub(r"\(\?P<[A-Za-z_][A-Za-z0-9_]*>", "(?:", regex.pattern)  # names repeat across patterns
        if text.startswith(anywhere):
            floating.append("(?:" + text[len(anywhere) :] + ")")
        else:
            anchored.append("(?:" + text + ")")
    if floating:
        anchored.append(anywhere + "(?:" + "|".join(floating) + ")")
    try:
        return re.compile("|".join(anchored)) if anchored else re.compile(r"(?!)")
    except (re.error, TypeError):
        return None
