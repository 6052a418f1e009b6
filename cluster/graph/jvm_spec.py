"""The code graph of Java, Kotlin and Scala (see `cluster.graph.spec` for the captures).

The folder is the package (`ModuleStyle.FOLDER`), a bare call inside a class may call a member, and a
constructor is named like its class (Java) or is the class itself (Kotlin, Scala): a call of the class
reaches it with no `constructors` entry. Kotlin's companion objects are no definitions of their own:
their members are qualified by the class, as `Foo.create()` calls them. Kotlin and Scala write an
import's path as one flat list of identifiers, so their imports are read by a function, not captures.
"""

from __future__ import annotations

from tree_sitter import Node

from cluster.graph.spec import GraphSpec, ModuleStyle
from cluster.types import ImportBinding

MAX_IMPORT_NODES = 200_000  # nodes an import reader visits per file: a generated file cannot stall it

JAVA_QUERY = r"""
(class_declaration name: (identifier) @name) @definition.class
(class_declaration name: (identifier) @name superclass: (superclass (_) @bases)) @definition.class
(class_declaration name: (identifier) @name interfaces: (super_interfaces (type_list (_) @bases))) @definition.class
(interface_declaration name: (identifier) @name) @definition.interface
(interface_declaration name: (identifier) @name (extends_interfaces (type_list (_) @bases))) @definition.interface
(enum_declaration name: (identifier) @name) @definition.enum
(enum_declaration name: (identifier) @name interfaces: (super_interfaces (type_list (_) @bases))) @definition.enum
(record_declaration name: (identifier) @name) @definition.record
(record_declaration name: (identifier) @name interfaces: (super_interfaces (type_list (_) @bases))) @definition.record
(annotation_type_declaration name: (identifier) @name) @definition.interface
(method_declaration name: (identifier) @name) @definition.function
(constructor_declaration name: (identifier) @name) @definition.function
(compact_constructor_declaration name: (identifier) @name) @definition.function

(method_invocation !object name: (identifier) @callee) @call
(method_invocation object: (_) @receiver name: (identifier) @callee) @call
(object_creation_expression type: (_) @callee) @call

(type_identifier) @reference
(marker_annotation name: (_) @reference)
(annotation name: (_) @reference)
(method_reference . (_) @receiver . (identifier) @reference .)
(field_access object: (_) @receiver field: (identifier) @reference)
(argument_list (identifier) @reference)
(return_statement (identifier) @reference)
(variable_declarator value: (identifier) @reference)
(assignment_expression right: (identifier) @reference)

(import_declaration (scoped_identifier scope: (_) @import.module name: (identifier) @import.name) .) @import
(import_declaration (_) @import.module . (asterisk) @import.name) @import
"""

_KOTLIN_BASES = """(delegation_specifiers (delegation_specifier [
    (user_type) @bases
    (constructor_invocation (user_type) @bases)
    (explicit_delegation (user_type) @bases)]))"""

KOTLIN_QUERY = rf"""
((class_declaration (modifiers (class_modifier) @_modifier)? "class" name: (identifier) @name {_KOTLIN_BASES}?)
  @definition.class (#not-eq? @_modifier "enum"))
((class_declaration (modifiers (class_modifier) @_modifier) name: (identifier) @name {_KOTLIN_BASES}?)
  @definition.enum (#eq? @_modifier "enum"))
(class_declaration "interface" name: (identifier) @name {_KOTLIN_BASES}?) @definition.interface
(object_declaration name: (identifier) @name {_KOTLIN_BASES}?) @definition.object
(function_declaration [(user_type) (nullable_type)] @container . name: (identifier) @name) @definition.function
(function_declaration name: (identifier) @name) @definition.function
(type_alias type: (identifier) @name) @definition.type

(call_expression . (identifier) @callee) @call
(call_expression . (navigation_expression . (_) @receiver (identifier) @callee .)) @call

(user_type (identifier) @reference .)
(user_type (identifier) @reference . (type_arguments) .)
(navigation_expression . (_) @receiver (identifier) @reference .)
(callable_reference (identifier) @reference .)
(value_argument (identifier) @reference)
(return_expression (identifier) @reference)
(property_declaration (identifier) @reference)
(assignment right: (identifier) @reference)
"""

# not `type: (_)`: the grammar gives the field to `with` tokens too, and a query then finds the first base only
_SCALA_BASES = "extend: (extends_clause [(type_identifier) (generic_type) (stable_type_identifier)] @bases)"

SCALA_QUERY = rf"""
(class_definition name: (identifier) @name) @definition.class
(class_definition name: (identifier) @name {_SCALA_BASES}) @definition.class
(object_definition name: (identifier) @name) @definition.object
(object_definition name: (identifier) @name {_SCALA_BASES}) @definition.object
(trait_definition name: (identifier) @name) @definition.trait
(trait_definition name: (identifier) @name {_SCALA_BASES}) @definition.trait
(enum_definition name: (identifier) @name) @definition.enum
(enum_definition name: (identifier) @name {_SCALA_BASES}) @definition.enum
(given_definition name: (identifier) @name) @definition.object
(type_definition name: (type_identifier) @name) @definition.type
(extension_definition
  parameters: (parameters . (parameter type: (_) @container))
  body: [
    (function_definition name: (identifier) @name) @definition.function
    (_ (function_definition name: (identifier) @name) @definition.function)])
((function_definition name: (identifier) @name) @definition.function (#not-eq? @name "this"))
(function_declaration name: (identifier) @name) @definition.function

(call_expression function: (identifier) @callee) @call
(call_expression function: (field_expression value: (_) @receiver field: (identifier) @callee)) @call
(call_expression function: (generic_function function: (identifier) @callee)) @call
(call_expression
  function: (generic_function function: (field_expression value: (_) @receiver field: (identifier) @callee))) @call
(instance_expression . [(type_identifier) (generic_type) (stable_type_identifier)] @callee) @call
(infix_expression left: (_) @receiver operator: (identifier) @callee) @call

(type_identifier) @reference
((field_expression value: (_) @receiver field: (identifier) @reference) (#not-eq? @receiver "_"))
(arguments (identifier) @reference)
(val_definition value: (identifier) @reference)
(var_definition value: (identifier) @reference)
(assignment_expression right: (identifier) @reference)
"""

_KEYWORDS = frozenset({"this", "super", "null", "true", "false"})


def _walk(root: Node, types: frozenset[str]) -> list[Node]:
    """The nodes of `types` under `root` in source order (not below one of them), at most
    `MAX_IMPORT_NODES` visited."""
    found: list[Node] = []
    stack = [root]
    visited = 0
    while stack and visited < MAX_IMPORT_NODES:
        node = stack.pop()
        visited += 1
        if node.type in types:
            found.append(node)
        else:
            stack.extend(reversed(node.named_children))
    return found


def _text(node: Node | None) -> str:
    return (node.text or b"").decode("utf-8", errors="replace") if node is not None else ""


def _binding(path: list[str], alias: str, line: int) -> list[ImportBinding]:
    """The binding of `alias` to the dotted `path` (none when either is empty); backquoted names unquoted."""
    target = ".".join(part.strip("`") for part in path if part.strip("`"))
    alias = alias.strip("`")
    return [ImportBinding(alias=alias, target=target, line=line)] if target and alias else []


def kotlin_imports(root: Node, _path: str) -> list[ImportBinding]:
    """`import a.b.C` (C -> a.b.C), `import a.b.C as D` (D -> a.b.C), `import a.b.*` (* -> a.b)."""
    out: list[ImportBinding] = []
    for node in _walk(root, frozenset({"import"})):
        names = next((c for c in node.named_children if c.type == "qualified_identifier"), None)
        if names is None:
            continue
        parts = [_text(c) for c in names.named_children if c.type == "identifier"]
        line = node.start_point.row + 1
        renamed = next((_text(c) for c in node.named_children if c.type == "identifier"), None)
        if any(c.type == "*" for c in node.children):
            out.extend(_binding(parts, "*", line))
        elif parts:
            out.extend(_binding(parts, renamed or parts[-1], line))
    return out


def scala_imports(root: Node, _path: str) -> list[ImportBinding]:
    """Scala 2 and 3 imports: `a.b.C`, `a.b._` / `a.b.*`, `a.b.{C, D => E, F as G, _}`, `a.B as C`,
    several paths after one `import`; a selector renamed to `_` (hidden) binds nothing."""
    out: list[ImportBinding] = []
    for node in _walk(root, frozenset({"import_declaration"})):
        line = node.start_point.row + 1
        parts: list[str] = []
        used = False  # whether `parts` were bound by a selector, a wildcard or a rename
        for index, child in enumerate(node.children):
            if child.type == "identifier" and node.field_name_for_child(index) == "path":
                parts.append(_text(child))
                continue
            if child.type == ",":
                if parts and not used:
                    out.extend(_binding(parts, parts[-1], line))
                parts, used = [], False
                continue
            if child.type in _SELECTORS:
                used = True
                for alias, name in _selectors(child):
                    out.extend(_binding(parts if name == "*" else [*parts, name], alias, line))
        if parts and not used:
            out.extend(_binding(parts, parts[-1], line))
    return out


_SELECTORS = frozenset(
    {"namespace_wildcard", "arrow_renamed_identifier", "as_renamed_identifier", "namespace_selectors"}
)


def _selectors(node: Node) -> list[tuple[str, str]]:
    """(alias, name) pairs an import's selector node binds; name "*" for a wildcard."""
    if node.type == "namespace_selectors":
        return [pair for child in node.named_children for pair in _selector(child)]
    return _selector(node)


def _selector(node: Node) -> list[tuple[str, str]]:
    """What one selector binds: a name, a renamed name (none when renamed to `_`), a wildcard."""
    if node.type == "identifier":
        return [(_text(node), _text(node))]
    if node.type == "namespace_wildcard":
        return [("*", "*")]
    if node.type in ("arrow_renamed_identifier", "as_renamed_identifier"):
        name, alias = node.child_by_field_name("name"), node.child_by_field_name("alias")
        if name is not None and alias is not None and alias.type != "wildcard":
            return [(_text(alias), _text(name))]
    return []


JAVA = GraphSpec(
    language="java",
    query=JAVA_QUERY,
    implicit_members=True,
    module_style=ModuleStyle.FOLDER,
    keywords=_KEYWORDS,
)

KOTLIN = GraphSpec(
    language="kotlin",
    query=KOTLIN_QUERY,
    imports=kotlin_imports,
    implicit_members=True,
    module_style=ModuleStyle.FOLDER,
    keywords=_KEYWORDS | {"it"},
)

SCALA = GraphSpec(
    language="scala",
    query=SCALA_QUERY,
    imports=scala_imports,
    implicit_members=True,
    module_style=ModuleStyle.FOLDER,
    keywords=_KEYWORDS | {"_"},
)

SPECS: tuple[GraphSpec, ...] = (JAVA, KOTLIN, SCALA)
