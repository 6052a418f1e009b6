"""The code graph of PHP, Ruby, Lua and Bash (see `cluster.graph.spec` for the captures).

Their imports are read by small import readers (`GraphSpec.imports`) rather than by the specs'
queries: a `require_relative`, a `require_once __DIR__ . '/x.php'`, a `source "$(dirname "$0")/x.sh"`
is relative to the file's folder, and a Lua `require` or a Bash `source` binds its alias by where it
stands, neither of which a capture can say.
"""

from __future__ import annotations

import re
import threading

from tree_sitter import Language, Node, Query, QueryCursor

from cluster.graph.modules import normalise_module
from cluster.graph.spec import GraphSpec, ModuleStyle
from cluster.ingest.languages import GRAMMARS
from cluster.types import ImportBinding

PHP_QUERY = r"""
(class_declaration name: (name) @name) @definition.class
(class_declaration name: (name) @name (base_clause [(name) (qualified_name)] @bases)) @definition.class
(class_declaration name: (name) @name (class_interface_clause [(name) (qualified_name)] @bases)) @definition.class
(class_declaration
  name: (name) @name
  body: (declaration_list (use_declaration [(name) (qualified_name)] @bases))) @definition.class
(interface_declaration name: (name) @name) @definition.interface
(interface_declaration name: (name) @name (base_clause [(name) (qualified_name)] @bases)) @definition.interface
(trait_declaration name: (name) @name) @definition.trait
(enum_declaration name: (name) @name) @definition.enum
(enum_declaration name: (name) @name (class_interface_clause [(name) (qualified_name)] @bases)) @definition.enum
(function_definition name: (name) @name) @definition.function
(method_declaration name: (name) @name) @definition.function

(function_call_expression function: (name) @callee) @call
(function_call_expression function: (qualified_name prefix: (_)? @receiver (name) @callee .)) @call
(member_call_expression object: (_) @receiver name: (name) @callee) @call
(nullsafe_member_call_expression object: (_) @receiver name: (name) @callee) @call
(scoped_call_expression scope: (_) @receiver name: (name) @callee) @call
(object_creation_expression (name) @callee) @call
(object_creation_expression (qualified_name prefix: (_)? @receiver (name) @callee .)) @call

(named_type [(name) (qualified_name)] @reference)
(base_clause [(name) (qualified_name)] @reference)
(class_interface_clause [(name) (qualified_name)] @reference)
(use_declaration [(name) (qualified_name)] @reference)
(class_constant_access_expression . [(name) (qualified_name)] @reference)
(scoped_property_access_expression scope: [(name) (qualified_name)] @reference)
(binary_expression right: [(name) (qualified_name)] @reference)
(argument (name) @reference)
(member_access_expression object: (_) @receiver name: (name) @reference)
"""

RUBY_QUERY = r"""
(class name: [(constant) (scope_resolution)] @name) @definition.class
(class name: [(constant) (scope_resolution)] @name superclass: (superclass (_) @bases)) @definition.class
(class
  name: [(constant) (scope_resolution)] @name
  body: (body_statement
    (call
      method: (identifier) @_mixin (#any-of? @_mixin "include" "prepend" "extend")
      arguments: (argument_list [(constant) (scope_resolution)] @bases)))) @definition.class
(module name: [(constant) (scope_resolution)] @name) @definition.module
(module
  name: [(constant) (scope_resolution)] @name
  body: (body_statement
    (call
      method: (identifier) @_mixin (#any-of? @_mixin "include" "prepend" "extend")
      arguments: (argument_list [(constant) (scope_resolution)] @bases)))) @definition.module
(method name: (_) @name) @definition.function
(singleton_method name: (_) @name) @definition.function

(call receiver: (_) @receiver method: (identifier) @callee (#not-eq? @callee "new")) @call
(call method: (identifier) @callee !receiver) @call
(call receiver: (constant) @callee method: (identifier) @_new (#eq? @_new "new")) @call
(call
  receiver: (scope_resolution scope: (_) @receiver name: (constant) @callee)
  method: (identifier) @_new (#eq? @_new "new")) @call
((body_statement (identifier) @callee @call))
((program (identifier) @callee @call))

(scope_resolution scope: (_) @receiver name: (constant) @reference)
(scope_resolution scope: (constant) @reference)
(superclass (constant) @reference)
(argument_list (constant) @reference)
(argument_list (identifier) @reference)
(pair value: [(constant) (identifier)] @reference)
(assignment right: [(constant) (identifier)] @reference)
(array (constant) @reference)
(exceptions (constant) @reference)
(call receiver: (constant) @reference)
(block_argument (simple_symbol) @reference)
"""

LUA_QUERY = r"""
(function_declaration name: (identifier) @name) @definition.function
(function_declaration name: (dot_index_expression table: (_) @container field: (identifier) @name)) @definition.function
(function_declaration
  name: (method_index_expression table: (_) @container method: (identifier) @name)) @definition.function
(assignment_statement
  (variable_list name: (identifier) @name)
  (expression_list value: (function_definition))) @definition.function
(assignment_statement
  (variable_list name: (dot_index_expression table: (_) @container field: (identifier) @name))
  (expression_list value: (function_definition))) @definition.function

(function_call name: (identifier) @callee) @call
(function_call name: (dot_index_expression table: (_) @receiver field: (identifier) @callee)) @call
(function_call name: (method_index_expression table: (_) @receiver method: (identifier) @callee)) @call

(dot_index_expression table: (_) @receiver field: (identifier) @reference)
(arguments (identifier) @reference)
(expression_list value: (identifier) @reference)
(field value: (identifier) @reference)
(return_statement (expression_list (identifier) @reference))
"""

BASH_QUERY = r"""
(function_definition name: (word) @name) @definition.function

(command name: (command_name (word) @callee)) @call

(command
  name: (command_name (word) @_trap (#eq? @_trap "trap"))
  .
  argument: (word) @reference)
"""

# --- imports -----------------------------------------------------------------------------------------

_PHP_IMPORTS = r"""
(namespace_use_declaration
  (namespace_use_clause . [(name) (qualified_name)] @module alias: (name)? @alias)) @use
(namespace_use_declaration
  (namespace_name) @prefix
  body: (namespace_use_group (namespace_use_clause . [(name) (qualified_name)] @module alias: (name)? @alias))) @use
[(require_expression) (require_once_expression) (include_expression) (include_once_expression)] @include
"""
_RUBY_IMPORTS = r"""
(call
  method: (identifier) @how (#any-of? @how "require" "require_relative" "load")
  arguments: (argument_list . (string (string_content) @module) .)) @require
(call
  method: (identifier) @how (#eq? @how "autoload")
  arguments: (argument_list . (simple_symbol) @alias . (string (string_content) @module) .)) @require
"""
_LUA_IMPORTS = r"""
(function_call
  name: (identifier) @how (#eq? @how "require")
  arguments: (arguments . (string content: (string_content) @module) .)) @require
"""
_BASH_IMPORTS = r"""
(command
  name: (command_name (word) @how (#any-of? @how "source" "."))
  .
  argument: (_) @module) @require
"""
_IMPORT_QUERIES = {"php": _PHP_IMPORTS, "ruby": _RUBY_IMPORTS, "lua": _LUA_IMPORTS, "bash": _BASH_IMPORTS}
_COMPILED: dict[str, Query] = {}
_LOCK = threading.Lock()
_LEADING_EXPANSION = re.compile(r"""^(?:\$\{[^}]*\}|\$\((?:[^()]|\([^()]*\))*\)|\$\w+|`[^`]*`)""")
_PHP_DIR = re.compile(r"^(?:__DIR__|dirname\(\s*__FILE__\s*\))$")


def _matches(language: str, root: Node) -> list[dict[str, list[Node]]]:
    with _LOCK:
        query = _COMPILED.get(language)
        if query is None:
            query = _COMPILED[language] = Query(Language(GRAMMARS[language]()), _IMPORT_QUERIES[language])
    return [captures for _, captures in QueryCursor(query).matches(root)]


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")


def _line(node: Node) -> int:
    return node.start_point.row + 1


def _relative(path_text: str) -> str:
    """A path the file's folder is the base of, written so `normalise_module` resolves it there."""
    return path_text if path_text.startswith(("./", "../", "/")) else f"./{path_text}"


def _binding(alias: str, written: str, line: int, path: str, spec: GraphSpec) -> list[ImportBinding]:

    target = normalise_module(written, path, spec)
    return [ImportBinding(alias=alias, target=target, line=line)] if target and alias else []


def php_imports(root: Node, path: str) -> list[ImportBinding]:
    """`use A\\B\\C [as D];` (also `use function`, `use const` and groups `use A\\{B, C as D};`) and
    `require`/`include` (`_once`) of a literal path or `__DIR__ . '/x.php'` (alias "*")."""
    out: list[ImportBinding] = []
    for captures in _matches("php", root):
        if "use" in captures:
            module = _text(captures["module"][0])
            if "prefix" in captures:
                module = f"{_text(captures['prefix'][0])}\\{module}"
            alias = _text(captures["alias"][0]) if "alias" in captures else module.rsplit("\\", 1)[-1]
            out += _binding(alias, module, _line(captures["use"][0]), path, PHP)
        elif (written := _php_include_path(captures["include"][0])) is not None:
            out += _binding("*", written, _line(captures["include"][0]), path, PHP)
    return out


def _php_include_path(node: Node) -> str | None:
    argument = next(iter(node.named_children), None)
    while argument is not None and argument.type == "parenthesized_expression":
        argument = next(iter(argument.named_children), None)
    if argument is not None and argument.type in ("string", "encapsed_string"):
        return _relative(_string_content(argument))
    if argument is not None and argument.type == "binary_expression":
        left, right = argument.child_by_field_name("left"), argument.child_by_field_name("right")
        if left is not None and right is not None and _PHP_DIR.match(_text(left)) and right.type == "string":
            return "." + _string_content(right) if _string_content(right).startswith("/") else None
    return None


def _string_content(node: Node) -> str:
    return "".join(_text(c) for c in node.named_children if c.type == "string_content")


def ruby_imports(root: Node, path: str) -> list[ImportBinding]:
    """`require 'a/b'` (alias "*", target a.b), `require_relative 'x'` and `load 'x.rb'` (relative to
    the file's folder) and `autoload :Name, 'a/b'` (alias Name)."""
    out: list[ImportBinding] = []
    for captures in _matches("ruby", root):
        how, written = _text(captures["how"][0]), _text(captures["module"][0])
        line = _line(captures["require"][0])
        if how == "autoload":
            out += _binding(_text(captures["alias"][0]).lstrip(":"), written, line, path, RUBY)
        elif how == "require":
            out += _binding("*", written, line, path, RUBY)
        else:
            out += _binding("*", _relative(written), line, path, RUBY)
    return out


def lua_imports(root: Node, path: str) -> list[ImportBinding]:
    """`local M = require("a.b")` (alias M), `M = require "a.b"`, `local f = require("a.b").f` (alias f,
    target a.b.f) and a bare `require("a.b")` statement (alias "*")."""
    out: list[ImportBinding] = []
    for captures in _matches("lua", root):
        call, written = captures["require"][0], _text(captures["module"][0])
        value, field = call, None
        parent = call.parent
        if parent is not None and parent.type == "dot_index_expression" and parent.child_by_field_name("table") == call:
            field = parent.child_by_field_name("field")
            value, parent = parent, parent.parent
        target = f"{written}.{_text(field)}" if field is not None else written
        if parent is not None and parent.type in ("chunk", "block") and field is None:
            out += _binding("*", target, _line(call), path, LUA)
        elif (alias := _lua_assigned_name(value)) is not None:
            out += _binding(alias, target, _line(call), path, LUA)
    return out


def _lua_assigned_name(value: Node) -> str | None:
    """The plain name `value` is assigned to (`x` of `local x = value`), None when it is no such value."""
    values = value.parent
    assignment = values.parent if values is not None and values.type == "expression_list" else None
    if values is None or assignment is None or assignment.type != "assignment_statement":
        return None
    names = next((c for c in assignment.named_children if c.type == "variable_list"), None)
    index = next((i for i, c in enumerate(values.named_children) if c == value), None)
    if names is None or index is None or index >= len(names.named_children):
        return None
    name = names.named_children[index]
    return _text(name) if name.type == "identifier" else None


def bash_imports(root: Node, path: str) -> list[ImportBinding]:
    """`source x.sh` and `. x.sh` (alias "*"), relative to the file's folder, also when the path
    starts with an expansion such as `"$(dirname "$0")/x.sh"` or `"${DIR}/x.sh"`."""
    out: list[ImportBinding] = []
    for captures in _matches("bash", root):
        written = _text(captures["module"][0]).strip("\"'")
        stripped = _LEADING_EXPANSION.sub("", written)
        if stripped != written:
            if not stripped.startswith("/"):
                continue
            written = "." + stripped
        if "$" in written or "`" in written or not written:
            continue
        out += _binding("*", _relative(written), _line(captures["require"][0]), path, BASH)
    return out


PHP = GraphSpec(
    language="php",
    query=PHP_QUERY,
    imports=php_imports,
    self_names=frozenset({"$this", "this", "self", "static"}),
    super_names=frozenset({"parent"}),
    global_names=True,
    constructors=frozenset({"__construct"}),
    module_style=ModuleStyle.FILE,
    separators=("\\", "->", "::"),
    keywords=frozenset({"self", "static", "parent", "true", "false", "null", "TRUE", "FALSE", "NULL", "class"}),
)

RUBY = GraphSpec(
    language="ruby",
    query=RUBY_QUERY,
    imports=ruby_imports,
    self_names=frozenset({"self"}),
    super_names=frozenset({"super"}),
    implicit_members=True,
    global_names=True,
    constructors=frozenset({"initialize"}),
    module_style=ModuleStyle.FILE,
    separators=("::",),
    keywords=frozenset(
        {
            "require",
            "require_relative",
            "load",
            "autoload",
            "include",
            "extend",
            "prepend",
            "attr_reader",
            "attr_writer",
            "attr_accessor",
            "private",
            "protected",
            "public",
            "module_function",
            "private_constant",
            "raise",
            "puts",
            "new",
        }
    ),
)

LUA = GraphSpec(
    language="lua",
    query=LUA_QUERY,
    imports=lua_imports,
    self_names=frozenset({"self"}),
    super_names=frozenset(),
    global_names=True,
    module_style=ModuleStyle.FILE,
    separators=(".", ":"),
    keywords=frozenset({"require", "self", "nil", "true", "false"}),
)

BASH = GraphSpec(
    language="bash",
    query=BASH_QUERY,
    imports=bash_imports,
    self_names=frozenset(),
    super_names=frozenset(),
    global_names=True,
    module_style=ModuleStyle.FILE,
    keywords=frozenset(
        {
            "source",
            "echo",
            "printf",
            "set",
            "unset",
            "export",
            "local",
            "declare",
            "readonly",
            "return",
            "exit",
            "shift",
            "cd",
            "test",
            "eval",
            "exec",
            "trap",
            "read",
            "true",
            "false",
        }
    ),
)

SPECS: tuple[GraphSpec, ...] = (PHP, RUBY, LUA, BASH)
