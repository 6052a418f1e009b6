"""The code graph of JavaScript, TypeScript (and TSX) and Go (see `cluster.graph.spec` for the captures).

JavaScript and TypeScript: functions, classes and their methods (constructors are `constructor`),
arrow functions and function expressions named by the variable they are assigned to, calls through
`this`/`super`/modules/objects, `new Foo()` as a call of `Foo`, ES imports (named, default,
namespace) and CommonJS `require`. TypeScript adds interfaces, type aliases, enums, namespaces and
the type names a signature mentions; TSX and JSX add the components an element names.

Go: the folder is the package; methods are qualified by their receiver's type (`Repo.Save`), structs
and interfaces name what they embed as bases, imports bind the package's last path segment.
"""

from __future__ import annotations

from tree_sitter import Node

from cluster.graph.spec import GraphSpec, ModuleStyle
from cluster.types import ImportBinding

# --- JavaScript and TypeScript ----------------------------------------------------------------------

_ES_SHARED = r"""
(function_declaration name: (identifier) @name) @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function
(method_definition name: [(property_identifier) (private_property_identifier)] @name) @definition.function
(variable_declarator
  name: (identifier) @name
  value: [(arrow_function) (function_expression) (generator_function)]) @definition.function

(call_expression function: (identifier) @callee) @call
(call_expression
  function: (member_expression
    object: (_) @receiver
    property: [(property_identifier) (private_property_identifier)] @callee)) @call
(new_expression constructor: (identifier) @callee) @call
(new_expression constructor: (member_expression object: (_) @receiver property: (property_identifier) @callee)) @call

(member_expression object: (_) @receiver property: (property_identifier) @reference)
(arguments (identifier) @reference)
(return_statement (identifier) @reference)
(variable_declarator value: (identifier) @reference)
(assignment_expression right: (identifier) @reference)
(array (identifier) @reference)
(pair value: (identifier) @reference)
(shorthand_property_identifier) @reference
(binary_expression operator: "instanceof" right: (identifier) @reference)
(export_statement value: (identifier) @reference)
(export_specifier name: (identifier) @reference)
(decorator (identifier) @reference)

(import_statement
  (import_clause (named_imports (import_specifier name: (identifier) @import.name !alias)))
  source: (string (string_fragment) @import.module)) @import
(import_statement
  (import_clause (named_imports (import_specifier name: (identifier) @import.name alias: (identifier) @import.alias)))
  source: (string (string_fragment) @import.module)) @import
(import_statement
  (import_clause (identifier) @import.alias)
  source: (string (string_fragment) @import.module)) @import
(import_statement
  (import_clause (namespace_import (identifier) @import.alias))
  source: (string (string_fragment) @import.module)) @import
(_
  (variable_declarator
    name: (identifier) @import.alias
    value: (call_expression
      function: (identifier) @_require
      arguments: (arguments . (string (string_fragment) @import.module) .)))
  (#eq? @_require "require")) @import
(_
  (variable_declarator
    name: (object_pattern (shorthand_property_identifier_pattern) @import.name)
    value: (call_expression
      function: (identifier) @_require
      arguments: (arguments . (string (string_fragment) @import.module) .)))
  (#eq? @_require "require")) @import
(_
  (variable_declarator
    name: (object_pattern (pair_pattern key: (property_identifier) @import.name value: (identifier) @import.alias))
    value: (call_expression
      function: (identifier) @_require
      arguments: (arguments . (string (string_fragment) @import.module) .)))
  (#eq? @_require "require")) @import
"""

_JSX = r"""
(jsx_opening_element name: (identifier) @reference (#match? @reference "^[A-Z]"))
(jsx_self_closing_element name: (identifier) @reference (#match? @reference "^[A-Z]"))
(jsx_expression (identifier) @reference)
"""

_JS_ONLY = r"""
(class_declaration name: (identifier) @name) @definition.class
(class_declaration name: (identifier) @name (class_heritage (_) @bases)) @definition.class
(class name: (identifier) @name) @definition.class
(variable_declarator name: (identifier) @name value: (class)) @definition.class
(field_definition
  property: [(property_identifier) (private_property_identifier)] @name
  value: [(arrow_function) (function_expression)]) @definition.function
(class_heritage (identifier) @reference)
"""

_TS_ONLY = r"""
(class_declaration name: (type_identifier) @name) @definition.class
(abstract_class_declaration name: (type_identifier) @name) @definition.class
(class_declaration name: (type_identifier) @name (class_heritage (extends_clause value: (_) @bases))) @definition.class
(abstract_class_declaration
  name: (type_identifier) @name
  (class_heritage (extends_clause value: (_) @bases))) @definition.class
(class_declaration
  name: (type_identifier) @name
  (class_heritage
    (implements_clause [(type_identifier) (nested_type_identifier) (generic_type)] @bases))) @definition.class
(abstract_class_declaration
  name: (type_identifier) @name
  (class_heritage
    (implements_clause [(type_identifier) (nested_type_identifier) (generic_type)] @bases))) @definition.class
(class name: (type_identifier) @name) @definition.class
(variable_declarator name: (identifier) @name value: (class)) @definition.class
(interface_declaration name: (type_identifier) @name) @definition.interface
(interface_declaration
  name: (type_identifier) @name
  (extends_type_clause type: [(type_identifier) (nested_type_identifier) (generic_type)] @bases)) @definition.interface
(type_alias_declaration name: (type_identifier) @name) @definition.type
(enum_declaration name: (identifier) @name) @definition.enum
(internal_module name: [(identifier) (nested_identifier)] @name) @definition.module
(module name: (identifier) @name) @definition.module
(public_field_definition
  name: [(property_identifier) (private_property_identifier)] @name
  value: [(arrow_function) (function_expression)]) @definition.function
(method_signature name: (property_identifier) @name) @definition.function
(abstract_method_signature name: (property_identifier) @name) @definition.function
(function_signature name: (identifier) @name) @definition.function

(extends_clause value: (identifier) @reference)
(type_annotation (type_identifier) @reference)
(generic_type name: (type_identifier) @reference)
(type_arguments (type_identifier) @reference)
(union_type (type_identifier) @reference)
(intersection_type (type_identifier) @reference)
(array_type (type_identifier) @reference)
(tuple_type (type_identifier) @reference)
(readonly_type (type_identifier) @reference)
(extends_type_clause type: (type_identifier) @reference)
(implements_clause (type_identifier) @reference)
(constraint (type_identifier) @reference)
(as_expression (type_identifier) @reference)
(satisfies_expression (type_identifier) @reference)
(type_alias_declaration value: (type_identifier) @reference)
(type_predicate type: (type_identifier) @reference)
(nested_type_identifier module: (_) @receiver name: (type_identifier) @reference)

(import_statement
  (import_require_clause (identifier) @import.alias source: (string (string_fragment) @import.module))) @import
"""

_ES_KEYWORDS = frozenset({"require", "undefined", "arguments", "this", "super", "NaN", "Infinity"})


def _es_spec(language: str, query: str) -> GraphSpec:
    return GraphSpec(
        language=language,
        query=query,
        self_names=frozenset({"this"}),
        super_names=frozenset({"super"}),
        constructors=frozenset({"constructor"}),
        module_style=ModuleStyle.FILE,
        keywords=_ES_KEYWORDS,
    )


JAVASCRIPT = _es_spec("javascript", _ES_SHARED + _JS_ONLY + _JSX)
TYPESCRIPT = _es_spec("typescript", _ES_SHARED + _TS_ONLY)
TSX = _es_spec("tsx", _ES_SHARED + _TS_ONLY + _JSX)

# --- Go ---------------------------------------------------------------------------------------------

_GO_QUERY = r"""
(function_declaration name: (identifier) @name) @definition.function
(method_declaration
  receiver: (parameter_list (parameter_declaration type: (_) @container))
  name: (field_identifier) @name) @definition.function
(method_elem name: (field_identifier) @name) @definition.function
(type_spec name: (type_identifier) @name type: (struct_type)) @definition.struct
(type_spec
  name: (type_identifier) @name
  type: (struct_type (field_declaration_list
    (field_declaration
      !name
      type: [(type_identifier) (qualified_type) (pointer_type) (generic_type)] @bases)))) @definition.struct
(type_spec name: (type_identifier) @name type: (interface_type)) @definition.interface
(type_spec
  name: (type_identifier) @name
  type: (interface_type (type_elem . [(type_identifier) (qualified_type)] @bases .))) @definition.interface
(type_spec
  name: (type_identifier) @name
  type: [(type_identifier) (qualified_type) (pointer_type) (function_type) (map_type) (slice_type)
         (array_type) (channel_type) (generic_type)]) @definition.type
(type_alias name: (type_identifier) @name) @definition.type
(var_spec name: (identifier) @name . value: (expression_list . (func_literal) .)) @definition.function

(call_expression function: (identifier) @callee) @call
(call_expression function: (selector_expression operand: (_) @receiver field: (field_identifier) @callee)) @call

(_ type: (type_identifier) @reference)
(_ result: (type_identifier) @reference)
(_ element: (type_identifier) @reference)
(_ key: (type_identifier) @reference)
(_ value: (type_identifier) @reference)
(pointer_type (type_identifier) @reference)
(type_elem (type_identifier) @reference)
(qualified_type package: (package_identifier) @receiver name: (type_identifier) @reference)
(selector_expression operand: (_) @receiver field: (field_identifier) @reference)
(argument_list (identifier) @reference)
(return_statement (expression_list (identifier) @reference))
(assignment_statement right: (expression_list (identifier) @reference))
(short_var_declaration right: (expression_list (identifier) @reference))
(keyed_element value: (literal_element (identifier) @reference))
"""

_GO_PREDECLARED = frozenset(
    {
        # constants and the blank identifier
        *("nil", "true", "false", "iota", "_"),
        # builtin functions
        *("append", "cap", "clear", "close", "complex", "copy", "delete", "imag", "len", "make", "max", "min"),
        *("new", "panic", "print", "println", "real", "recover"),
        # predeclared types
        *("any", "bool", "byte", "comparable", "complex64", "complex128", "error", "float32", "float64"),
        *("int", "int8", "int16", "int32", "int64", "rune", "string"),
        *("uint", "uint8", "uint16", "uint32", "uint64", "uintptr"),
    }
)


def _go_package_name(import_path: str) -> str:
    """The name a Go import binds when it names none: the path's last segment, a major-version
    segment (`/v2`) or suffix (`yaml.v3`) skipped, a `go-` prefix dropped (`go-sqlite3` -> `sqlite3`)."""
    segments = [s for s in import_path.split("/") if s]
    if len(segments) > 1 and segments[-1][:1] == "v" and segments[-1][1:].isdigit():
        segments.pop()
    last = segments[-1] if segments else ""
    head, _, tail = last.rpartition(".")
    if head and tail[:1] == "v" and tail[1:].isdigit():
        last = head
    return last.removeprefix("go-").replace("-", "_")


def _go_imports(root: Node, path: str) -> list[ImportBinding]:
    """Every import spec of a Go file: `import "a/b/pkg"` binds `pkg`, `import f "fmt"` binds `f`,
    a dot import is a wildcard (`*`), a blank import binds nothing; targets are the dotted path."""
    del path  # Go import paths are absolute
    specs: list[Node] = []
    for declaration in root.children:
        if declaration.type != "import_declaration":
            continue
        for child in declaration.named_children:
            listed = child.named_children if child.type == "import_spec_list" else [child]
            specs.extend(c for c in listed if c.type == "import_spec")
    bindings: list[ImportBinding] = []
    for spec in specs:
        written = spec.child_by_field_name("path")
        if written is None:
            continue
        import_path = (written.text or b"").decode("utf-8", errors="replace").strip('"`')
        target = ".".join(s for s in import_path.split("/") if s)
        if not target:
            continue
        named = spec.child_by_field_name("name")
        name = (named.text or b"").decode("utf-8", errors="replace") if named is not None else ""
        name = "*" if name == "." else name
        if name == "_":
            continue
        alias = name or _go_package_name(import_path)
        if alias:
            bindings.append(ImportBinding(alias=alias, target=target, line=spec.start_point.row + 1))
    return bindings


GO = GraphSpec(
    language="go",
    query=_GO_QUERY,
    imports=_go_imports,
    self_names=frozenset(),
    super_names=frozenset(),
    implicit_members=False,
    module_style=ModuleStyle.FOLDER,
    keywords=_GO_PREDECLARED,
)

SPECS: tuple[GraphSpec, ...] = (JAVASCRIPT, TYPESCRIPT, TSX, GO)
