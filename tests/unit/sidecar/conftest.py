"""The sidecar tests' servers, each started for one test and stopped after it: the upstream and the
two masters (WebSocket, HTTP fallback) from tests/support/sidecar_agents.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.sidecar_agents import FakeUpstream, HttpMaster, WsMaster


@pytest.fixture
def upstream() -> Any:
    fake = FakeUpstream()
    fake.server.start()
    yield fake
    fake.server.stop()


@pytest.fixture
async def master() -> AsyncIterator[WsMaster]:
    m = await WsMaster().start()
    yield m
    await m.stop()


@pytest.fixture
def http_master() -> Any:
    m = HttpMaster()
    m.server.start()
    yield m
    m.server.stop()
