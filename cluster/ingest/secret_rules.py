"""The content rules' model (SecretRule, ContentRule) and the rules for token-shaped credentials:
provider keys recognisable by their own prefix or shape. The rules keyed by config syntax are in
`secret_config_rules`; `secret_scan` runs both. Each table entry cites the published rule it follows
(gitleaks' default config/gitleaks.toml by rule id, or a GitHub secret scanning token type) or says
why it is ours.

Every rule is linear-time: it starts on a literal whose look-behind (written after it, see
`starts_with`) lets only the first position of a run of token characters start a match, every
repetition is bounded and none is nested (no quantified group holds a repetition), and alternations
are between literals. One 1 MB line costs one pass per rule. A rule that cannot start on its own
literal (a case-insensitive name, a line anchor) has needles: it runs only on text holding one.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum


class SecretRule(str, Enum):
    """A family of credentials: what a finding reports and a redaction writes (``[redacted:<value>]``).
    Listed most specific first: when two rules match the same span, the redaction names the earlier."""

    PRIVATE_KEY = "private-key"  # PEM/OpenSSH/PGP private-key blocks (found by secret_scan, not a regex)
    AWS_ACCESS_KEY_ID = "aws-access-key-id"
    AWS_SECRET_KEY = "aws-secret-access-key"
    GITHUB_TOKEN = "github-token"
    GITLAB_TOKEN = "gitlab-token"
    OPENROUTER_KEY = "openrouter-key"
    ANTHROPIC_KEY = "anthropic-key"
    OPENAI_KEY = "openai-key"
    SLACK_TOKEN = "slack-token"
    SLACK_WEBHOOK = "slack-webhook"
    STRIPE_KEY = "stripe-key"  # secret and restricted keys, webhook signing secrets (pk_ keys are public)
    GOOGLE_API_KEY = "google-api-key"
    GOOGLE_OAUTH = "google-oauth-secret"
    GCP_SERVICE_ACCOUNT = "gcp-service-account-key"
    NPM_TOKEN = "npm-token"
    PYPI_TOKEN = "pypi-token"
    HUGGINGFACE_TOKEN = "huggingface-token"
    TWILIO_KEY = "twilio-api-key"
    SENDGRID_KEY = "sendgrid-api-key"
    MAILGUN_KEY = "mailgun-api-key"
    SHOPIFY_TOKEN = "shopify-token"
    DATADOG_KEY = "datadog-api-key"
    SQUARE_TOKEN = "square-token"
    DIGITALOCEAN_TOKEN = "digitalocean-token"
    HEROKU_KEY = "heroku-api-key"
    JWT = "jwt"
    AZURE_STORAGE_KEY = "azure-storage-key"
    AZURE_SAS_TOKEN = "azure-sas-token"
    REGISTRY_AUTH = "registry-auth"  # docker config "auth", .npmrc/.yarnrc tokens
    KUBECONFIG_CREDENTIAL = "kubeconfig-credential"
    CONFIG_TOKEN = "config-token"  # a YAML `token:` holding a token
    PASSWORD = "password"  # config-file, XML, pgpass, connection-string and URL-query passwords
    FRAMEWORK_SECRET_KEY = "framework-secret-key"  # Django/Flask SECRET_KEY, Rails, Laravel
    URL_CREDENTIALS = "url-credentials"


def _always(_: re.Match[str]) -> bool:
    return True


class Haystack:
    """A text to scan, its lower-cased copy made once when first needed, and each needle looked up
    once however many rules share it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._lowered: str | None = None
        self._held: dict[tuple[str, bool], bool] = {}

    def holds(self, needle: str, folded: bool) -> bool:
        key = (needle, folded)
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = needle in (self._lower() if folded else self.text)
        return held

    def _lower(self) -> str:
        if self._lowered is None:
            self._lowered = self.text.lower()
        return self._lowered


@dataclass(frozen=True)
class ContentRule:
    """One form of credential. ``name`` is unique in the table (tests pin a sample to each)."""

    name: str
    rule: SecretRule
    cites: str  # "gitleaks:<rule id>", "github:<token type>", or "ours: <why there is no published rule>"
    needles: tuple[str, ...]  # the regex runs only on text holding one of these (lower-cased text if folded)
    pattern: re.Pattern[str]
    accept: Callable[[re.Match[str]], bool] = _always  # a post-filter against look-alikes
    folded: bool = False
    secret_group: str | None = None  # redact only this group (the value, not the name it is assigned to)

    def applies(self, haystack: Haystack) -> bool:
        """The text holds one of the needles (an empty tuple: the pattern starts on its own literal,
        which the regex engine finds as fast as a substring search)."""
        return not self.needles or any(haystack.holds(needle, self.folded) for needle in self.needles)

    def spans(self, text: str) -> Iterator[tuple[int, int]]:
        """(start, end) of each accepted match: the secret group's when the rule names one."""
        for match in self.pattern.finditer(text):
            if self.accept(match):
                yield match.span(self.secret_group or 0)


def content_rule(
    name: str,
    family: SecretRule,
    cites: str,
    needles: tuple[str, ...],
    pattern: str,
    *,
    accept: Callable[[re.Match[str]], bool] = _always,
    folded: bool = False,
    secret_group: str | None = None,
) -> ContentRule:
    return ContentRule(name, family, cites, needles, re.compile(pattern), accept, folded, secret_group)


# ---------------------------------------------------------------------------------------------
# where a match may start, and how a value is assigned to a name


def starts_with(literal: str, not_after: str = "A-Za-z0-9_") -> str:
    """``literal`` not preceded by a character of ``not_after``, written literal first (the look-
    behind after it, over it): the regex engine then finds candidates as fast as a substring search,
    where a leading look-behind would be tried at every position."""
    escaped = re.escape(literal)
    return f"{escaped}(?<![{not_after}]{escaped})"


ASSIGN = r"[\"'\]]{0,2}[ \t]{0,4}(?:=>|:=|=|:)[ \t]{0,4}"  # `name = `, `"name": `, `['NAME'] = `, `name =>`


def has_letters_and_digits(match: re.Match[str]) -> bool:
    token = match.group("token")
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


# ---------------------------------------------------------------------------------------------
# post-filters of the token rules


def _mixed_case(match: re.Match[str]) -> bool:
    value = match.group(0)[3:]  # after the lower-case prefix
    return any(c.isupper() for c in value) and any(c.islower() for c in value)


def _random_token(match: re.Match[str]) -> bool:
    """Digits, upper and lower case, and no run of padding (base64 of a certificate's zeros: EAAAAAAA...)."""
    value = match.group(0)
    if "AAAAA" in value:
        return False
    return any(c.isdigit() for c in value) and any(c.isupper() for c in value) and any(c.islower() for c in value)


def _jwt_header(match: re.Match[str]) -> bool:
    """The first segment decodes (base64url) to a JSON header naming its algorithm."""
    header = match.group("header")
    try:
        decoded = base64.urlsafe_b64decode(header + "=" * (-len(header) % 4))
    except (binascii.Error, ValueError):
        return False
    return decoded.startswith(b"{") and b'"alg"' in decoded


def _hex_length(*lengths: int) -> Callable[[re.Match[str]], bool]:
    def accept(match: re.Match[str]) -> bool:
        return len(match.group("secret")) in lengths

    return accept


# ---------------------------------------------------------------------------------------------
# the token rules

TOKEN_RULES: tuple[ContentRule, ...] = (
    content_rule(
        "aws-access-key-id",
        SecretRule.AWS_ACCESS_KEY_ID,
        "gitleaks:aws-access-token",
        (),
        starts_with("A", "A-Za-z0-9") + r"(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[A-Z0-9]{16,24}(?![A-Za-z0-9])",
    ),
    content_rule(
        "aws-secret-access-key",
        SecretRule.AWS_SECRET_KEY,
        "github:aws_secret_access_key",
        ("secret",),
        r"(?i:aws[A-Za-z0-9_.-]{0,20}secret|secret[_.-]?access[_.-]?key)[A-Za-z0-9_.-]{0,20}[\"']?"
        r"[ \t]{0,4}(?:=>|:=|=|:)[ \t]{0,4}[\"']?(?P<secret>[A-Za-z0-9/+]{40,100})(?![A-Za-z0-9/+=])",
        folded=True,
        secret_group="secret",
    ),
    content_rule(
        "github-token",
        SecretRule.GITHUB_TOKEN,
        "gitleaks:github-pat, github-oauth, github-app-token, github-refresh-token",
        (),
        starts_with("gh") + r"[pousr]_[A-Za-z0-9]{36,251}(?![A-Za-z0-9_])",
    ),
    content_rule(
        "github-fine-grained-pat",
        SecretRule.GITHUB_TOKEN,
        "gitleaks:github-fine-grained-pat",
        (),
        starts_with("github_pat_") + r"[A-Za-z0-9_]{22,251}(?![A-Za-z0-9_])",
    ),
    content_rule(
        "gitlab-token",
        SecretRule.GITLAB_TOKEN,
        "gitleaks:gitlab-pat, gitlab-pat-routable, gitlab-ptt, gitlab-deploy-token, gitlab-runner-authentication-"
        "token, gitlab-feed-token, gitlab-cicd-job-token, gitlab-scim-token, gitlab-incoming-mail-token, "
        "gitlab-kubernetes-agent-token, gitlab-oauth-app-secret, gitlab-feature-flag-client-token",
        (),
        starts_with("gl") + r"(?:pat|ptt|dt|rt|ft|cbt|soat|imt|agent|oas|ffct)-[A-Za-z0-9_.-]{20,250}",
    ),
    content_rule(
        "gitlab-runner-registration-token",
        SecretRule.GITLAB_TOKEN,
        "gitleaks:gitlab-rrt",
        (),
        starts_with("GR1348941", "A-Za-z0-9") + r"[A-Za-z0-9_-]{20,250}",
    ),
    content_rule(
        "openrouter-key",
        SecretRule.OPENROUTER_KEY,
        "ours: OpenRouter's sk-or-v1- keys (no published rule)",
        (),
        starts_with("sk-or-v1-", "A-Za-z0-9_-") + r"[A-Za-z0-9]{16,250}",
    ),
    content_rule(
        "anthropic-key",
        SecretRule.ANTHROPIC_KEY,
        "gitleaks:anthropic-api-key, anthropic-admin-api-key",
        (),
        starts_with("sk-ant-", "A-Za-z0-9_-") + r"[A-Za-z0-9_-]{20,250}",
    ),
    content_rule(
        "openai-key",
        SecretRule.OPENAI_KEY,
        "gitleaks:openai-api-key",
        (),
        starts_with("sk-", "A-Za-z0-9_-")
        + r"(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,250}|[A-Za-z0-9]{32,250})",
    ),
    content_rule(
        "slack-token",
        SecretRule.SLACK_TOKEN,
        "gitleaks:slack-bot-token, slack-user-token, slack-app-token, slack-legacy-token, slack-legacy-bot-token, "
        "slack-legacy-workspace-token, slack-config-access-token, slack-config-refresh-token",
        (),
        starts_with("x", "A-Za-z0-9")
        + r"(?:ox[abposre]-[A-Za-z0-9]{1,40}-[A-Za-z0-9-]{8,250}|app-[0-9]{1,3}-[A-Za-z0-9-]{20,250})",
    ),
    content_rule(
        "slack-webhook",
        SecretRule.SLACK_WEBHOOK,
        "gitleaks:slack-webhook-url",
        (),
        r"hooks\.slack\.com/(?:services/T[A-Za-z0-9_]{6,20}/B[A-Za-z0-9_]{6,20}/[A-Za-z0-9_]{16,64}"
        r"|(?:workflows|triggers)/T[A-Za-z0-9_]{6,20}/[A-Za-z0-9_/]{20,160})",
    ),
    content_rule(
        "stripe-key",
        SecretRule.STRIPE_KEY,
        "gitleaks:stripe-access-token",
        ("k_live_", "k_test_", "k_prod_"),
        r"(?<![A-Za-z0-9])[rs]k_(?:live|test|prod)_(?P<token>[A-Za-z0-9]{10,250})(?![A-Za-z0-9_])",
        accept=has_letters_and_digits,
    ),
    content_rule(
        "stripe-webhook-secret",
        SecretRule.STRIPE_KEY,
        "github:stripe_webhook_signing_secret",
        (),
        starts_with("whsec_") + r"[A-Za-z0-9+/]{32,250}",
    ),
    content_rule(
        "google-api-key",
        SecretRule.GOOGLE_API_KEY,
        "gitleaks:gcp-api-key",
        (),
        starts_with("AIza", "A-Za-z0-9_-") + r"[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])",
    ),
    content_rule(
        "google-oauth-client-secret",
        SecretRule.GOOGLE_OAUTH,
        "github:google_oauth_client_secret",
        (),
        starts_with("GOCSPX-", "A-Za-z0-9_-") + r"[A-Za-z0-9_-]{28,64}",
    ),
    content_rule(
        "google-oauth-access-token",
        SecretRule.GOOGLE_OAUTH,
        "github:google_oauth_access_token",
        (),
        starts_with("ya29.", "A-Za-z0-9_-") + r"[A-Za-z0-9_-]{30,2048}",
    ),
    content_rule(
        "npm-token",
        SecretRule.NPM_TOKEN,
        "gitleaks:npm-access-token",
        (),
        starts_with("npm_") + r"[A-Za-z0-9]{36}(?![A-Za-z0-9])",
    ),
    content_rule(
        "pypi-token",
        SecretRule.PYPI_TOKEN,
        "gitleaks:pypi-upload-token (and test.pypi.org's macaroon prefix)",
        (),
        r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,1000}",
    ),
    content_rule(
        "huggingface-token",
        SecretRule.HUGGINGFACE_TOKEN,
        "gitleaks:huggingface-access-token",
        (),
        starts_with("hf_") + r"[A-Za-z0-9]{34,40}(?![A-Za-z0-9_])",
        accept=_mixed_case,
    ),
    content_rule(
        "huggingface-org-token",
        SecretRule.HUGGINGFACE_TOKEN,
        "gitleaks:huggingface-organization-api-token",
        (),
        starts_with("api_org_") + r"[A-Za-z]{34}(?![A-Za-z0-9_])",
    ),
    content_rule(
        "twilio-api-key",
        SecretRule.TWILIO_KEY,
        "gitleaks:twilio-api-key",
        (),
        starts_with("SK", "A-Za-z0-9") + r"[0-9a-fA-F]{32}(?![A-Za-z0-9])",
    ),
    content_rule(
        "sendgrid-api-key",
        SecretRule.SENDGRID_KEY,
        "gitleaks:sendgrid-api-token",
        (),
        starts_with("SG.", "A-Za-z0-9_-") + r"[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}",
    ),
    content_rule(
        "mailgun-api-key",
        SecretRule.MAILGUN_KEY,
        "gitleaks:mailgun-private-api-token",
        (),
        starts_with("key-", "A-Za-z0-9_-") + r"[0-9a-f]{32}(?![A-Za-z0-9])",
    ),
    content_rule(
        "shopify-token",
        SecretRule.SHOPIFY_TOKEN,
        "gitleaks:shopify-access-token, shopify-custom-access-token, shopify-private-app-access-token, "
        "shopify-shared-secret",
        (),
        starts_with("shp") + r"(?:at|ca|pa|ss)_[a-fA-F0-9]{32}(?![A-Za-z0-9])",
    ),
    content_rule(
        "datadog-api-key",
        SecretRule.DATADOG_KEY,
        "gitleaks:datadog-access-token",
        ("datadog", "dd_ap"),
        r"(?<![A-Za-z0-9])(?i:datadog|dd)[_.-]{0,2}(?i:api|app(?:lication)?|client)[_.-]{0,2}(?i:key)"
        + ASSIGN
        + r"[\"']?(?P<secret>[a-f0-9]{32,40})(?![A-Za-z0-9])",
        accept=_hex_length(32, 40),
        folded=True,
        secret_group="secret",
    ),
    content_rule(
        "square-token",
        SecretRule.SQUARE_TOKEN,
        "gitleaks:square-access-token; github:square_production_application_secret",
        ("sq0", "EAAA"),
        r"(?<![A-Za-z0-9_-])(?:sq0atp-|sq0csp-|EAAA)[A-Za-z0-9_-]{22,60}(?![A-Za-z0-9_+/=-])",
        accept=_random_token,
    ),
    content_rule(
        "digitalocean-token",
        SecretRule.DIGITALOCEAN_TOKEN,
        "gitleaks:digitalocean-pat, digitalocean-access-token, digitalocean-refresh-token",
        (),
        starts_with("do") + r"[opr]_v1_[a-f0-9]{64}(?![A-Za-z0-9])",
    ),
    content_rule(
        "heroku-api-key",
        SecretRule.HEROKU_KEY,
        "gitleaks:heroku-api-key",
        ("heroku",),
        r"(?i:heroku)[A-Za-z0-9_.-]{0,20}"
        + ASSIGN
        + r"[\"']?(?P<secret>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})",
        folded=True,
        secret_group="secret",
    ),
    content_rule(
        "heroku-api-key-v2",
        SecretRule.HEROKU_KEY,
        "gitleaks:heroku-api-key-v2",
        (),
        starts_with("HRKU-", "A-Za-z0-9_-") + r"[A-Za-z0-9_-]{36,64}(?![A-Za-z0-9_-])",
    ),
    content_rule(
        "jwt",
        SecretRule.JWT,
        "gitleaks:jwt (signed tokens only)",
        (),
        r"(?P<header>"
        + starts_with("eyJ", "A-Za-z0-9_-")
        + r"[A-Za-z0-9_-]{16,2048})\.ey[A-Za-z0-9_-]{17,16384}\.[A-Za-z0-9_-]{16,1024}",
        accept=_jwt_header,
    ),
)
