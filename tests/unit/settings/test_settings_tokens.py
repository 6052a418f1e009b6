"""Secrets that guard a surface: blank is unset, short is refused naming the setting, never the value."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from cluster.errors import ConfigError
from cluster.settings import MIN_TOKEN_BYTES, SamespaceSettings, load_settings
from serve_apps.auth import bearer_matches

Getter = Callable[[SamespaceSettings], SecretStr | None]
SECRETS: list[tuple[str, str, Getter]] = [
    ("SAMESPACE_ADMIN__TOKEN", "admin.token", lambda s: s.admin.expected_token()),
    ("SAMESPACE_SERVE__TOKEN", "serve.token", lambda s: s.serve.expected_token()),
    ("SAMESPACE_FLEET_TOKEN", "fleet_token", lambda s: s.fleet_token),
    ("SAMESPACE_INDEX__HOOK_SECRET", "index.hook_secret", lambda s: s.index.hook_secret),
]
IDS = [env for env, _, _ in SECRETS]
CANARY = "canary-5hort-tok"[: MIN_TOKEN_BYTES - 1]  # one byte short
LONG_ENOUGH = "0123456789abcdef"  # exactly MIN_TOKEN_BYTES


@pytest.fixture(autouse=True)
def _no_secrets_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for env, _, _ in SECRETS:
        monkeypatch.delenv(env, raising=False)
    for env in ("SAMESPACE_ADMIN__TOKEN_FILE", "SAMESPACE_SERVE__TOKEN_FILE", "SAMESPACE_CONFIG_FILE"):
        monkeypatch.delenv(env, raising=False)


@pytest.mark.parametrize("blank", ["", "   ", "\n"])
@pytest.mark.parametrize(("env", "setting", "read"), SECRETS, ids=IDS)
def test_a_secret_set_to_blank_is_unset_and_an_empty_bearer_matches_nothing(
    env: str, setting: str, read: Getter, blank: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(env, blank)
    configured = read(load_settings())
    assert configured is None, setting
    assert not bearer_matches("Bearer ", configured)
    assert not bearer_matches(f"Bearer {blank}", configured)


@pytest.mark.parametrize(("env", "setting", "read"), SECRETS, ids=IDS)
def test_a_short_secret_is_refused_naming_the_setting_and_never_echoing_it(
    env: str, setting: str, read: Getter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(env, CANARY)
    with pytest.raises(ValidationError) as caught:
        load_settings()
    message = str(caught.value)
    assert f"{setting} ({env}) is {MIN_TOKEN_BYTES - 1} bytes; a token must be at least 16 bytes" in message
    assert CANARY not in message and CANARY not in repr(caught.value)


@pytest.mark.parametrize(("env", "setting", "read"), SECRETS, ids=IDS)
def test_a_secret_of_sixteen_bytes_is_accepted_without_its_surrounding_whitespace(
    env: str, setting: str, read: Getter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(env, f"  {LONG_ENOUGH}\n")
    configured = read(load_settings())
    assert configured is not None and configured.get_secret_value() == LONG_ENOUGH
    assert bearer_matches(f"Bearer {LONG_ENOUGH}", configured)


def test_the_length_is_counted_in_bytes_not_characters() -> None:
    assert SamespaceSettings(fleet_token="é" * 8).fleet_token is not None  # 16 bytes, 8 characters
    with pytest.raises(ValidationError, match="is 14 bytes"):
        SamespaceSettings(fleet_token="é" * 7)


def test_a_secret_given_as_a_secret_str_follows_the_same_rules() -> None:
    assert SamespaceSettings(admin={"token": SecretStr("  ")}).admin.token is None
    with pytest.raises(ValidationError, match=r"admin\.token \(SAMESPACE_ADMIN__TOKEN\) is 5 bytes"):
        SamespaceSettings(admin={"token": SecretStr("short")})


@pytest.mark.parametrize("section", ["admin", "serve"])
def test_a_token_file_holding_a_short_token_is_refused_at_start(section: str, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(CANARY + "\n")
    with pytest.raises(ValidationError) as caught:
        SamespaceSettings(**{section: {"token_file": token_file}})
    message = str(caught.value)
    assert f"{section}.token_file (SAMESPACE_{section.upper()}__TOKEN_FILE)" in message
    assert f"is {MIN_TOKEN_BYTES - 1} bytes; a token must be at least 16 bytes" in message
    assert CANARY not in message and CANARY not in repr(caught.value)


@pytest.mark.parametrize("section", ["admin", "serve"])
def test_a_token_file_rewritten_short_is_refused_where_it_is_read(section: str, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(LONG_ENOUGH + "\n")
    settings = SamespaceSettings(**{section: {"token_file": token_file}})
    surface = settings.admin if section == "admin" else settings.serve
    token = surface.expected_token()
    assert token is not None and token.get_secret_value() == LONG_ENOUGH
    token_file.write_text(CANARY)
    with pytest.raises(ConfigError) as caught:
        surface.expected_token()
    assert f"{section}.token_file (SAMESPACE_{section.upper()}__TOKEN_FILE)" in str(caught.value)
    assert CANARY not in str(caught.value) and CANARY not in repr(caught.value)


def test_a_missing_or_blank_token_file_is_no_token(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    settings = SamespaceSettings(admin={"token_file": token_file})
    assert settings.admin.expected_token() is None
    token_file.write_text(" \n")
    assert settings.admin.expected_token() is None


def test_the_token_wins_over_its_file_and_a_blank_token_falls_back_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("file-token-0123456789\n")
    monkeypatch.setenv("SAMESPACE_SERVE__TOKEN_FILE", str(token_file))
    monkeypatch.setenv("SAMESPACE_SERVE__TOKEN", "")
    token = load_settings().serve.expected_token()
    assert token is not None and token.get_secret_value() == "file-token-0123456789"
    monkeypatch.setenv("SAMESPACE_SERVE__TOKEN", "env-token-0123456789")
    token = load_settings().serve.expected_token()
    assert token is not None and token.get_secret_value() == "env-token-0123456789"
