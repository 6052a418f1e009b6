"""The code graph of C, C++ and C# (see `cluster.graph.spec` for the captures).

C and C++: functions (with pointer/reference return declarators), structs, unions, enums, typedefs,
macros (their name's line only); C++ classes with their bases, in-class methods and constructors,
out-of-class `Foo::bar` definitions (`Foo` is their @container, whatever namespaces precede it),
`using X = ...` aliases.
Namespaces are not definitions: `ns::Foo::bar` and an in-class `bar` both read `Foo.bar`. Calls:
`f()`, `obj.f()`, `p->f()`, `Ns::f()` (the innermost scope is the receiver), `new Foo()`,
`Foo x(...)` / `Foo x{...}` as a call of `Foo`. `#include "x.h"` binds "*" to the header's module
key (resolved against the including file's folder, as a compiler first looks); `<x.h>` as written.

C#: classes, interfaces, structs, records, enums with their bases; methods, constructors, local
functions, delegates; `new Foo()`, target-typed `Foo x = new(...)`; `using X.Y;` (and `using static`)
bind "*" to the namespace, `using A = X.Y;` binds `A`. Namespaces are folders (ModuleStyle.FOLDER).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from tree_sitter import Node

from cluster.graph.spec import GraphSpec, ModuleStyle
from cluster.types import ImportBinding

# --- C and C++ -------------------------------------------------------------------------------------

_POINTER = "(pointer_declarator declarator: {})"
_C_WRAPPERS = ("{}", _POINTER, _POINTER.format(_POINTER))  # f(), *f(), **f()
_CPP_WRAPPERS = (*_C_WRAPPERS, "(reference_declarator {})")  # &f()

_C_FUNCTIONS = ("(function_declarator declarator: (identifier) @name)",)
_SCOPED = "(qualified_identifier scope: (_) @container name: (identifier) @name)"
_CPP_FUNCTIONS = (
    "(function_declarator declarator: [(identifier) (field_identifier)] @name)",
    f"(function_declarator declarator: {_SCOPED})",  # Foo::bar
    f"(function_declarator declarator: (qualified_identifier name: {_SCOPED}))",  # ns::Foo::bar
    f"(function_declarator declarator: (qualified_identifier name: (qualified_identifier name: {_SCOPED})))",
)


def _functions(inner: tuple[str, ...], wrappers: tuple[str, ...]) -> str:
    """A definition pattern per function declarator form, under each return-type declarator."""
    return "\n".join(
        f"(function_definition declarator: {wrapper.format(form)}) @definition.function"
        for form in inner
        for wrapper in wrappers
    )


_C_TYPES = r"""
(struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
(union_specifier name: (type_identifier) @name body: (_)) @definition.union
(enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
(type_definition type: (struct_specifier !name body: (_)) declarator: (type_identifier) @name) @definition.struct
(type_definition type: (union_specifier !name body: (_)) declarator: (type_identifier) @name) @definition.union
(type_definition type: (enum_specifier !name body: (_)) declarator: (type_identifier) @name) @definition.enum
(type_definition
  type: [(struct_specifier name: (_) @_tag body: (_)) (union_specifier name: (_) @_tag body: (_))
         (enum_specifier name: (_) @_tag body: (_))]
  declarator: (type_identifier) @name @definition.type
  (#not-eq? @name @_tag))
(type_definition
  type: [(primitive_type) (type_identifier) (sized_type_specifier)
         (struct_specifier !body) (union_specifier !body) (enum_specifier !body)]
  declarator: [(type_identifier) @name (pointer_declarator declarator: (type_identifier) @name)]) @definition.type
(type_definition
  declarator: (function_declarator
    declarator: (parenthesized_declarator (pointer_declarator declarator: (type_identifier) @name)))) @definition.type
(preproc_function_def name: (identifier) @name @definition.macro)
(preproc_def name: (identifier) @name @definition.macro)
"""

_C_USES = r"""
(call_expression function: (identifier) @callee) @call
(call_expression function: (field_expression argument: (_) @receiver field: (field_identifier) @callee)) @call

(type_identifier) @reference
(argument_list (identifier) @reference)
(init_declarator value: (identifier) @reference)
(assignment_expression right: (identifier) @reference)
(return_statement (identifier) @reference)
(initializer_list (identifier) @reference)
(initializer_pair value: (identifier) @reference)
(field_expression argument: (_) @receiver field: (field_identifier) @reference)
"""

C_QUERY = "\n".join((_functions(_C_FUNCTIONS, _C_WRAPPERS), _C_TYPES, _C_USES))

_CPP_BASES = "(base_class_clause [(type_identifier) (qualified_identifier) (template_type)] @bases)?"
_CALLEE = "[(identifier) @callee (template_function name: (identifier) @callee)]"
_SCOPED_CALLEE = f"(qualified_identifier scope: (_) @receiver name: {_CALLEE})"
_CONSTRUCTED = "[(type_identifier) @callee (template_type name: (type_identifier) @callee)]"
_INITIALISED = "declarator: (init_declarator value: [(argument_list) (initializer_list)])"

_CPP_EXTRA = rf"""
(class_specifier name: (type_identifier) @name {_CPP_BASES} body: (_)) @definition.class
(struct_specifier name: (type_identifier) @name {_CPP_BASES} body: (_)) @definition.struct
(alias_declaration name: (type_identifier) @name) @definition.type

(call_expression function: (template_function name: (identifier) @callee)) @call
(call_expression
  function: (field_expression argument: (_) @receiver field: (template_method name: (field_identifier) @callee))) @call
(call_expression function: {_SCOPED_CALLEE}) @call
(call_expression function: (qualified_identifier name: {_SCOPED_CALLEE})) @call
(call_expression function: (qualified_identifier name: (qualified_identifier name: {_SCOPED_CALLEE}))) @call
(new_expression type: {_CONSTRUCTED}) @call
(new_expression type: (qualified_identifier scope: (_) @receiver name: {_CONSTRUCTED})) @call
(declaration type: {_CONSTRUCTED} {_INITIALISED}) @call
(declaration type: (qualified_identifier scope: (_) @receiver name: {_CONSTRUCTED}) {_INITIALISED}) @call

(qualified_identifier scope: (namespace_identifier) @receiver name: (identifier) @reference)
"""

# struct_specifier: C++ has its own pattern (with bases) in _CPP_EXTRA
_CPP_TYPES = _C_TYPES.replace("(struct_specifier name: (type_identifier) @name body: (_)) @definition.struct\n", "")
CPP_QUERY = "\n".join((_functions(_CPP_FUNCTIONS, _CPP_WRAPPERS), _CPP_TYPES, _C_USES, _CPP_EXTRA))

_HEADER_SUFFIX = re.compile(r"\.(h|hh|hpp|hxx|h\+\+|inl|ipp|tpp|c|cc|cpp|cxx)$", re.IGNORECASE)
_INCLUDE_HOLDERS = frozenset(
    {
        "translation_unit",
        "preproc_if",
        "preproc_ifdef",
        "preproc_else",
        "preproc_elif",
        "preproc_elifdef",
        "linkage_specification",
        "namespace_definition",
        "declaration_list",
    }
)


def _text(node: Node | None) -> str:
    return (node.text or b"").decode("utf-8", errors="replace") if node is not None else ""


def _include_target(written: str, quoted: bool, path: str) -> str:
    """The module key of an included header: a quoted one relative to the including file's folder."""
    parts = list(PurePosixPath(path).parent.parts) if quoted else []
    for piece in _HEADER_SUFFIX.sub("", written.strip()).replace("\\", "/").split("/"):
        if piece == "..":
            if parts:
                parts.pop()
        elif piece not in (".", ""):
            parts.append(piece)
    return ".".join(part for part in parts if part not in ("", "."))


def _cfamily_binding(node: Node, path: str) -> ImportBinding | None:
    line = node.start_point.row + 1
    if node.type == "preproc_include":
        target_node = node.child_by_field_name("path")
        if target_node is None or target_node.type not in ("string_literal", "system_lib_string"):
            return None  # #include MACRO
        quoted = target_node.type == "string_literal"
        target = _include_target(_text(target_node).strip('"<>'), quoted, path)
        return ImportBinding(alias="*", target=target, line=line) if target else None
    named = node.named_children
    if node.type != "using_declaration" or not named:
        return None
    target = _text(named[-1]).replace("::", ".").strip(".")
    if not target:
        return None
    if any(child.type == "namespace" for child in node.children):  # using namespace std;
        return ImportBinding(alias="*", target=target, line=line)
    return ImportBinding(alias=target.rsplit(".", 1)[-1], target=target, line=line)  # using std::string;


def cfamily_imports(root: Node, path: str) -> list[ImportBinding]:
    """`#include`s (and C++ `using` declarations) at file level, in namespaces and `#if` blocks."""
    found: list[ImportBinding] = []
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.named_children:
            if child.type in _INCLUDE_HOLDERS:
                stack.append(child)
            elif (binding := _cfamily_binding(child, path)) is not None:
                found.append(binding)
    return sorted(found, key=lambda binding: binding.line)


_C_KEYWORDS = frozenset({"NULL", "true", "false", "nullptr", "this", "sizeof", "defined"})

C = GraphSpec(
    language="c",
    query=C_QUERY,
    imports=cfamily_imports,
    self_names=frozenset(),
    super_names=frozenset(),
    global_names=True,
    module_style=ModuleStyle.FILE,
    separators=("->", "."),
    keywords=_C_KEYWORDS,
)

CPP = GraphSpec(
    language="cpp",
    query=CPP_QUERY,
    imports=cfamily_imports,
    self_names=frozenset({"this", "*this"}),
    super_names=frozenset(),
    implicit_members=True,
    global_names=True,
    module_style=ModuleStyle.FILE,
    separators=("::", "->", "."),
    keywords=_C_KEYWORDS,
)

# --- C# --------------------------------------------------------------------------------------------

_CS_BASES = "(base_list [(identifier) (generic_name) (qualified_name)] @bases)?"
_CS_TYPE = "[(identifier) @reference (generic_name (identifier) @reference)]"
_CS_CALLEE = "[(identifier) @callee (generic_name (identifier) @callee)]"

CSHARP_QUERY = rf"""
(class_declaration name: (identifier) @name {_CS_BASES}) @definition.class
(interface_declaration name: (identifier) @name {_CS_BASES}) @definition.interface
(struct_declaration name: (identifier) @name {_CS_BASES}) @definition.struct
(record_declaration name: (identifier) @name {_CS_BASES}) @definition.record
(enum_declaration name: (identifier) @name) @definition.enum
(method_declaration name: (identifier) @name) @definition.function
(constructor_declaration name: (identifier) @name) @definition.function
(local_function_statement name: (identifier) @name) @definition.function
(delegate_declaration name: (identifier) @name) @definition.type

(invocation_expression function: {_CS_CALLEE}) @call
(invocation_expression function: (member_access_expression expression: _ @receiver name: {_CS_CALLEE})) @call
(invocation_expression
  function: (conditional_access_expression
    condition: (_) @receiver (member_binding_expression name: {_CS_CALLEE}))) @call
(object_creation_expression type: {_CS_CALLEE}) @call
(object_creation_expression type: (qualified_name qualifier: (_) @receiver name: {_CS_CALLEE})) @call
(variable_declaration type: {_CS_CALLEE} (variable_declarator (implicit_object_creation_expression))) @call

(parameter type: {_CS_TYPE})
(variable_declaration type: {_CS_TYPE})
(property_declaration type: {_CS_TYPE})
(method_declaration returns: {_CS_TYPE})
(type_argument_list (identifier) @reference)
(base_list {_CS_TYPE})
(typeof_expression type: (identifier) @reference)
(cast_expression type: (identifier) @reference)
(attribute name: (identifier) @reference)
(argument (identifier) @reference)
(member_access_expression expression: (identifier) @receiver name: (identifier) @reference)
"""

_GENERIC_ARGUMENTS = re.compile(r"<[^<>]*>")


def _csharp_binding(node: Node) -> ImportBinding | None:
    alias = node.child_by_field_name("name")
    names = [child for child in node.named_children if child.type in ("identifier", "qualified_name")]
    if alias is not None:
        names = [child for child in names if child != alias]
    if not names:
        return None
    target = _text(names[-1])
    for _ in range(4):
        target = _GENERIC_ARGUMENTS.sub("", target)
    target = "".join(target.split()).replace("global::", "").strip(".")
    if not target:
        return None
    return ImportBinding(alias=_text(alias) if alias is not None else "*", target=target, line=node.start_point.row + 1)


def csharp_imports(root: Node, path: str) -> list[ImportBinding]:
    """`using X.Y;` and `using static X.Y;` bind "*" to X.Y, `using A = X.Y;` binds A, at file level
    and in namespaces."""
    found: list[ImportBinding] = []
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.named_children:
            if child.type in ("namespace_declaration", "declaration_list"):
                stack.append(child)
            elif child.type == "using_directive" and (binding := _csharp_binding(child)) is not None:
                found.append(binding)
    return sorted(found, key=lambda binding: binding.line)


CSHARP = GraphSpec(
    language="csharp",
    query=CSHARP_QUERY,
    imports=csharp_imports,
    self_names=frozenset({"this"}),
    super_names=frozenset({"base"}),
    implicit_members=True,
    module_style=ModuleStyle.FOLDER,
    keywords=frozenset({"this", "base", "var", "null", "true", "false", "nameof", "value"}),
)

SPECS: tuple[GraphSpec, ...] = (C, CPP, CSHARP)
