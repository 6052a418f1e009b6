"""The code graph of Rust and Swift (see `cluster.graph.spec` for the captures).

Rust: an `impl` block is a definition of kind "impl" named by its type (several may share a name with
the struct and with each other); its functions are methods qualified by that type, and `impl Trait for
Foo` gives that "impl" definition the base `Trait`. `use` declarations are read by `rust_imports`:
`crate::` from the crate root (the nearest `src` folder above the file, else the file's folder),
`self::` and `super::` from the module of the file (and of the inline `mod` blocks around the `use`).
Macro invocations are not calls (their arguments are unparsed token trees).

Swift: a module sees every file's top-level names (`global_names`), a bare call inside a type may call a
member (`implicit_members`), `Foo(...)` is a call of `Foo` that reaches `Foo.init`, and an extension's
members are qualified by the extended type.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from tree_sitter import Node

from cluster.graph.spec import GraphSpec, ModuleStyle
from cluster.types import ImportBinding

__all__ = ["RUST", "SPECS", "SWIFT", "rust_imports"]

RUST_QUERY = r"""
(function_item name: (identifier) @name) @definition.function
(function_signature_item name: (identifier) @name) @definition.function
(struct_item name: (type_identifier) @name) @definition.struct
(union_item name: (type_identifier) @name) @definition.struct
(enum_item name: (type_identifier) @name) @definition.enum
(type_item name: (type_identifier) @name) @definition.type
(trait_item name: (type_identifier) @name) @definition.trait
(trait_item
  name: (type_identifier) @name
  bounds: (trait_bounds [(type_identifier) (scoped_type_identifier) (generic_type)] @bases)) @definition.trait
(impl_item !trait type: (_) @name) @definition.impl
(impl_item trait: (_) @bases type: (_) @name) @definition.impl
(mod_item name: (identifier) @name body: (declaration_list)) @definition.namespace
(macro_definition name: (identifier) @name) @definition.macro

(call_expression function: (identifier) @callee) @call
(call_expression
  function: (scoped_identifier
    path: [(identifier) (scoped_identifier) (self) (super) (crate)] @receiver
    name: (identifier) @callee)) @call
(call_expression
  function: (scoped_identifier path: (generic_type type: (_) @receiver) name: (identifier) @callee)) @call
(call_expression function: (field_expression value: (_) @receiver field: (field_identifier) @callee)) @call
(call_expression function: (generic_function function: (identifier) @callee)) @call
(call_expression
  function: (generic_function
    function: (scoped_identifier
      path: [(identifier) (scoped_identifier) (self) (super) (crate)] @receiver
      name: (identifier) @callee))) @call
(call_expression
  function: (generic_function
    function: (field_expression value: (_) @receiver field: (field_identifier) @callee))) @call

(_ type: [(type_identifier) @reference
          (scoped_type_identifier path: (_) @receiver name: (type_identifier) @reference)])
(_ return_type: [(type_identifier) @reference
                 (scoped_type_identifier path: (_) @receiver name: (type_identifier) @reference)])
(_ trait: [(type_identifier) @reference
           (scoped_type_identifier path: (_) @receiver name: (type_identifier) @reference)])
(_ element: (type_identifier) @reference)
(type_arguments (type_identifier) @reference)
(trait_bounds (type_identifier) @reference)
(tuple_type (type_identifier) @reference)
(struct_expression name: [(type_identifier) @reference
                          (scoped_type_identifier path: (_) @receiver name: (type_identifier) @reference)])
(arguments (identifier) @reference)
(arguments (scoped_identifier path: (_) @receiver name: (identifier) @reference))
(let_declaration value: (identifier) @reference)
(let_declaration value: (scoped_identifier path: (_) @receiver name: (identifier) @reference))
(return_expression (identifier) @reference)
(assignment_expression right: (identifier) @reference)
(field_initializer value: (identifier) @reference)
(field_expression value: (_) @receiver field: (field_identifier) @reference)
"""

_SWIFT_TYPES = (
    ("class", "class"),
    ("struct", "struct"),
    ("enum", "enum"),
    ("actor", "class"),
    ("extension", "extension"),
)
_SWIFT_TYPE_PATTERNS = "\n".join(
    f'(class_declaration declaration_kind: "{keyword}" name: (_) @name) @definition.{kind}\n'
    f'(class_declaration declaration_kind: "{keyword}" name: (_) @name'
    f" (inheritance_specifier inherits_from: (_) @bases)) @definition.{kind}"
    for keyword, kind in _SWIFT_TYPES
)
SWIFT_QUERY = (
    _SWIFT_TYPE_PATTERNS
    + r"""
(protocol_declaration name: (type_identifier) @name) @definition.protocol
(protocol_declaration
  name: (type_identifier) @name (inheritance_specifier inherits_from: (_) @bases)) @definition.protocol
(function_declaration name: (simple_identifier) @name) @definition.function
(protocol_function_declaration name: (simple_identifier) @name) @definition.function
(init_declaration name: "init" @name) @definition.function
(typealias_declaration name: (type_identifier) @name) @definition.type

(call_expression . (simple_identifier) @callee) @call
(call_expression
  . (navigation_expression target: (_) @receiver suffix: (navigation_suffix suffix: (simple_identifier) @callee))) @call
(call_expression . (prefix_expression target: (simple_identifier) @callee)) @call
(constructor_expression constructed_type: (_) @callee) @call

(user_type (type_identifier) @reference)
(value_argument value: (simple_identifier) @reference)
(navigation_expression target: (_) @receiver suffix: (navigation_suffix suffix: (simple_identifier) @reference))
(property_declaration value: (simple_identifier) @reference)
(assignment result: (simple_identifier) @reference)
(control_transfer_statement result: (simple_identifier) @reference)

(import_declaration (identifier) @import.module) @import
"""
)


# --- Rust's `use` ----------------------------------------------------------------------------------

_USE_PATHS = frozenset({"identifier", "scoped_identifier", "crate", "self", "super", "metavariable"})


def rust_imports(root: Node, path: str) -> list[ImportBinding]:
    """The bindings of a Rust file's `use` and `extern crate` declarations, targets as module keys
    (`crate::a::b::c` in `src/x.rs` -> `src.a.b.c`; `super::y` in `src/a/b.rs` -> `src.a.y`)."""
    crate_root, file_module = _rust_modules(path)
    found: list[ImportBinding] = []
    stack: list[tuple[Node, tuple[str, ...]]] = [(root, file_module)]
    while stack:
        node, module = stack.pop()
        for child in node.named_children:
            if child.type == "use_declaration":
                argument = child.child_by_field_name("argument")
                if argument is not None:
                    _use_tree(argument, (), _Scope(crate_root, module, child.start_point.row + 1), found)
            elif child.type == "extern_crate_declaration":
                _extern_crate(child, found)
            elif child.type == "mod_item":
                name, body = child.child_by_field_name("name"), child.child_by_field_name("body")
                if name is not None and body is not None:
                    stack.append((body, (*module, _node_text(name))))
            elif child.named_child_count:
                stack.append((child, module))
    return sorted(found, key=lambda binding: binding.line)


class _Scope:
    def __init__(self, crate_root: tuple[str, ...], module: tuple[str, ...], line: int) -> None:
        self.crate_root = crate_root
        self.module = module
        self.line = line

    def absolute(self, segments: tuple[str, ...]) -> tuple[str, ...]:
        if not segments:
            return ()
        if segments[0] == "crate":
            return (*self.crate_root, *segments[1:])
        if segments[0] == "self":
            return (*self.module, *segments[1:])
        if segments[0] == "super":
            ups = next((i for i, s in enumerate(segments) if s != "super"), len(segments))
            return (*self.module[: max(len(self.module) - ups, 0)], *segments[ups:])
        return segments


def _use_tree(node: Node, prefix: tuple[str, ...], scope: _Scope, found: list[ImportBinding]) -> None:
    kind = node.type
    if kind in _USE_PATHS:
        _bind(_segments(node, prefix), None, scope, found)
    elif kind == "use_as_clause":
        target, alias = node.child_by_field_name("path"), node.child_by_field_name("alias")
        if target is not None and alias is not None:
            _bind(_segments(target, prefix), _node_text(alias), scope, found)
    elif kind == "use_wildcard":
        inner = next((c for c in node.named_children if c.type in _USE_PATHS), None)
        _bind(_segments(inner, prefix) if inner is not None else prefix, "*", scope, found)
    elif kind == "scoped_use_list":
        inner, items = node.child_by_field_name("path"), node.child_by_field_name("list")
        if items is not None:
            _use_tree(items, _segments(inner, prefix) if inner is not None else prefix, scope, found)
    elif kind == "use_list":
        for item in node.named_children:
            _use_tree(item, prefix, scope, found)


def _bind(segments: tuple[str, ...], alias: str | None, scope: _Scope, found: list[ImportBinding]) -> None:
    if len(segments) > 1 and segments[-1] == "self":  # `use a::{self}` binds the module a
        segments = segments[:-1]
    target = ".".join(scope.absolute(segments))
    name = alias or (segments[-1] if segments else "")
    if target and name and name not in ("self", "super", "crate"):
        found.append(ImportBinding(alias=name, target=target, line=scope.line))


def _extern_crate(node: Node, found: list[ImportBinding]) -> None:
    name, alias = node.child_by_field_name("name"), node.child_by_field_name("alias")
    if name is not None:
        target = _node_text(name)
        found.append(
            ImportBinding(alias=_node_text(alias) if alias else target, target=target, line=node.start_point.row + 1)
        )


def _segments(node: Node, prefix: tuple[str, ...]) -> tuple[str, ...]:
    return (*prefix, *(part.strip() for part in _node_text(node).split("::") if part.strip()))


def _rust_modules(path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the crate root's folder, the file's module) as path parts."""
    pure = PurePosixPath(path)
    folder = tuple(part for part in pure.parent.parts if part not in ("", ".", "/"))
    root = folder[: len(folder) - folder[::-1].index("src")] if "src" in folder else folder
    if pure.stem == "mod" or (pure.stem in ("lib", "main") and folder == root):
        return root, folder
    return root, (*folder, pure.stem)


def _node_text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")


RUST = GraphSpec(
    language="rust",
    query=RUST_QUERY,
    imports=rust_imports,
    self_names=frozenset({"self", "Self"}),
    super_names=frozenset(),  # `super::f()` is the parent module, not a base
    module_style=ModuleStyle.FILE,
    separators=("::", "."),
    keywords=frozenset({"self", "Self", "super", "crate", "_"}),
)

SWIFT = GraphSpec(
    language="swift",
    query=SWIFT_QUERY,
    self_names=frozenset({"self"}),
    super_names=frozenset({"super"}),
    implicit_members=True,
    global_names=True,
    constructors=frozenset({"init"}),
    module_style=ModuleStyle.FOLDER,
    keywords=frozenset({"self", "super", "Self", "true", "false", "nil", "$0", "$1", "$2"}),
)

SPECS: tuple[GraphSpec, ...] = (RUST, SWIFT)
