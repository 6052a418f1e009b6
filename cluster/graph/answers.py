"""What the navigation tools answer (the MCP contract): every item says where it is (`path`,
`line`: the call or reference site), inside what (`symbol`: the definition around it), in which
index and commit (`repo`, `commit`); graph walks add `depth`, resolution adds `confidence`."""

from __future__ import annotations

from enum import Enum

from pydantic import Field

from cluster.types import Strict

__all__ = ["GraphAnswer", "GraphItem", "GraphQuery", "GraphTool", "ImpactAnswer", "ImpactFile", "SymbolDefinition"]


class SymbolDefinition(Strict):
    """A definition: the answer of find_definition, and what the other tools resolved `symbol` to."""

    repo: str
    commit: str | None = None
    path: str
    line: int
    end_line: int
    symbol: str = Field(description="Its name qualified in its file: Class.method.")
    qualified: str = Field(description="Its name qualified by its module: pkg.mod.Class.method.")
    kind: str
    language: str


class GraphItem(Strict):
    """A call or reference site."""

    repo: str
    commit: str | None = None
    path: str
    line: int
    symbol: str | None = Field(description="The definition the site is in (None: top level of the file).")
    depth: int = Field(default=1, description="Calls between this site and the asked symbol (1: a direct call).")
    confidence: float = Field(description="1: the code names the definition; less: a guess shared among candidates.")
    ambiguous: bool = Field(description="True when the site may reach other definitions too.")
    call: bool = True
    target: str | None = Field(default=None, description="The definition the site reaches (callees, deeper callers).")
    target_path: str | None = None


class GraphAnswer(Strict):
    """The answer of find_references, callers and callees."""

    symbol: str
    definitions: list[SymbolDefinition] = Field(default_factory=list, description="What `symbol` resolved to.")
    candidates: list[SymbolDefinition] = Field(
        default_factory=list,
        description="When `symbol` names several definitions: pick one (by path or a qualified name).",
    )
    items: list[GraphItem] = Field(default_factory=list)
    truncated: bool = False
    note: str | None = None


class ImpactFile(Strict):
    """A file that reaches the symbol, at its distance (the least depth of its callers)."""

    repo: str
    commit: str | None = None
    path: str
    depth: int
    sites: int = Field(description="Call and reference sites in the file that reach the symbol.")


class ImpactAnswer(GraphAnswer):
    """The transitive callers (items), then the files, then the tests that reach the symbol."""

    files: list[ImpactFile] = Field(default_factory=list)
    tests: list[ImpactFile] = Field(default_factory=list)


class GraphTool(str, Enum):
    """The navigation tools, by their MCP names."""

    DEFINITION = "find_definition"
    REFERENCES = "find_references"
    CALLERS = "callers"
    CALLEES = "callees"
    IMPACT = "impact"


DEFAULT_DEPTH = {GraphTool.IMPACT: 3}  # the others walk one call by default
# The least confidence an edge needs unless the caller says otherwise, chosen on bench.navigation's dev
# packages: callers keep a guess between two (precision 0.93, recall 0.88 there against jedi), impact
# one among four (its best F1 there); 0 lists every guess.
DEFAULT_CONFIDENCE = {GraphTool.IMPACT: 0.25}
DEFAULT_EDGE_CONFIDENCE = 0.5
MAX_DEPTH = 10


class GraphQuery(Strict):
    """A navigation request: which tool, the symbol (bare or qualified), the indexes (`repo`: a name,
    a glob, a group or None for all), the file or folder that picks a definition, and the walk."""

    tool: GraphTool
    symbol: str = Field(min_length=1, max_length=500, description="A bare or qualified name: f, Class.method, mod.f.")
    repo: str | None = Field(default=None, max_length=300)
    path: str | None = Field(default=None, max_length=1000, description="A file, a folder or a path's tail.")
    depth: int | None = Field(default=None, ge=1, le=MAX_DEPTH, description="Calls to walk (default 1; impact 3).")
    limit: int = Field(default=100, ge=1, le=1000)
    min_confidence: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Leave out (and do not follow) edges less sure than this (default 0.5; impact 0.25).",
    )

    @property
    def walk(self) -> int:
        return self.depth if self.depth is not None else DEFAULT_DEPTH.get(self.tool, 1)

    @property
    def least(self) -> float:
        if self.min_confidence is not None:
            return self.min_confidence
        return DEFAULT_CONFIDENCE.get(self.tool, DEFAULT_EDGE_CONFIDENCE)
