"""The content rules keyed by config syntax: credentials in the files real repositories commit (docker,
npm and kube configs, service-account JSON, storage connection strings), passwords (config files,
XML, .pgpass lines, connection strings, URLs) and framework secret keys. Same model and the same
linear-time discipline as `secret_rules` (see there); `secret_scan` runs both tables.
"""

from __future__ import annotations

import base64
import binascii
import re

from cluster.ingest.secret_rules import ASSIGN, ContentRule, SecretRule, content_rule, has_letters_and_digits

# ---------------------------------------------------------------------------------------------
# post-filters

# Passwords that are placeholders, templates or masks, not credentials.
_PLACEHOLDER_PASSWORDS = frozenset(
    {"password", "passwd", "pass", "pwd", "secret", "token", "changeme", "example", "redacted", "your-password"}
)
_TEMPLATE_STARTS = ("$", "{", "<", "%", "*", "(", "[")  # "[" also starts our own "[redacted:<rule>]"
# Words that mark a framework secret as a placeholder ("change-me", "your-secret-key-here", "test").
_PLACEHOLDER_WORDS = ("change", "your", "example", "placeholder", "replace", "dummy", "xxxx", "test", "insecure-key")
_IDENTIFIER_PATH = re.compile(r"[A-Za-z_.]{1,256}")  # a variable or attribute path without digits
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,255}")
_WORD_SEPARATORS = re.compile(r"[-_. ]")
_DESCRIPTIVE_WORDS = ("passw", "example")  # a value that names what it is is an example or a label


def _real_password(match: re.Match[str]) -> bool:
    password = match.group("password")
    if password.startswith(_TEMPLATE_STARTS) or password.lower() in _PLACEHOLDER_PASSWORDS:
        return False
    if len(set(password)) == 1 or not any(c.isalnum() for c in password):
        return False  # xxxx, ****, ...
    return not (password.isdigit() and len(password) <= 5)  # host:port@, not a password


def _assigned_password(match: re.Match[str]) -> bool:
    """A real password, not a variable (``password = settings.db_password``), a constant's name
    (``FORCE_CHANGE_PASSWORD = "FORCE_CHANGE_PASSWORD"``) or a description ("no-password-required")."""
    password = match.group("password")
    if not match.group("quote") and _IDENTIFIER_PATH.fullmatch(password):
        return False
    if _ENV_NAME.fullmatch(password) or any(word in password.lower() for word in _DESCRIPTIVE_WORDS):
        return False
    return _real_password(match)


def _config_token(match: re.Match[str]) -> bool:
    value = match.group("secret")
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value) and len(set(value)) > 4


def _framework_secret(match: re.Match[str]) -> bool:
    value = match.group("secret")
    lowered = value.lower()
    if value.startswith(_TEMPLATE_STARTS) or _ENV_NAME.fullmatch(value) or len(set(value)) < 6:
        return False  # a template, an environment variable's name, "aaaaaaaaaaaa"
    if _WORD_SEPARATORS.sub("", value).isalpha():
        return False  # words ("aws-secret-access-key", "super secret key"): a name or a phrase, not a key
    return not any(word in lowered for word in _PLACEHOLDER_WORDS)


def _b64decode(value: str) -> bytes | None:
    try:
        return base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def _basic_auth(match: re.Match[str]) -> bool:
    """Docker's and npm's ``auth``: base64 of ``user:password``."""
    decoded = _b64decode(match.group("secret").rstrip("="))
    return decoded is not None and b":" in decoded.strip(b":") and decoded.isascii()


def _printable_base64(match: re.Match[str]) -> bool:
    decoded = _b64decode(match.group("secret").rstrip("="))
    return decoded is not None and len(decoded) >= 4 and decoded.isascii() and decoded.decode().isprintable()


def _unarmoured_key(match: re.Match[str]) -> bool:
    value = match.group("secret")
    return not value.startswith(("-----", *_TEMPLATE_STARTS)) and " " not in value


def _sas_signature(match: re.Match[str]) -> bool:
    """An Azure SAS ``sig=``: a base64 HMAC ("=" or "%3D" at its end) in a URL that names ``sv=``."""
    value = match.group("secret")
    if not (value.endswith("=") or value.upper().endswith("%3D")):
        return False
    before = match.string[max(0, match.start() - 1000) : match.start()]
    return "sv=" in before or "sv=" in match.string[match.end() : match.end() + 1000]


# ---------------------------------------------------------------------------------------------
# the rules

_CONFIG_FILE_RULES: tuple[ContentRule, ...] = (
    content_rule(
        "gcp-service-account-private-key",
        SecretRule.GCP_SERVICE_ACCOUNT,
        "github:google_cloud_private_key_id (the key it names; an armoured PEM value is the private-key scan's)",
        (),
        r"\"private_key\"[ \t]{0,4}:[ \t]{0,4}\"(?P<secret>[^\"\n]{64,16384})\"",
        accept=_unarmoured_key,
        secret_group="secret",
    ),
    content_rule(
        "gcp-service-account-key-id",
        SecretRule.GCP_SERVICE_ACCOUNT,
        "github:google_cloud_private_key_id",
        (),
        r"\"private_key_id\"[ \t]{0,4}:[ \t]{0,4}\"(?P<secret>[0-9a-f]{40})\"",
        secret_group="secret",
    ),
    content_rule(
        "azure-storage-account-key",
        SecretRule.AZURE_STORAGE_KEY,
        "github:azure_storage_account_key, azure_service_bus_shared_access_key (connection strings)",
        ("AccountKey", "SharedAccessKey"),
        r"(?:AccountKey|SharedAccessKey)[ \t]{0,2}=[ \t]{0,2}(?P<secret>[A-Za-z0-9+/]{40,100}={0,2})",
        secret_group="secret",
    ),
    content_rule(
        "azure-sas-token",
        SecretRule.AZURE_SAS_TOKEN,
        "github:azure_sas_token",
        ("sig=",),
        r"[?&;]sig=(?P<secret>[A-Za-z0-9%+/]{30,200}={0,2})",
        accept=_sas_signature,
        secret_group="secret",
    ),
    content_rule(
        "docker-config-auth",
        SecretRule.REGISTRY_AUTH,
        "ours: Docker config.json / .dockercfg auths.<registry>.auth, base64 user:password",
        (),
        r"\"auth\"[ \t]{0,4}:[ \t]{0,4}\"(?P<secret>[A-Za-z0-9+/]{8,4096}={0,2})\"",
        accept=_basic_auth,
        secret_group="secret",
    ),
    content_rule(
        "npmrc-auth-token",
        SecretRule.REGISTRY_AUTH,
        "ours: .npmrc _authToken, .yarnrc.yml npmAuthToken (any token form, legacy UUIDs included)",
        ("authtoken",),
        r"(?i:_authToken|npmAuthToken)[\"']?[ \t]{0,4}[=:][ \t]{0,4}[\"']?(?P<secret>[A-Za-z0-9._~+/=-]{8,1024})",
        folded=True,
        secret_group="secret",
    ),
    content_rule(
        "npmrc-auth",
        SecretRule.REGISTRY_AUTH,
        "ours: .npmrc _auth, base64 user:password",
        ("_auth",),
        r"(?m)(?:^|(?<=:))_auth[ \t]{0,4}=[ \t]{0,4}[\"']?(?P<secret>[A-Za-z0-9+/]{8,1024}={0,2})",
        accept=_basic_auth,
        secret_group="secret",
    ),
    content_rule(
        "npmrc-password",
        SecretRule.REGISTRY_AUTH,
        "ours: .npmrc //registry/:_password, a base64 password",
        (),
        r":_password[ \t]{0,4}=[ \t]{0,4}[\"']?(?P<secret>[A-Za-z0-9+/]{4,1024}={0,2})",
        accept=_printable_base64,
        secret_group="secret",
    ),
    content_rule(
        "kubeconfig-client-key",
        SecretRule.KUBECONFIG_CREDENTIAL,
        "ours: kubeconfig users[].user.client-key-data (a base64 private key)",
        (),
        r"client-key-data[\"']?[ \t]{0,4}:[ \t]{0,4}[\"']?(?P<secret>[A-Za-z0-9+/]{16,16384}={0,2})",
        secret_group="secret",
    ),
    content_rule(
        "yaml-token",
        SecretRule.CONFIG_TOKEN,
        "ours: kubeconfig users[].user.token (and id-token, refresh-token), any YAML `token:` holding one",
        ("token:",),
        r"(?m)^[ \t]{0,40}(?:id-|refresh-)?token:[ \t]{1,4}(?P<quote>[\"']?)"
        r"(?P<secret>[A-Za-z0-9._~+/:=-]{16,4096})(?P=quote)[ \t]{0,8}$",
        accept=_config_token,
        secret_group="secret",
    ),
)

_PASSWORD_RULES: tuple[ContentRule, ...] = (
    # database.yml, .my.cnf, .pypirc, application.properties, docker-compose environments, JSON, TOML:
    # a line that assigns a password-named key a value (a variable, a template or a placeholder is not one)
    content_rule(
        "password-assignment",
        SecretRule.PASSWORD,
        "gitleaks:generic-api-key (its passw(or)d keyword only, anchored to a config line)",
        ("passw",),
        r"(?im)^[ \t]{0,40}(?:-[ \t]{1,4}|export[ \t]{1,4})?[\"']?[A-Za-z0-9_.-]{0,40}passw(?:or)?d[\"']?"
        r"[ \t]{0,4}[:=][ \t]{0,4}(?P<quote>[\"']?)(?P<password>[^\s\"'#;,()\[\]{}<>]{4,256})(?P=quote)"
        r"[ \t]{0,8}[,;]?[ \t]{0,8}(?:$|#)",
        accept=_assigned_password,
        folded=True,
        secret_group="password",
    ),
    content_rule(
        "xml-password",
        SecretRule.PASSWORD,
        "ours: Maven settings.xml servers/server/password and passphrase",
        ("<password>", "<passphrase>"),
        r"<(?P<tag>password|passphrase)>[ \t]{0,4}(?P<password>[^<\s]{1,256})[ \t]{0,4}</(?P=tag)>",
        accept=_real_password,
        secret_group="password",
    ),
    content_rule(
        "nuget-config-password",
        SecretRule.PASSWORD,
        "gitleaks:nuget-config-password",
        (),
        r"<add key=\"(?:ClearText)?Password\"[ \t]{1,4}value=\"(?P<password>[^\"\n]{1,256})\"",
        accept=_real_password,
        secret_group="password",
    ),
    content_rule(
        "pgpass-line",
        SecretRule.PASSWORD,
        "ours: libpq's .pgpass line host:port:database:user:password, in a text that names .pgpass",
        ("pgpass",),
        r"(?<![^\s\"'>])[A-Za-z0-9_.*-]{1,253}:(?:[0-9]{1,5}|\*):[^\s:\"']{1,63}:[^\s:\"']{1,63}:"
        r"(?P<password>[^\s:\"']{1,256})",
        accept=_real_password,
        folded=True,
        secret_group="password",
    ),
    content_rule(
        "connection-string-password",
        SecretRule.PASSWORD,
        "github:azure_sql_connection_string (ADO.NET/ODBC Key=Value; strings)",
        ("password", "pwd"),
        r";[ \t]{0,4}(?i:password|pwd)[ \t]{0,4}=[ \t]{0,4}(?P<password>[^;'\"\s]{1,256})",
        accept=_real_password,
        folded=True,
        secret_group="password",
    ),
    content_rule(
        "url-query-password",
        SecretRule.PASSWORD,
        "github:mysql_connection_string (JDBC and URL ?user=..&password=..)",
        ("password=", "passwd=", "pwd="),
        r"[?&](?i:password|passwd|pwd)=(?P<password>[^&\s'\"#<>]{1,256})",
        accept=_real_password,
        folded=True,
        secret_group="password",
    ),
    # scheme://user:password@host (x-access-token:..., oauth2:..., postgres://u:p@...). Anchored on
    # "://", so git@github.com:org/repo and user@host never match.
    content_rule(
        "url-user-password",
        SecretRule.URL_CREDENTIALS,
        "github:postgres_connection_string, mysql_connection_string, mongodb_connection_string",
        (),
        r"://[^\s/?#@:'\"<>\\\[\]]{0,256}:(?P<password>[^\s/?#@'\"<>\\\[\]]{1,256})@(?=[A-Za-z0-9\[])",
        accept=_real_password,
        secret_group="password",
    ),
    # https://<token>@host: a long user part without a password, as `git clone https://TOKEN@github.com/...`
    content_rule(
        "url-token",
        SecretRule.URL_CREDENTIALS,
        "ours: a token as a URL's user part (git clone https://TOKEN@host/...)",
        (),
        r"://(?P<token>[A-Za-z0-9_.~+-]{20,256})@(?=[A-Za-z0-9\[])",
        accept=has_letters_and_digits,
        secret_group="token",
    ),
)

_FRAMEWORK_RULES: tuple[ContentRule, ...] = (
    content_rule(
        "django-flask-secret-key",
        SecretRule.FRAMEWORK_SECRET_KEY,
        "ours: Django settings.SECRET_KEY, Flask app.secret_key / config['SECRET_KEY'] (no published rule)",
        ("secret_key",),
        r"(?i:secret_key)[\"'\]]{0,2}[ \t]{0,4}(?::[ \t]{0,4}(?:str|bytes)[ \t]{0,4})?(?:=>|:=|=|:)[ \t]{0,4}[bru]?"
        r"(?P<quote>[\"'])(?P<secret>[^\"'\n\\]{12,512})(?P=quote)",
        accept=_framework_secret,
        folded=True,
        secret_group="secret",
    ),
    content_rule(
        "rails-secret-key-base",
        SecretRule.FRAMEWORK_SECRET_KEY,
        "ours: Rails secret_key_base (secrets.yml, SECRET_KEY_BASE)",
        ("secret_key_base",),
        r"(?i:secret_key_base)" + ASSIGN + r"[\"']?(?P<secret>[0-9a-f]{64,256})(?![A-Za-z0-9])",
        folded=True,
        secret_group="secret",
    ),
    content_rule(
        "laravel-app-key",
        SecretRule.FRAMEWORK_SECRET_KEY,
        "ours: Laravel APP_KEY=base64:... (.env, docker-compose, env('APP_KEY', 'base64:...'))",
        (),
        r"APP_KEY[\"']?[ \t]{0,4}(?:=>|=|:|,)[ \t]{0,4}[\"']?base64:(?P<secret>[A-Za-z0-9+/]{32,88}={0,2})",
        secret_group="secret",
    ),
)

CONFIG_RULES: tuple[ContentRule, ...] = _CONFIG_FILE_RULES + _PASSWORD_RULES + _FRAMEWORK_RULES
