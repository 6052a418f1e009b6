"""The forms real repositories commit credentials in: cluster and registry config files, database
passwords, framework secret keys, signed tokens, cloud storage connection strings, SaaS keys, and keys
built by concatenating string literals. Each is found on its line and redacted away, and every line
around it survives. The samples are whole files assembled at run time (tests/support/fakes/secret_samples.py).
"""

from __future__ import annotations

import pytest

from cluster.ingest.chunking import split_lines
from cluster.ingest.secret_scan import find_secrets, has_secret, redact
from tests.support.fakes.secret_samples import FORM_SAMPLES

FAMILIES = {"config", "database", "framework", "jwt", "storage", "saas", "concatenation"}


def test_every_family_of_the_issue_has_forms() -> None:
    assert {form.family for form in FORM_SAMPLES.values()} == FAMILIES
    assert all(sum(form.family == family for form in FORM_SAMPLES.values()) >= 2 for family in FAMILIES)


@pytest.mark.parametrize("name", sorted(FORM_SAMPLES))
def test_a_credential_in_a_committed_form_is_found_on_its_line(name: str) -> None:
    form = FORM_SAMPLES[name]
    line = form.text[: form.text.index(form.secret)].count("\n") + 1
    findings = [f for f in find_secrets(form.text) if f.rule.value == form.rule]
    assert findings, f"{name}: no {form.rule} finding"
    assert any(f.line <= line <= f.end_line for f in findings)
    assert has_secret(form.text)


@pytest.mark.parametrize("name", sorted(FORM_SAMPLES))
def test_redaction_removes_the_credential_and_keeps_every_other_line(name: str) -> None:
    form = FORM_SAMPLES[name]
    findings = find_secrets(form.text)
    redacted = redact(form.text)
    assert form.secret not in redacted
    assert f"[redacted:{form.rule}]" in redacted
    assert not has_secret(redacted) and redact(redacted) == redacted
    before, after = split_lines(form.text), split_lines(redacted)
    assert len(after) == len(before)
    for number, line in enumerate(before, start=1):
        if not any(f.line <= number <= f.end_line for f in findings):
            assert after[number - 1] == line
