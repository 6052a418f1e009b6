"""Real-shaped credentials, assembled at run time so no committed file holds one (the repository indexes
itself, and its own scan must come back empty): every prefix is split ("sk" + "_live_") and every
body comes from a seeded random generator, so a run is reproducible.

    RULE_SAMPLES   {content rule name: [(text, the credential in it)]}
    FORM_SAMPLES   {form: Form(family, text, secret, rule value)}: whole files as repositories commit them

tests/unit/ingest/test_secret_rules.py pins every rule of the table to its samples;
tests/unit/ingest/test_secret_forms.py checks each form is found and redacted.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

HEX = "0123456789abcdef"
SLACK_HOOKS = "".join(("hooks.", "slack", ".com/"))
ALNUM = string.ascii_letters + string.digits
BASE64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


class Bodies:
    """Random bodies from one seed: each sample its own stream, so adding a sample changes no other."""

    def __init__(self, seed: str) -> None:
        self._rng = random.Random(seed)

    def of(self, n: int, alphabet: str = ALNUM) -> str:
        return "".join(self._rng.choice(alphabet) for _ in range(n))

    def mixed(self, n: int) -> str:
        """Letters of both cases and digits, as real keys have (a placeholder has not)."""
        while True:
            value = self.of(n)
            if any(c.isdigit() for c in value) and any(c.isupper() for c in value) and any(c.islower() for c in value):
                return value

    def uuid(self) -> str:
        return "-".join(self.of(n, HEX) for n in (8, 4, 4, 4, 12))


def b64(data: str) -> str:
    return base64.b64encode(data.encode()).decode()


def jwt(r: Bodies) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    header = part({"alg": "RS256", "kid": r.of(12)})
    payload = part({"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:default:deployer"})
    return f"{header}.{payload}.{r.of(86, URLSAFE)}"


def pem_key_base64(r: Bodies) -> str:
    kind = "RSA PRIVATE" + " KEY"
    return b64(f"-----BEGIN {kind}-----\n{r.of(64, BASE64)}\n{r.of(64, BASE64)}\n-----END {kind}-----\n")


def sas_signature(r: Bodies) -> str:
    return r.of(43, BASE64).replace("+", "%2B").replace("/", "%2F") + "%3D"


Build = Callable[[Bodies], tuple[str, str]]


def _keyed(template: str, secret: str) -> tuple[str, str]:
    return template.replace("{secret}", secret), secret


# rule name -> builders of (text, secret); "{secret}" in a template is where the secret goes
_RULE_BUILDERS: dict[str, list[Build]] = {
    "aws-access-key-id": [
        lambda r: _keyed("aws_access_key_id = {secret}", "AK" + "IA" + r.of(16, string.ascii_uppercase))
    ],
    "aws-secret-access-key": [lambda r: _keyed("aws_secret_access_key = {secret}", r.mixed(40))],
    "github-token": [lambda r: _keyed("GITHUB_TOKEN={secret}", "gh" + "p_" + r.mixed(36))],
    "github-fine-grained-pat": [
        lambda r: _keyed("token: {secret}", "github" + "_pat_11" + r.mixed(20) + "_" + r.mixed(59))
    ],
    "gitlab-token": [
        lambda r: _keyed("GITLAB_TOKEN={secret}", "gl" + "pat-" + r.mixed(20)),
        lambda r: _keyed("client_secret: {secret}", "gl" + "oas-" + r.mixed(64)),
        lambda r: _keyed("agent_token = '{secret}'", "gl" + "agent-" + r.mixed(50)),
    ],
    "gitlab-runner-registration-token": [
        lambda r: _keyed("--registration-token {secret}", "GR134" + "8941" + r.mixed(20))
    ],
    "openrouter-key": [lambda r: _keyed("OPENROUTER_API_KEY={secret}", "sk-" + "or-v1-" + r.of(64, HEX))],
    "anthropic-key": [lambda r: _keyed("ANTHROPIC_API_KEY={secret}", "sk-" + "ant-api03-" + r.mixed(93) + "AA")],
    "openai-key": [
        lambda r: _keyed("api_key = '{secret}'", "sk-" + "proj-" + r.mixed(74) + "T3Blbk" + "FJ" + r.mixed(74)),
        lambda r: _keyed("OPENAI_API_KEY={secret}", "sk-" + "None-" + r.mixed(48)),
    ],
    "slack-token": [
        lambda r: _keyed(
            "SLACK_BOT_TOKEN={secret}",
            "xo" + "xb-" + r.of(12, string.digits) + "-" + r.of(13, string.digits) + "-" + r.mixed(24),
        ),
        lambda r: _keyed("refresh_token: {secret}", "xo" + "xe-1-" + r.mixed(146)),
    ],
    "slack-webhook": [
        lambda r: _keyed(
            "url = 'https://{secret}'", SLACK_HOOKS + "services/T" + r.mixed(8) + "/B" + r.mixed(8) + "/" + r.mixed(24)
        ),
        lambda r: _keyed(
            "webhook: https://{secret}",
            SLACK_HOOKS
            + "workflows/T"
            + r.mixed(8)
            + "/A"
            + r.mixed(8)
            + "/"
            + r.of(18, string.digits)
            + "/"
            + r.mixed(32),
        ),
    ],
    "stripe-key": [
        lambda r: _keyed("stripe.api_key = '{secret}'", "sk" + "_live_" + r.mixed(24)),
        lambda r: _keyed("STRIPE_KEY={secret}", "rk" + "_test_" + r.mixed(16)),
    ],
    "stripe-webhook-secret": [lambda r: _keyed("STRIPE_WEBHOOK_SECRET={secret}", "wh" + "sec_" + r.mixed(32))],
    "google-api-key": [lambda r: _keyed('apiKey: "{secret}"', "AI" + "za" + "Sy" + r.mixed(33))],
    "google-oauth-client-secret": [lambda r: _keyed('"client_secret": "{secret}"', "GOC" + "SPX-" + r.mixed(28))],
    "google-oauth-access-token": [lambda r: _keyed("Authorization: Bearer {secret}", "ya" + "29." + r.mixed(120))],
    "npm-token": [lambda r: _keyed("NPM_TOKEN={secret}", "np" + "m_" + r.mixed(36))],
    "pypi-token": [
        lambda r: _keyed("password = {secret}", "pypi-" + "AgEIcHlwaS5vcmc" + r.mixed(70)),
        lambda r: _keyed("password = {secret}", "pypi-" + "AgENdGVzdC5weXBpLm9yZw" + r.mixed(70)),
    ],
    "huggingface-token": [lambda r: _keyed("HF_TOKEN={secret}", "h" + "f_" + r.mixed(34))],
    "huggingface-org-token": [
        lambda r: _keyed("HF_ORG_TOKEN={secret}", "api" + "_org_" + r.of(34, string.ascii_letters))
    ],
    "twilio-api-key": [lambda r: _keyed("TWILIO_API_KEY={secret}", "S" + "K" + r.of(32, HEX))],
    "sendgrid-api-key": [lambda r: _keyed("SENDGRID_API_KEY={secret}", "S" + "G." + r.mixed(22) + "." + r.mixed(43))],
    "mailgun-api-key": [lambda r: _keyed("MAILGUN_API_KEY={secret}", "ke" + "y-" + r.of(32, HEX))],
    "shopify-token": [lambda r: _keyed("SHOPIFY_ACCESS_TOKEN={secret}", "shp" + "at_" + r.of(32, HEX))],
    "datadog-api-key": [
        lambda r: _keyed("DD_API_KEY={secret}", r.of(32, HEX)),
        lambda r: _keyed("datadog_app_key: {secret}", r.of(40, HEX)),
    ],
    "square-token": [
        lambda r: _keyed("SQUARE_ACCESS_TOKEN={secret}", "sq0" + "atp-" + r.mixed(22)),
        lambda r: _keyed("square.access_token = '{secret}'", "EA" + "AA" + r.mixed(60)),
    ],
    "digitalocean-token": [lambda r: _keyed("DIGITALOCEAN_TOKEN={secret}", "do" + "p_v1_" + r.of(64, HEX))],
    "heroku-api-key": [lambda r: _keyed("HEROKU_API_KEY={secret}", r.uuid())],
    "heroku-api-key-v2": [lambda r: _keyed("HEROKU_API_KEY={secret}", "HR" + "KU-AA" + r.mixed(58))],
    "jwt": [lambda r: _keyed("Authorization: Bearer {secret}", jwt(r))],
    "gcp-service-account-private-key": [lambda r: _keyed('  "private_key": "{secret}",', "MIIEv" + r.of(600, BASE64))],
    "gcp-service-account-key-id": [lambda r: _keyed('  "private_key_id": "{secret}",', r.of(40, HEX))],
    "azure-storage-account-key": [
        lambda r: _keyed(
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={secret};EndpointSuffix=core.windows.net",
            r.of(86, BASE64) + "==",
        )
    ],
    "azure-sas-token": [
        lambda r: _keyed(
            "https://acme.blob.core.windows.net/c/b.txt?sv=2022-11-02&ss=b&sp=r&sig={secret}", sas_signature(r)
        )
    ],
    "docker-config-auth": [
        lambda r: _keyed('{"auths": {"registry.example.com": {"auth": "{secret}"}}}', b64("ci:" + r.mixed(16)))
    ],
    "npmrc-auth-token": [
        lambda r: _keyed("//registry.npmjs.org/:_authToken={secret}", r.uuid()),
        lambda r: _keyed('npmAuthToken: "{secret}"', r.mixed(36)),
    ],
    "npmrc-auth": [lambda r: _keyed("_auth={secret}", b64("ci:" + r.mixed(12)))],
    "npmrc-password": [lambda r: _keyed("//npm.pkg.example.com/:_password={secret}", b64(r.mixed(14)))],
    "kubeconfig-client-key": [lambda r: _keyed("    client-key-data: {secret}", pem_key_base64(r))],
    "yaml-token": [lambda r: _keyed("users:\n- name: admin\n  user:\n    token: {secret}\n", r.mixed(40))],
    "password-assignment": [
        lambda r: _keyed("[client]\nuser=app\npassword={secret}\n", r.mixed(14)),
        lambda r: _keyed("production:\n  adapter: postgresql\n  password: {secret}\n", r.mixed(14)),
        lambda r: _keyed('{\n  "db_password": "{secret}",\n}', r.mixed(14)),
    ],
    "xml-password": [
        lambda r: _keyed("<server>\n  <id>nexus</id>\n  <password>{secret}</password>\n</server>", r.mixed(14))
    ],
    "nuget-config-password": [lambda r: _keyed('<add key="ClearTextPassword" value="{secret}" />', r.mixed(14))],
    "pgpass-line": [lambda r: _keyed('echo "db.internal:5432:app:app:{secret}" >> ~/.pgpass', r.mixed(14))],
    "connection-string-password": [
        lambda r: _keyed('"Server=tcp:db.example.com,1433;Database=app;User ID=sa;Password={secret};"', r.mixed(14))
    ],
    "url-query-password": [
        lambda r: _keyed("jdbc:mysql://db.example.com:3306/app?user=app&password={secret}", r.mixed(14))
    ],
    "url-user-password": [lambda r: _keyed("DATABASE_URL=postgres://app:{secret}@db.internal:5432/app", r.mixed(14))],
    "url-token": [lambda r: _keyed("git clone https://{secret}@github.com/org/repo.git", r.mixed(24))],
    "django-flask-secret-key": [
        lambda r: _keyed(
            "SECRET_KEY = '{secret}'",
            "django-insecure-" + r.of(50, string.ascii_lowercase + string.digits + "!#%^&*-_=+"),
        ),
        lambda r: _keyed('app.config["SECRET_KEY"] = "{secret}"', r.of(48, HEX)),
    ],
    "rails-secret-key-base": [lambda r: _keyed("production:\n  secret_key_base: {secret}\n", r.of(128, HEX))],
    "laravel-app-key": [lambda r: _keyed("APP_KEY=base64:{secret}", b64(r.mixed(32)))],
}

RULE_SAMPLES: dict[str, list[tuple[str, str]]] = {
    name: [build(Bodies(f"{name}/{i}")) for i, build in enumerate(builders)]
    for name, builders in _RULE_BUILDERS.items()
}


@dataclass(frozen=True)
class Form:
    """A credential as a repository commits it: the issue's family, the whole text, the credential
    (which must not survive redaction) and the rule value a finding carries."""

    family: str
    text: str
    secret: str
    rule: str


def _form(family: str, rule: str, template: str, secret: str) -> Form:
    return Form(family, template.replace("{secret}", secret), secret, rule)


def _config_file_forms(r: Bodies) -> dict[str, Form]:
    kubeconfig = (
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://10.0.0.1:6443\n  name: prod\n"
        "users:\n- name: admin\n  user:\n    client-certificate-data: LS0tLS1CRUdJTiBDRVJU\n"
    )
    return {
        "kubeconfig client-key-data": _form(
            "config", "kubeconfig-credential", kubeconfig + "    client-key-data: {secret}\n", pem_key_base64(r)
        ),
        "kubeconfig token": _form("config", "config-token", kubeconfig + "    token: {secret}\n", r.mixed(40)),
        ".dockercfg auth": _form(
            "config",
            "registry-auth",
            '{"registry.example.com": {"auth": "{secret}", "email": "ci@example.com"}}',
            b64("deploy:" + r.mixed(16)),
        ),
        "docker config.json auth": _form(
            "config",
            "registry-auth",
            '{\n  "auths": {\n    "ghcr.io": {\n      "auth": "{secret}"\n    }\n  }\n}\n',
            b64("bot:" + r.mixed(20)),
        ),
        ".npmrc _authToken": _form(
            "config",
            "registry-auth",
            "registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken={secret}\n",
            r.uuid(),
        ),
        ".npmrc _auth": _form(
            "config",
            "registry-auth",
            "always-auth=true\n_auth={secret}\nemail=ci@example.com\n",
            b64("ci:" + r.mixed(12)),
        ),
        ".pypirc password": _form(
            "config",
            "password",
            "[distutils]\nindex-servers =\n    internal\n\n[internal]\n"
            "repository = https://pypi.example.com/\nusername = deploy\npassword = {secret}\n",
            r.mixed(14),
        ),
        "Maven settings.xml": _form(
            "config",
            "password",
            "<settings>\n  <servers>\n    <server>\n      <id>nexus</id>\n"
            "      <username>deploy</username>\n      <password>{secret}</password>\n    </server>\n"
            "  </servers>\n</settings>\n",
            r.mixed(14),
        ),
        "NuGet.Config": _form(
            "config",
            "password",
            '<packageSourceCredentials>\n  <feed>\n    <add key="Username" value="ci" />\n'
            '    <add key="ClearTextPassword" value="{secret}" />\n  </feed>\n</packageSourceCredentials>\n',
            r.mixed(14),
        ),
    }


def _database_forms(r: Bodies) -> dict[str, Form]:
    return {
        ".pgpass line": _form(
            "database",
            "password",
            "cat > ~/.pgpass <<EOF\ndb.internal:5432:app:app:{secret}\nEOF\nchmod 600 ~/.pgpass\n",
            r.mixed(14),
        ),
        ".my.cnf": _form("database", "password", "[client]\nuser=root\npassword={secret}\nhost=db\n", r.mixed(14)),
        "database.yml": _form(
            "database",
            "password",
            "production:\n  adapter: postgresql\n  database: app\n  username: app\n"
            "  password: {secret}\n  host: db.internal\n",
            r.mixed(14),
        ),
        "application.properties": _form(
            "database",
            "password",
            "spring.datasource.url=jdbc:postgresql://db:5432/app\n"
            "spring.datasource.username=app\nspring.datasource.password={secret}\n",
            r.mixed(14),
        ),
        "JDBC URL": _form(
            "database",
            "password",
            'url = "jdbc:mysql://db.example.com:3306/app?user=app&password={secret}&useSSL=true"\n',
            r.mixed(14),
        ),
        "ADO.NET string": _form(
            "database",
            "password",
            '"ConnectionStrings": {"Default": "Server=db;Database=app;User Id=sa;Password={secret};"}',
            r.mixed(14),
        ),
    }


def _framework_forms(r: Bodies) -> dict[str, Form]:
    django_key = "django-insecure-" + r.of(50, string.ascii_lowercase + string.digits + "!#%^&*-_=+")
    return {
        "Django settings.py": _form(
            "framework",
            "framework-secret-key",
            "from pathlib import Path\n\n# SECURITY WARNING: keep it secret\nSECRET_KEY = '{secret}'\n\nDEBUG = True\n",
            django_key,
        ),
        "Flask app.secret_key": _form(
            "framework", "framework-secret-key", "app = Flask(__name__)\napp.secret_key = b'{secret}'\n", r.of(32, HEX)
        ),
        "Flask config": _form(
            "framework", "framework-secret-key", 'app.config["SECRET_KEY"] = "{secret}"\n', r.mixed(32)
        ),
        "Rails secrets.yml": _form(
            "framework", "framework-secret-key", "production:\n  secret_key_base: {secret}\n", r.of(128, HEX)
        ),
        "Laravel docker-compose": _form(
            "framework",
            "framework-secret-key",
            "services:\n  app:\n    environment:\n      APP_KEY: base64:{secret}\n",
            b64(r.mixed(32)),
        ),
        "Laravel config/app.php": _form(
            "framework", "framework-secret-key", "'key' => env('APP_KEY', 'base64:{secret}'),\n", b64(r.mixed(32))
        ),
    }


def _jwt_and_storage_forms(r: Bodies) -> dict[str, Form]:
    storage = "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={secret};EndpointSuffix=core.windows.net"
    return {
        "JWT bearer header": _form(
            "jwt", "jwt", 'curl -H "Authorization: Bearer {secret}" https://api.example.com/\n', jwt(r)
        ),
        "JWT service-account token": _form(
            "jwt", "jwt", "users:\n- name: deployer\n  user:\n    token: {secret}\n", jwt(r)
        ),
        "Azure storage connection string": _form(
            "storage", "azure-storage-key", '{"AzureWebJobsStorage": "' + storage + '"}', r.of(86, BASE64) + "=="
        ),
        "Azure SAS URL": _form(
            "storage",
            "azure-sas-token",
            "BLOB=https://acme.blob.core.windows.net/backups/db.gz?sv=2022-11-02&ss=b&srt=o&sp=r"
            "&se=2030-01-01T00:00:00Z&spr=https&sig={secret}\n",
            sas_signature(r),
        ),
    }


def _saas_forms(r: Bodies) -> dict[str, Form]:
    def line(rule: str, template: str, secret: str) -> Form:
        return _form("saas", rule, template, secret)

    return {
        "Stripe test key": line("stripe-key", "Stripe.api_key = '{secret}'\n", "sk" + "_test_" + r.mixed(16)),
        "Slack refresh token": line("slack-token", "SLACK_REFRESH={secret}\n", "xo" + "xe-1-" + r.mixed(146)),
        "Slack workflow webhook": line(
            "slack-webhook",
            "hook: https://{secret}\n",
            SLACK_HOOKS
            + "workflows/T"
            + r.mixed(8)
            + "/A"
            + r.mixed(8)
            + "/"
            + r.of(18, string.digits)
            + "/"
            + r.mixed(32),
        ),
        "Twilio API key": line("twilio-api-key", "TWILIO_API_KEY={secret}\n", "S" + "K" + r.of(32, HEX)),
        "SendGrid key": line(
            "sendgrid-api-key", "sg.api_key = '{secret}'\n", "S" + "G." + r.mixed(22) + "." + r.mixed(43)
        ),
        "Mailgun key": line("mailgun-api-key", "MAILGUN_API_KEY={secret}\n", "ke" + "y-" + r.of(32, HEX)),
        "GitLab OAuth secret": line("gitlab-token", "secret: {secret}\n", "gl" + "oas-" + r.mixed(64)),
        "GitLab runner registration": line("gitlab-token", "token = '{secret}'\n", "GR134" + "8941" + r.mixed(20)),
        "Yarn npmAuthToken": line("registry-auth", 'npmAuthToken: "{secret}"\n', r.mixed(36)),
        "TestPyPI token": line("pypi-token", "password = {secret}\n", "pypi-" + "AgENdGVzdC5weXBpLm9yZw" + r.mixed(70)),
        "OpenAI sk-None key": line("openai-key", "OPENAI_API_KEY={secret}\n", "sk-" + "None-" + r.mixed(48)),
        "HuggingFace org token": line(
            "huggingface-token", "token = '{secret}'\n", "api" + "_org_" + r.of(34, string.ascii_letters)
        ),
        "Shopify token": line("shopify-token", "SHOPIFY_TOKEN={secret}\n", "shp" + "at_" + r.of(32, HEX)),
        "Datadog API key": line("datadog-api-key", "DD_API_KEY={secret}\n", r.of(32, HEX)),
        "Square token": line("square-token", "SQUARE_TOKEN={secret}\n", "sq0" + "atp-" + r.mixed(22)),
        "DigitalOcean token": line("digitalocean-token", 'do_token = "{secret}"\n', "do" + "p_v1_" + r.of(64, HEX)),
        "Heroku API key": line("heroku-api-key", "HEROKU_API_KEY={secret}\n", r.uuid()),
        "Heroku v2 key": line("heroku-api-key", "HEROKU_API_KEY={secret}\n", "HR" + "KU-AA" + r.mixed(58)),
        "Google OAuth client secret": line(
            "google-oauth-secret", '"client_secret": "{secret}"', "GOC" + "SPX-" + r.mixed(28)
        ),
        "GCP service-account key id": line(
            "gcp-service-account-key",
            '{\n  "type": "service_account",\n  "private_key_id": "{secret}",\n}',
            r.of(40, HEX),
        ),
        "GCP service-account bare key": line(
            "gcp-service-account-key",
            '{\n  "type": "service_account",\n  "private_key": "{secret}",\n}',
            "MIIEv" + r.of(600, BASE64),
        ),
    }


def _concatenation_forms(r: Bodies) -> dict[str, Form]:
    def joined(rule: str, template: str, pieces: list[str]) -> Form:
        text = template.format(*pieces)
        return Form("concatenation", text, max(pieces, key=len), rule)

    return {
        "Python +": joined("stripe-key", 'key = "{}" + "{}" + "{}"\nother = 1\n', ["sk", "_live_", r.mixed(24)]),
        "JavaScript +": joined(
            "aws-access-key-id", "const id = '{}' + '{}';\n", ["AK" + "IA", r.of(16, string.ascii_uppercase)]
        ),
        "PHP .": joined("github-token", "$t = '{}' . '{}';\n", ["gh" + "p_", r.mixed(36)]),
        "Go + over two lines": joined(
            "slack-token",
            'token := "{}" +\n\t"{}"\nx := 2\n',
            ["xo" + "xb-" + r.of(12, string.digits) + "-", r.of(13, string.digits) + "-" + r.mixed(24)],
        ),
        "Python implicit": joined("gitlab-token", 'TOKEN = ("{}" "{}")\n', ["gl" + "pat-", r.mixed(20)]),
        "Lua ..": joined("huggingface-token", 'local t = "{}" .. "{}"\n', ["h" + "f_", r.mixed(34)]),
        "Java +": joined(
            "anthropic-key", 'String key = "{}" + "{}";\n', ["sk-" + "ant-", "api03-" + r.mixed(93) + "AA"]
        ),
    }


FORM_SAMPLES: dict[str, Form] = {
    name: form
    for build in (
        _config_file_forms,
        _database_forms,
        _framework_forms,
        _jwt_and_storage_forms,
        _saas_forms,
        _concatenation_forms,
    )
    for name, form in build(Bodies(build.__name__)).items()
}
