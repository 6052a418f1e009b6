"""Every language the code graph reads, by the grammar key `cluster.ingest.languages` gives a file."""

from __future__ import annotations

from collections.abc import Mapping

from cluster.graph import cfamily_spec, jvm_spec, scripting_spec, systems_spec, web_spec
from cluster.graph.python_spec import PYTHON
from cluster.graph.spec import GraphSpec

SPECS: Mapping[str, GraphSpec] = {
    spec.language: spec
    for spec in (
        PYTHON,
        *web_spec.SPECS,
        *jvm_spec.SPECS,
        *cfamily_spec.SPECS,
        *scripting_spec.SPECS,
        *systems_spec.SPECS,
    )
}
