from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from cluster.errors import ConfigError
from cluster.settings import CONFIG_FILE_ENV, SamespaceSettings, load_settings


def test_defaults_are_the_embedded_store_and_the_packaged_model() -> None:
    settings = SamespaceSettings()
    assert settings.store.kind == "embedded" and settings.store.data_dir.is_absolute()
    assert settings.embedding.model is None and settings.embedding.width == 384
    assert (settings.chunking.window_lines, settings.chunking.overlap_lines) == (40, 10)
    assert settings.serve.host == "127.0.0.1"


def test_env_overrides_yaml_which_overrides_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "samespace.yaml"
    config.write_text("embedding:\n  width: 2560\n  model: /models/qwen3-embedding-4b\nchunking:\n  window_lines: 60\n")
    monkeypatch.setenv(CONFIG_FILE_ENV, str(config))
    monkeypatch.setenv("SAMESPACE_CHUNKING__WINDOW_LINES", "50")
    settings = load_settings()
    assert settings.embedding.width == 2560 and settings.embedding.model == "/models/qwen3-embedding-4b"
    assert settings.chunking.window_lines == 50


def test_a_missing_config_file_is_an_error_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONFIG_FILE_ENV, str(tmp_path / "absent.yaml"))
    with pytest.raises(ConfigError, match=CONFIG_FILE_ENV):
        load_settings()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"store": {"kind": "server"}}, "store.url"),
        ({"chunking": {"window_lines": 10, "overlap_lines": 10}}, "overlap_lines"),
        ({"embedding": {"width": 0}}, "width"),
        ({"embedding": {"widht": 384}}, "widht"),
        ({"serve": {"port": 70000}}, "port"),
        ({"policies": {"rerankr": "local"}}, "rerankr"),
        ({"policies": {"rlm": "sometimes"}}, "policies.rlm"),
        ({"cloud": {"routes": {"code-embedding": {"model": "qwen/qwen3-embedding-4b"}}}}, "upstream pin"),
        ({"cloud": {"timeout_s": -1}}, "timeout_s"),
        ({"embedding": {"batch_size": -4}}, "batch_size"),
    ],
)
def test_bad_settings_are_refused_with_the_field_named(overrides: dict, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        SamespaceSettings(**overrides)
    assert field in str(caught.value)
