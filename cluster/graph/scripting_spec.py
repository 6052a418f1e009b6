"""The code graph of PHP, Ruby, Lua and Bash (see `cluster.graph.spec` for the captures)."""

from __future__ import annotations

from cluster.graph.spec import GraphSpec

SPECS: tuple[GraphSpec, ...] = ()
