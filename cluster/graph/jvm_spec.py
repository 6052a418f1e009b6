"""The code graph of Java, Kotlin and Scala (see `cluster.graph.spec` for the captures)."""

from __future__ import annotations

from cluster.graph.spec import GraphSpec

SPECS: tuple[GraphSpec, ...] = ()
