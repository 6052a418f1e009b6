"""The sidecar registry on disk: written through the config store, never torn, never
at the cost of another setting — with the writer killed at random moments, as the peer's
`atomicWriteConfigFile`/`readConfigFileWithRecovery` pair was meant to survive."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.config.store import ConfigStore, PersistedConfig, PersistedRole
from cluster.fleet.agent_registry import Fleet
from cluster.fleet.frames import RegisterFrame, parse_frame
from cluster.roles import Policy, Role

REPO_ROOT = Path(__file__).resolve().parents[3]
AGENT = "http://ws17.lan:9100"

# Child: a fleet whose every heartbeat changes the reported model (so every heartbeat is a durable
# change and rewrites the registry); prints n once the heartbeat carrying model m<n> was applied.
WRITER = """
import json, sys
from pathlib import Path
from cluster.config.store import ConfigStore
from cluster.fleet.agent_registry import Fleet
from cluster.fleet.frames import parse_frame

store = ConfigStore(Path(sys.argv[1]))
start = int(sys.argv[2])
clock = iter(range(0, 10**9, 60)).__next__  # a minute per change: every write within the write budget
fleet = Fleet(clock, persist=store.save_sidecars, known=store.read().sidecars)
fleet.opened("c")
fleet.on_frame("c", parse_frame(json.dumps({"type": "register", "agentUrl": sys.argv[3], "hostname": "ws17"})))
print("ready", flush=True)
n = start
while True:
    n += 1
    container = {"name": "ss-code-embedding", "status": "running", "model": f"m{n}", "endpoint": "http://127.0.0.1:9/v1"}
    frame = {"type": "heartbeat", "statusData": {"hostname": "ws17", "containers": {"code-embedding": container}}}
    fleet.on_frame("c", parse_frame(json.dumps(frame)))
    print(n, flush=True)
"""


def _others() -> PersistedConfig:
    return PersistedConfig(
        roles={Role.EMBEDDING: PersistedRole(model="qwen/qwen3-embedding-4b", upstream="deepinfra", dims=2560)},
        policies={Role.EMBEDDING: Policy.BACKUP, Role.RLM: Policy.CLOUD},
        budget_override=12,
        key_pushed=True,
    )


def _model(config: PersistedConfig) -> int:
    record = config.sidecars.get(AGENT)
    if record is None or Role.CODE_EMBEDDING not in record.capabilities:
        return 0
    return int(record.capabilities[Role.CODE_EMBEDDING].models[0][1:])


@pytest.mark.slow  # a stream of writer processes started and killed
def test_hundreds_of_heartbeats_with_the_writer_killed_at_random_keep_the_config_whole(tmp_path: Path) -> None:
    store = ConfigStore(tmp_path / "cluster.json")
    store.write(_others())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    rng = random.Random(17)
    committed, heartbeats = 0, 0
    for _ in range(15):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store.path), str(committed), AGENT],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        # Kill after a random number of applied heartbeats (counted, not timed): the kill lands
        # somewhere inside a later write, whatever the machine's speed.
        seen = [child.stdout.readline() for _ in range(rng.randint(5, 30))]
        child.send_signal(signal.SIGKILL)
        # Through the text wrapper: readline may have read lines ahead into it, which `communicate`
        # (reading the bare pipe) would lose, making an applied heartbeat look unapplied.
        output = child.stdout.read()
        child.wait(timeout=30)
        lines = "".join(seen) + output
        applied = [int(line) for line in lines.split("\n")[:-1] if line]  # a last line without "\n" is torn
        heartbeats += len(applied)
        for file in (store.path, store.backup_path):  # atomic: a kill never leaves either file torn
            if file.exists():
                PersistedConfig.model_validate_json(file.read_bytes())
        config = store.read()
        # Every other setting is kept, exactly.
        assert config.model_dump(exclude={"sidecars"}) == _others().model_dump(exclude={"sidecars"})
        # The registry holds the last applied heartbeat's capabilities (or the one in flight).
        last = applied[-1] if applied else committed
        assert last <= _model(config) <= last + 1
        assert config.sidecars[AGENT].hostname == "ws17"
        committed = _model(config)
    assert heartbeats >= 15 * 5, heartbeats


def test_a_torn_registry_is_restored_from_the_backup_and_the_fleet_starts_from_it(tmp_path: Path) -> None:
    store = ConfigStore(tmp_path / "cluster.json")
    store.write(_others())
    fleet = Fleet(lambda: 0.0, persist=store.save_sidecars)
    fleet.opened("c")
    register = parse_frame('{"type": "register", "agentUrl": "' + AGENT + '", "hostname": "ws17"}')
    assert isinstance(register, RegisterFrame)
    fleet.on_frame("c", register)
    store.write(store.read())  # the registered state is now the backup as well
    store.path.write_bytes(store.path.read_bytes()[:37])  # torn primary
    restored = store.read()
    assert AGENT in restored.sidecars and restored.budget_override == 12
    again = Fleet(lambda: 100.0, known=restored.sidecars)
    assert [(h.agent_url, h.fresh) for h in again.hosts()] == [(AGENT, False)]  # known, but not fresh until it speaks


def test_volatile_state_never_rewrites_the_file(tmp_path: Path) -> None:
    store = ConfigStore(tmp_path / "cluster.json")
    writes: list[int] = []
    fleet = Fleet(lambda: 0.0, persist=lambda records: (writes.append(1), store.save_sidecars(records)))
    fleet.opened("c")
    fleet.on_frame("c", parse_frame('{"type": "register", "agentUrl": "' + AGENT + '"}'))
    for active in range(50):  # same capabilities, changing activeRequests
        frame = json.dumps(
            {
                "type": "heartbeat",
                "activeRequests": active,
                "statusData": {"containers": {"code-embedding": {"status": "running", "model": "m1"}}},
            }
        )
        fleet.on_frame("c", parse_frame(frame))
    assert len(writes) == 2  # the registration and the first capabilities; activity stays in memory
    assert store.read().sidecars[AGENT].capabilities[Role.CODE_EMBEDDING].models == ["m1"]
