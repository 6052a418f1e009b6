"""The code graph: what each file defines, calls, mentions and imports (read at index time by a
per-language tree-sitter query and stored on the rows of the chunks that show it), and the graph
those facts make, resolved when it is read: definitions, references, callers, callees, impact."""

from __future__ import annotations

from cluster.graph.answers import (
    GraphAnswer,
    GraphItem,
    GraphQuery,
    GraphTool,
    ImpactAnswer,
    ImpactFile,
    SymbolDefinition,
)
from cluster.graph.code_graph import CodeGraph
from cluster.graph.extract import FileFacts, attach_facts, file_facts, module_of
from cluster.graph.nodes import DefNode, GraphRow, RefSite
from cluster.graph.registry import SPECS
from cluster.graph.spec import CLASS_KINDS, GraphSpec, ModuleStyle

__all__ = [
    "CLASS_KINDS",
    "SPECS",
    "CodeGraph",
    "DefNode",
    "FileFacts",
    "GraphAnswer",
    "GraphItem",
    "GraphQuery",
    "GraphRow",
    "GraphSpec",
    "GraphTool",
    "ImpactAnswer",
    "ImpactFile",
    "ModuleStyle",
    "RefSite",
    "SymbolDefinition",
    "attach_facts",
    "file_facts",
    "module_of",
]
