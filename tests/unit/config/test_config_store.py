"""The durable config store (DESIGN §8): atomic writes, backup recovery, no key, no lost update.

Crash and concurrency tests run real child processes (SIGKILL at random moments, four writers on
one file); everything else is plain file I/O in tmp_path.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from cluster.config.store import ConfigStore, PersistedConfig, PersistedRole
from cluster.errors import ConfigError
from cluster.roles import Policy, Role

REPO_ROOT = Path(__file__).resolve().parents[3]
SECRET = "sk-or-v1-0123456789abcdef"
COUNTER_ROLE = Role.CODE_ASSISTANT

# Child writer: bumps the counter `count` times (forever if -1), printing each n once update() returned.
WRITER = """
import sys
from pathlib import Path
from cluster.config.store import ConfigStore, PersistedRole
from cluster.roles import Role

def bump(config):
    route = config.roles.get(Role.CODE_ASSISTANT)
    n = int(route.model[1:]) + 1 if route else 1
    return config.model_copy(update={"roles": {**config.roles, Role.CODE_ASSISTANT: PersistedRole(model=f"m{n}")}})

store = ConfigStore(Path(sys.argv[1]))
count = int(sys.argv[2])
print("ready", flush=True)
done = 0
while count < 0 or done < count:
    committed = store.update(bump)
    print(committed.roles[Role.CODE_ASSISTANT].model[1:], flush=True)
    done += 1
"""


def _counter(config: PersistedConfig) -> int:
    route = config.roles.get(COUNTER_ROLE)
    return int(route.model[1:]) if route else 0


def _start_writer(path: Path, count: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(count)],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def _sample() -> PersistedConfig:
    return PersistedConfig(
        roles={
            Role.EMBEDDING: PersistedRole(model="qwen/qwen3-embedding-4b", upstream="deepinfra", dims=2560),
            Role.RLM: PersistedRole(model="deepseek/deepseek-v4-flash"),
        },
        policies={Role.EMBEDDING: Policy.BACKUP, Role.RLM: Policy.CLOUD},
        budget_override=12,
        key_pushed=True,
        last_pushed_at=1_700_000_000.5,
    )


@pytest.fixture
def store(tmp_path: Path) -> ConfigStore:
    return ConfigStore(tmp_path / "cluster.json")


def test_a_written_config_reads_back_equal(store: ConfigStore) -> None:
    store.write(_sample())
    assert store.read() == _sample()
    assert ConfigStore(store.path).read() == _sample()


def test_a_missing_file_reads_as_defaults_on_first_run(store: ConfigStore) -> None:
    config = store.read()
    assert config == PersistedConfig()
    assert config.base_url is None and config.roles == {} and not config.key_pushed
    assert not store.path.exists()


def test_an_embedding_role_without_a_pin_is_refused_and_the_file_is_unchanged(store: ConfigStore) -> None:
    store.write(_sample())
    before = store.path.read_bytes()
    with pytest.raises(ValidationError, match=r"roles\.code-embedding\.upstream"):
        PersistedConfig(roles={Role.CODE_EMBEDDING: PersistedRole(model="x/y")})
    unpinned = {**_sample().roles, Role.EMBEDDING: PersistedRole(model="qwen/qwen3-embedding-4b")}
    with pytest.raises(ConfigError, match=r"roles\.embedding\.upstream"):
        store.update(lambda c: c.model_copy(update={"roles": unpinned}))
    assert store.path.read_bytes() == before
    assert store.read() == _sample()


def test_an_api_key_field_is_refused_and_never_reaches_the_file(store: ConfigStore) -> None:
    with pytest.raises(ValidationError, match="api_key") as refused:
        PersistedConfig.model_validate({"api_key": SECRET})
    assert SECRET not in str(refused.value)
    store.write(_sample())
    before = store.path.read_bytes()
    with pytest.raises(ConfigError, match="api_key") as sneaked:
        store.update(lambda c: c.model_copy(update={"api_key": SECRET}))
    assert SECRET not in str(sneaked.value)
    assert store.path.read_bytes() == before
    for file in store.path.parent.iterdir():
        assert SECRET.encode() not in file.read_bytes()


def test_a_change_that_raises_changes_nothing_and_the_error_propagates(store: ConfigStore) -> None:
    store.write(_sample())
    before = store.path.read_bytes()

    def broken(config: PersistedConfig) -> PersistedConfig:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        store.update(broken)
    with pytest.raises(ConfigError):
        store.update(lambda c: c.model_copy(update={"budget_override": 0}))
    assert store.path.read_bytes() == before


def test_every_write_keeps_the_previous_good_file_as_the_backup(store: ConfigStore) -> None:
    store.write(_sample())
    first = store.path.read_bytes()
    store.update(lambda c: c.model_copy(update={"budget_override": 99}))
    assert store.backup_path.read_bytes() == first
    assert store.read().budget_override == 99


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data[: len(data) // 2], id="truncated"),
        pytest.param(lambda data: b"", id="empty"),
        pytest.param(lambda data: os.urandom(64) + b"\xff\xfe", id="garbage"),
        pytest.param(lambda data: b'{"roles": {"embedding": {"model": "x"}}}', id="valid-json-invalid-config"),
    ],
)
def test_a_damaged_primary_is_restored_from_the_backup(
    store: ConfigStore, damage: object, caplog: pytest.LogCaptureFixture
) -> None:
    store.write(_sample())
    store.update(lambda c: c.model_copy(update={"budget_override": 7}))  # backup = _sample()
    store.path.write_bytes(damage(store.path.read_bytes()))  # type: ignore[operator]
    with caplog.at_level(logging.WARNING, logger="cluster.config.store"):
        assert store.read() == _sample()
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "restored from backup" in caplog.records[0].getMessage()
    assert PersistedConfig.model_validate_json(store.path.read_bytes()) == _sample()  # primary rewritten valid
    assert store.read() == _sample()


def test_a_missing_primary_with_a_backup_reads_the_backup(store: ConfigStore) -> None:
    store.write(_sample())
    store.update(lambda c: c.model_copy(update={"budget_override": 7}))
    store.path.unlink()
    assert store.read() == _sample()
    assert store.path.exists()


def test_both_files_corrupt_raise_and_never_turn_into_defaults(store: ConfigStore) -> None:
    store.write(_sample())
    store.update(lambda c: c.model_copy(update={"budget_override": 7}))
    store.path.write_bytes(b'{"roles": {"emb')
    store.backup_path.write_bytes(b"\x00\x01garbage")
    with pytest.raises(ConfigError):
        store.read()
    with pytest.raises(ConfigError):
        store.update(lambda c: c.model_copy(update={"budget_override": 8}))
    assert store.path.read_bytes() == b'{"roles": {"emb'  # nothing overwrote the evidence


def test_a_corrupt_primary_without_a_backup_raises(store: ConfigStore) -> None:
    store.path.write_bytes(b"{not json")
    with pytest.raises(ConfigError):
        store.read()


def test_normal_writes_leave_no_temp_files(store: ConfigStore) -> None:
    for n in range(1, 6):
        store.update(lambda c, n=n: c.model_copy(update={"budget_override": n}))
    names = sorted(p.name for p in store.path.parent.iterdir())
    assert names == ["cluster.json", "cluster.json.bak", "cluster.json.lock"]
    assert not list(store.path.parent.glob("*.tmp")) and not list(store.path.parent.glob(".*.tmp"))


@pytest.mark.slow  # twenty writer processes started and killed
def test_a_writer_killed_at_random_moments_never_loses_a_committed_update(store: ConfigStore) -> None:
    rng = random.Random(8)
    last_committed = 0
    waited_for = 0  # commits seen before a kill: the children really wrote, however loaded the machine
    for _ in range(20):
        child = _start_writer(store.path, -1)
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        seen = [int(child.stdout.readline()) for _ in range(rng.randint(1, 3))]  # then kill mid-write, at random
        waited_for += len(seen)
        time.sleep(rng.uniform(0.0, 0.02))
        child.send_signal(signal.SIGKILL)
        output, _ = child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL
        # A last line without "\n" is torn.
        reported = seen + [int(line) for line in output.split("\n")[:-1] if line]
        if reported:
            last_committed = reported[-1]
        for file in (store.path, store.backup_path):  # atomic writes: a kill never tears either file
            if file.exists():
                PersistedConfig.model_validate_json(file.read_bytes())
        config = store.read()  # must succeed after every kill
        assert PersistedConfig.model_validate(config) == config
        # Committed updates all survive; at most the one in flight also landed.
        assert last_committed <= _counter(config) <= last_committed + 1
        last_committed = _counter(config)
    assert last_committed >= waited_for >= 20
    store.write(store.read())
    assert not list(store.path.parent.glob(".*.tmp"))  # temps of killed writers are swept


def test_four_processes_incrementing_concurrently_lose_no_update(store: ConfigStore) -> None:
    children = [_start_writer(store.path, 50) for _ in range(4)]
    for child in children:
        output, _ = child.communicate(timeout=50)
        assert child.returncode == 0
        assert len(output.split()) == 51  # "ready" and 50 committed counters
    assert _counter(store.read()) == 200


def test_the_persisted_config_overlays_the_settings_and_an_unreadable_store_changes_nothing(tmp_path: Path) -> None:
    from cluster.config.store import effective_settings
    from cluster.settings import SamespaceSettings

    path = tmp_path / "config.json"
    settings = SamespaceSettings(admin={"config_path": path})
    assert effective_settings(settings) == settings  # nothing pushed yet
    ConfigStore(path).write(
        PersistedConfig(
            roles={Role.CODE_EMBEDDING: PersistedRole(model="qwen/qwen3-embedding-4b", upstream="deepinfra")},
            policies={Role.RLM: Policy.LOCAL},
            budget_override=12,
        )
    )
    effective = effective_settings(settings)
    assert effective.policy(Role.RLM) is Policy.LOCAL and effective.policy(Role.RERANKER) is Policy.AGGREGATE
    assert effective.cloud.routes[Role.CODE_EMBEDDING].upstream == "deepinfra"
    assert Role.RERANKER in effective.cloud.routes and effective.budget.override == 12
    assert effective.cloud.base_url == settings.cloud.base_url  # not pushed: the configured URL stands
    path.write_bytes(b"{torn")
    Path(f"{path}.bak").write_bytes(b"{torn too")
    assert effective_settings(settings) == settings
