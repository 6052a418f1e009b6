"""Bearer tokens and shared secrets in settings: one rule for every one that guards a surface.

A secret set to an empty or blank value is unset (None), never a token that `Authorization: Bearer `
matches; a secret shorter than `MIN_TOKEN_BYTES` is refused when the settings are built, and a token
file's content when it is read. A refusal names the setting and the token's length, never its value.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AfterValidator, SecretStr, ValidatorFunctionWrapHandler, WrapValidator

from cluster.errors import ConfigError

MIN_TOKEN_BYTES = 16
ENV_PREFIX = "SAMESPACE_"


def setting_name(path: str) -> str:
    """How a refusal names a setting: 'admin.token (SAMESPACE_ADMIN__TOKEN)'."""
    return f"{path} ({ENV_PREFIX}{path.upper().replace('.', '__')})"


def token_problem(token: str) -> str | None:
    """What is wrong with a configured token ('is 5 bytes; ...'), None when nothing is."""
    size = len(token.encode())
    if size < MIN_TOKEN_BYTES:
        return f"is {size} bytes; a token must be at least {MIN_TOKEN_BYTES} bytes"
    return None


def bearer_token(setting: str) -> WrapValidator:
    """The validator of a secret setting (`Annotated[SecretStr | None, bearer_token("admin.token")]`):
    blank is None, surrounding whitespace goes (a header's value has none), short is refused."""

    def validate(value: object, handler: ValidatorFunctionWrapHandler) -> SecretStr | None:
        raw = value.get_secret_value() if isinstance(value, SecretStr) else value
        if isinstance(raw, str):
            if not raw.strip():
                return None
            value = raw.strip()
        token: SecretStr | None = handler(value)
        if token is not None and (problem := token_problem(token.get_secret_value())):
            raise ValueError(f"{setting_name(setting)} {problem}")
        return token

    return WrapValidator(validate)


def read_token_file(token_file: Path, setting: str) -> SecretStr | None:
    """The stripped text of a token file (None when it is missing or blank); `ConfigError` naming
    `setting` when it is too short."""
    if not token_file.is_file():
        return None
    text = token_file.read_text(encoding="utf-8").strip()
    if not text:
        return None
    if problem := token_problem(text):
        raise ConfigError(setting_name(setting), f"the token in {token_file} {problem}")
    return SecretStr(text)


def token_file_rule(setting: str) -> AfterValidator:
    """The validator of a token-file setting: a file that exists must hold a long enough token."""

    def validate(token_file: Path | None) -> Path | None:
        if token_file is not None:
            try:
                read_token_file(token_file, setting)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return token_file

    return AfterValidator(validate)


def configured_token(token: SecretStr | None, token_file: Path | None, file_setting: str) -> SecretStr | None:
    """A bearer token from settings: the value itself, else the stripped text of its file (None when
    neither is set, the file is missing or it is blank; `ConfigError` naming `file_setting` when the
    file's token is too short)."""
    if token is not None:
        return token
    return read_token_file(token_file, file_setting) if token_file is not None else None
