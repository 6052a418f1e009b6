"""The code graph of JavaScript, TypeScript (and TSX) and Go (see `cluster.graph.spec` for the captures)."""

from __future__ import annotations

from cluster.graph.spec import GraphSpec

SPECS: tuple[GraphSpec, ...] = ()
