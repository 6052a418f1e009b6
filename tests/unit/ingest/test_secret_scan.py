"""The content scan: every rule catches its canary, look-alikes stay clean, our own code is clean,
redaction keeps lines, findings never carry the secret, and a 1 MB hostile line stays linear.

Every canary is assembled at run time, so this file never holds a literal credential (the
repository indexes itself, and its own scan must come back empty).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.ingest.chunking import split_lines
from cluster.ingest.secret_scan import SecretRule, find_secrets, has_secret, redact

REPO = Path(__file__).resolve().parents[3]
ALNUM = "Zq7Xk2Rv9Lm4Tp8Wn3Hs6Jd1Gf5Bc0Ay"  # 32 mixed characters, so no canary looks like a placeholder
HEX = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
AWS_ID_BODY = "Q3ZK7XRV9LM4TP8W"  # kept apart from its prefix: literals joined by "+" are scanned as one
SLACK_IDS = "123456789012-1234567890123"


def pem(kind: str, body_lines: int = 3) -> str:
    label = f"{kind} PRIVATE" if kind else "PRIVATE"
    tail = " BLOCK" if kind == "PGP" else ""
    body = "\n".join((ALNUM + ALNUM)[i : i + 48] + "QUJD" for i in range(body_lines))
    return f"-----BEGIN {label} KEY{tail}-----\n{body}\n-----END {label} KEY{tail}-----"


CANARIES: dict[str, tuple[SecretRule, str]] = {
    "pem-rsa": (SecretRule.PRIVATE_KEY, pem("RSA")),
    "pem-ec": (SecretRule.PRIVATE_KEY, pem("EC")),
    "pem-dsa": (SecretRule.PRIVATE_KEY, pem("DSA")),
    "pem-openssh": (SecretRule.PRIVATE_KEY, pem("OPENSSH")),
    "pem-pkcs8": (SecretRule.PRIVATE_KEY, pem("")),
    "pem-encrypted": (SecretRule.PRIVATE_KEY, pem("ENCRYPTED")),
    "pgp-block": (SecretRule.PRIVATE_KEY, pem("PGP")),
    "aws-id": (SecretRule.AWS_ACCESS_KEY_ID, 'key_id = "' + "AK" + "IA" + AWS_ID_BODY + '"'),
    "aws-sts-id": (SecretRule.AWS_ACCESS_KEY_ID, "ASI" + "A" + AWS_ID_BODY),
    "aws-secret-ini": (SecretRule.AWS_SECRET_KEY, "aws_secret_access_key = " + ALNUM + "wJal/r+U"),
    "aws-secret-env": (SecretRule.AWS_SECRET_KEY, 'export AWS_SECRET_ACCESS_KEY="' + ALNUM + 'wJal/r+U"'),
    "aws-secret-json": (SecretRule.AWS_SECRET_KEY, '{"SecretAccessKey": "' + ALNUM + 'wJal/r+U"}'),
    "github-classic": (SecretRule.GITHUB_TOKEN, "token = " + "gh" + "p_" + ALNUM + "Ab12"),
    "github-oauth": (SecretRule.GITHUB_TOKEN, "gh" + "o_" + ALNUM + "Ab12"),
    "github-app": (SecretRule.GITHUB_TOKEN, "gh" + "s_" + ALNUM + "Ab12"),
    "github-fine": (SecretRule.GITHUB_TOKEN, "github" + "_pat_" + "11ABCDEFG0" + ALNUM + "_" + ALNUM + ALNUM[:27]),
    "gitlab": (SecretRule.GITLAB_TOKEN, "GITLAB_TOKEN=" + "gl" + "pat-" + ALNUM[:20]),
    "openrouter": (SecretRule.OPENROUTER_KEY, "OPENROUTER_API_KEY=" + "sk-" + "or-v1-" + HEX),
    "anthropic": (SecretRule.ANTHROPIC_KEY, "sk-" + "ant-api03-" + ALNUM * 2 + ALNUM[:29] + "-AA"),
    "openai-project": (SecretRule.OPENAI_KEY, "sk-" + "proj-" + ALNUM + "_" + ALNUM + "-" + ALNUM),
    "openai-legacy": (SecretRule.OPENAI_KEY, "openai.api_key = '" + "sk-" + ALNUM + ALNUM[:16] + "'"),
    "slack-bot": (SecretRule.SLACK_TOKEN, "xo" + "xb-" + SLACK_IDS + "-" + ALNUM[:24]),
    "slack-user": (SecretRule.SLACK_TOKEN, "xo" + "xp-" + SLACK_IDS + "-" + SLACK_IDS[:13] + "-" + ALNUM),
    "slack-webhook": (
        SecretRule.SLACK_WEBHOOK,
        "https://hooks.slack" + ".com/services/" + "T01ABCDEF/" + "B02GHIJKL/" + ALNUM[:24],
    ),
    "stripe-secret": (SecretRule.STRIPE_KEY, "sk" + "_live_" + ALNUM[:24]),
    "stripe-restricted": (SecretRule.STRIPE_KEY, "rk" + "_live_" + ALNUM[:24]),
    "google": (SecretRule.GOOGLE_API_KEY, 'apiKey: "' + "AI" + "za" + "Sy" + ALNUM[:31] + "-_" + '"'),
    "npm": (SecretRule.NPM_TOKEN, "//registry.npmjs.org/:_authToken=" + "np" + "m_" + ALNUM + "Ab12"),
    "pypi": (SecretRule.PYPI_TOKEN, "password = " + "pypi-" + "AgEIcHlwaS5vcmc" + ALNUM + ALNUM),
    "huggingface": (SecretRule.HUGGINGFACE_TOKEN, "HF_TOKEN=" + "h" + "f_" + ALNUM + "Qz"),
    "url-user-password": (
        SecretRule.URL_CREDENTIALS,
        "DATABASE_URL=postgres://app:" + "S3cr3t-Passw0rd" + "@db.internal:5432/app",
    ),
    "url-x-access-token": (
        SecretRule.URL_CREDENTIALS,
        "git clone https://x-access-token:" + ALNUM[:20] + "@github.com/org/repo.git",
    ),
    "url-token-only": (SecretRule.URL_CREDENTIALS, "url = https://" + ALNUM[:24] + "@github.com/org/repo.git"),
}


@pytest.mark.parametrize("name", sorted(CANARIES))
def test_each_rule_catches_its_canary_inside_code(name: str) -> None:
    rule, secret = CANARIES[name]
    text = f"import os\n\n\ndef settings():\n    value = '''{secret}'''\n    return value\n"
    findings = find_secrets(text)
    assert rule in {f.rule for f in findings}
    assert all(f.line == 5 for f in findings if f.rule is rule)
    assert has_secret(text)


@pytest.mark.parametrize("name", sorted(CANARIES))
def test_a_finding_and_the_redacted_text_never_carry_the_secret(name: str) -> None:
    rule, secret = CANARIES[name]
    text = f"a = 1\nb = '{secret}'\nc = 3\n"
    findings = find_secrets(text)
    assert findings
    for finding in findings:
        assert secret not in repr(finding) and secret not in str(finding)
    redacted = redact(text)
    assert f"[redacted:{rule.value}]" in redacted
    for piece in split_lines(secret):  # a PEM block spans lines: none of them survives
        if len(piece) > 12:
            assert piece not in redacted
    assert len(split_lines(redacted)) == len(split_lines(text))
    assert redacted.startswith("a = 1\n") and redacted.endswith("c = 3\n")
    assert not has_secret(redacted)


def test_a_pem_block_is_one_finding_over_its_lines_and_redaction_keeps_every_line_number() -> None:
    text = "header = 1\n" + pem("RSA", body_lines=20) + "\nfooter = 2\n"
    [finding] = find_secrets(text)
    assert (finding.rule, finding.line, finding.end_line) == (SecretRule.PRIVATE_KEY, 2, 23)
    redacted = split_lines(redact(text))
    assert redacted[0] == "header = 1" and redacted[23] == "footer = 2" and len(redacted) == 24
    assert redacted[1] == "[redacted:private-key]" and all(line == "" for line in redacted[2:23])


def test_a_key_in_a_one_line_json_value_and_a_key_built_by_concatenation_are_caught_whole() -> None:
    begin, end = "-----BEGIN PRIVATE" + " KEY-----", "-----END PRIVATE" + " KEY-----"
    body = ALNUM + ALNUM
    service_account = '{"type": "service_account", "private_key": "' + begin + "\\n" + body + "\\n" + end + '\\n"}'
    go_source = f'const key = "{begin}\\n" +\n\t"{body}\\n" +\n\t"{body}\\n" +\n\t"{end}"\nconst other = 1\n'
    for text in (service_account, go_source):
        redacted = redact(text)
        assert body not in redacted and "[redacted:private-key]" in redacted
    assert "const other = 1" in redact(go_source)


def test_a_chunk_cut_from_the_middle_of_a_key_is_still_caught() -> None:
    lines = pem("RSA", body_lines=30).split("\n")
    head, tail = "\n".join(lines[:12]), "\n".join(lines[12:])  # BEGIN without END, END without BEGIN
    for chunk in (head, tail):
        redacted = redact(chunk)
        assert find_secrets(chunk)[0].rule is SecretRule.PRIVATE_KEY
        assert not any(line in redacted for line in lines[1:-1])


def test_a_url_or_an_assignment_keeps_its_readable_part_and_loses_only_the_credential() -> None:
    token = ALNUM[:24]
    assert redact("https://x-access-token:" + token + "@github.com/org/repo.git") == (
        "https://x-access-token:[redacted:url-credentials]@github.com/org/repo.git"
    )
    assert (
        redact("https://" + token + "@github.com/org/repo") == "https://[redacted:url-credentials]@github.com/org/repo"
    )
    assert redact("aws_secret_access_key = " + ALNUM + "wJal/r+U\n") == (
        "aws_secret_access_key = [redacted:aws-secret-access-key]\n"
    )


LOOK_ALIKES = [
    "pip install task-sk-learn scikit-learn; from sk import learn",
    "risk-assessment-framework-version-two-for-everyone-everywhere",
    "git remote add origin git@github.com:org/repo.git",
    "ssh://git@github.com/org/repo.git",
    "https://github.com/org/repo and https://alice@example.com/repo.git",
    "http://[::1]:8000/healthz and http://localhost:8000/path@v2",
    "The AKIA prefix marks long-term AWS access keys; ASIA marks temporary ones.",
    "OPENAI_API_KEY=your-key-here",
    "AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}",
    "postgres://user:password@localhost/db and redis://:changeme@cache:6379",
    'url = f"https://{user}:{token}@{host}/repo.git"',
    'url = "https://%s:%s@%s" % (user, password, host)',
    "proxy = http://user:****@proxy.internal:3128",
    "digest = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'",
    "stripe.publishable = 'pk" + "_live_" + ALNUM[:24] + "'",  # publishable keys are public
    "Classic tokens start with ghp_ and fine-grained ones with github_pat_.",
    "-----BEGIN PUBLIC KEY-----\n" + ALNUM + "\n-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\n" + ALNUM + "\n-----END CERTIFICATE-----",
    "def hf_" + "modelconfigurationloaderfactory12" + "(): pass",
    "key = 'sk-1234'  # too short to be a key",
    "tokens = [t for t in text.split() if t.startswith('xoxb-')]",
]


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alikes_are_not_secrets(text: str) -> None:
    assert find_secrets(text) == []
    assert redact(text) == text


def test_this_repositorys_own_source_holds_no_finding() -> None:
    scanned = 0
    found: list[str] = []
    for folder in ("cluster", "actors", "serve_apps", "jobs", "sidecar"):
        for path in sorted((REPO / folder).rglob("*.py")):
            scanned += 1
            found += [f"{path.relative_to(REPO)}:{f.line} {f.rule.value}" for f in find_secrets(path.read_text())]
    assert scanned > 20
    assert found == []


ONE_MB = 1_000_000
BEGIN, END = "-----BEGIN RSA PRIVATE" + " KEY-----", "-----END RSA PRIVATE" + " KEY-----"
# Inputs built to make a backtracking rule go quadratic: a prefix followed by an endless almost-match,
# or a prefix repeated so that every position starts a match attempt.
ADVERSARIAL = {
    "pem-begins-one-line": BEGIN * (ONE_MB // len(BEGIN)),
    "pem-begins-own-lines": (BEGIN + "\n") * (ONE_MB // (len(BEGIN) + 1)),
    "pem-ends-own-lines": (END + "\n") * (ONE_MB // (len(END) + 1)),
    "pem-endless-body": BEGIN + "\n" + ("QUJD" * 16 + "\n") * (ONE_MB // 65),
    "pem-begin-dashes": "-----BEGIN " + " " * ONE_MB,
    "aws-prefixes": "AKIA" * (ONE_MB // 4),
    "aws-secret-names": "aws_secret" * (ONE_MB // 10),
    "aws-secret-long-value": "aws_secret_access_key = " + "A" * ONE_MB,
    "github-long": "gh" + "p_" + "A" * ONE_MB,
    "github-prefixes": ("gh" + "p_") * (ONE_MB // 4),
    "github-pat-underscores": "github" + "_pat_" + "_" * ONE_MB,
    "gitlab-dashes": "gl" + "pat-" + "-" * ONE_MB,
    "openrouter-prefixes": ("sk-" + "or-v1-") * (ONE_MB // 9),
    "sk-prefixes": "sk-" * (ONE_MB // 3),
    "sk-long": " sk-" + "a" * ONE_MB,
    "anthropic-long": "sk-" + "ant-" + "-" * ONE_MB,
    "slack-digits": "xo" + "xb-" + "1" * ONE_MB,
    "slack-repeats": ("xo" + "xb-1-") * (ONE_MB // 7),
    "slack-webhook-prefixes": ("hooks.slack" + ".com/services/T") * (ONE_MB // 26),
    "stripe-long": "sk" + "_live_" + "a" * ONE_MB,
    "google-prefixes": ("AI" + "za") * (ONE_MB // 4),
    "npm-long": "np" + "m_" + "a" * ONE_MB,
    "pypi-long": "pypi-" + "AgEIcHlwaS5vcmc" + "A" * ONE_MB,
    "hf-long": "h" + "f_" + "aB" * (ONE_MB // 2),
    "url-colons": "://" + "a:" * (ONE_MB // 2),
    "url-schemes": "://" * (ONE_MB // 3),
    "url-long-user": "://" + "a" * ONE_MB,
    "url-long-passwords": ("://a:" + "b" * 250) * (ONE_MB // 255),
    "url-ats": "://a:b" + "@" * ONE_MB,
    "jwt-prefixes": ("eyJ" + "a" * 20 + ".") * (ONE_MB // 24),
    "password-lines": ("password: " + "a1" * 200 + "\n") * (ONE_MB // 411),
    "yaml-token-lines": ("  token: " + "a1" * 30 + " x\n") * (ONE_MB // 72),
    "secret-key-quotes": ("SECRET_KEY = '" + "a1" * 10) * (ONE_MB // 34),
    "literal-glue": "'ab' + " * (ONE_MB // 7),
    "docker-auth": ('"auth": "' + "QUJD" * 50) * (ONE_MB // 209),
    "pgpass-fields": "pgpass " + "a:1:b:c:" * (ONE_MB // 8),
    "plain": "a" * ONE_MB,
}


@pytest.mark.timeout(30)  # each input scans in about a second; a super-linear rule takes hours
@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_a_one_megabyte_hostile_line_is_scanned_in_linear_time(name: str) -> None:
    text = ADVERSARIAL[name]
    findings = find_secrets(text)
    redacted = redact(text)
    assert has_secret(text) == bool(findings)
    assert text.count("\n") == redacted.count("\n")
    assert not has_secret(redacted)
