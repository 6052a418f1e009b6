"""The code graph of C, C++ and C# (see `cluster.graph.spec` for the captures)."""

from __future__ import annotations

from cluster.graph.spec import GraphSpec

SPECS: tuple[GraphSpec, ...] = ()
