"""The code maps several search tests read, built once per module: the polyglot fixture repo and the
tax module with its README in small windows."""

from __future__ import annotations

import pytest

from cluster.search.code_map import CodeMap
from tests.support.code_maps import README, SMALL_WINDOWS, TAX_SOURCE, payloads_of, polyglot_files


@pytest.fixture(scope="module")
def poly() -> CodeMap:
    return CodeMap.from_payloads("poly", payloads_of(polyglot_files(), repo="poly"))


@pytest.fixture(scope="module")
def tax() -> CodeMap:
    return CodeMap.from_payloads("demo", payloads_of({"src/tax.py": TAX_SOURCE, "README.md": README}, SMALL_WINDOWS))
