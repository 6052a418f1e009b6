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
# "**/" anchors a two-part path anywhere). Extend it with settings.ingest.extra_deny; lift one entry
# for one path with settings.ingest.reinclude (for example ".env.example").
SECRET_DENY: tuple[str, ...] = (
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
    "*.jks",
    "*.keystore",
    "*.ppk",
    "*.keytab",
    "*.kdbx",
    # credential folders of common tools
    ".ssh/",
    ".aws/",
    ".gnupg/",
    ".azure/",
    "**/.config/gcloud/",
    "**/.docker/config.json",
    ".dockercfg",
    "**/.kube/config",
    # token and password files
    ".npmrc",
    ".pypirc",
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".htpasswd",
    ".pgpass",
    ".my.cnf",
    ".s3cfg",
    ".vault-token",
    "credentials.tfrc.json",
    # Terraform state holds every secret of the resources it manages
    "*.tfstate",
    "*.tfstate.*",
)


class DenyList:
    """The secret deny-list with its re-includes, for one repository-relative path at a time.

    A path is refused when it, or a folder above it, matches the deny-list and is not re-included,
    or when it lies in a ``.git`` folder. Used by the walker and, as defence in depth, by reads.
    """

    def __init__(self, deny: Sequence[str] = SECRET_DENY, reinclude: Sequence[str] = ()) -> None:
        self._deny = GitIgnoreSpec.from_lines(deny)
        self._could_deny = _any_positive(self._deny)
        self._reinclude = GitIgnoreSpec.from_lines(reinclude)
        self._has_reinclude = bool(reinclude)

    @staticmethod
    @cache
    def default() -> DenyList:
        return DenyList()

    def denies(self, rel_path: str) -> bool:
        """This one path ("a/b" for a file, "a/b/" for a folder) is denied and not re-included."""
        if self._could_deny is not None and not self._could_deny.match(rel_path):
            return False  # the common case, decided by one regex instead of one per pattern
        return bool(self._deny.match_file(rel_path)) and not self.reincluded(rel_path)

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
