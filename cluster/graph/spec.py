"""How the code graph reads one language: a tree-sitter query whose captures name definitions,
calls, mentions and imports, and what the language's resolution needs to know.

The query's captures (every language module follows them; `cluster.graph.extract` runs them):

- `@definition.<kind>` on a definition node (`function`, `method`, `class`, `interface`, `struct`,
  `enum`, `trait`, `module`, `type`, ...) with `@name` on its name node in the same pattern;
  optionally `@container` (a type named outside the body, e.g. Go's receiver, C++'s `A::f`, Kotlin's
  extension receiver: the definition is then `Container.name`) and `@bases` (each base class or
  interface it names; any number of matches per definition merge).
- `@call` on a call node with `@callee` on the called name (the last identifier) and optionally
  `@receiver` on what it is called on (`self`, `os.path`, `Foo`, `obj`): the receiver's text is the
  reference's qualifier. A constructor call (`new Foo()`, `Foo()`) is a call of the class name.
- `@reference` on an identifier that names something without calling it (a type, a function
  passed as a value, an attribute read), optionally with `@receiver`.
- `@import` on an import statement, with `@import.module` on the module as written (quoted or
  not, `a.b`, `./x`, `a::b`, `a/b`), optionally `@import.name` (a symbol imported from it) and
  `@import.alias` (the local name it is bound to). `GraphSpec.imports` may replace the captures
  with a function for forms a query cannot express.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from tree_sitter import Node

from cluster.types import ImportBinding

ImportReader = Callable[[Node, str], list[ImportBinding]]  # (root, path) -> the file's bindings


class ModuleStyle(str, Enum):
    """How a file's path names its module, the key imports resolve against."""

    PYTHON = "python"  # pkg/sub/mod.py -> pkg.sub.mod (pkg/__init__.py -> pkg)
    FOLDER = "folder"  # the folder is the module (Go packages, Java/Kotlin/Scala/C# namespaces)
    FILE = "file"  # the file without its extension (JS/TS, Rust, Ruby, Lua, PHP, C headers, Bash)


@dataclass(frozen=True)
class GraphSpec:
    """What the code graph needs of one language (see the module docstring for the captures)."""

    language: str  # the grammar's key in `cluster.ingest.languages.GRAMMARS`
    query: str
    imports: ImportReader | None = None  # None: the query's @import captures
    self_names: frozenset[str] = frozenset({"this"})  # receivers that mean "the enclosing class"
    super_names: frozenset[str] = frozenset({"super"})  # receivers that mean "its bases"
    implicit_members: bool = False  # a bare call inside a class may call a member (Java, C#, C++...)
    global_names: bool = False  # a bare name may reach a top-level definition of any file (C, PHP, Lua...)
    constructors: frozenset[str] = frozenset()  # member names a call of the class reaches
    module_style: ModuleStyle = ModuleStyle.FILE
    separators: tuple[str, ...] = (".",)  # how a qualifier's parts are written: ".", "::", "->", "\\"
    keywords: frozenset[str] = field(default_factory=frozenset)  # never a reference (true, nil, ...)


CLASS_KINDS = frozenset(
    {"class", "interface", "struct", "trait", "impl", "enum", "object", "module", "protocol", "extension", "record"}
)  # definitions whose function members are methods (`Definition.kind` "method")
