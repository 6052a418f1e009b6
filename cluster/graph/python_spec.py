"""Python's code graph: functions, classes and their bases, calls through `self`, modules and
aliases, every import form (relative ones made absolute)."""

from __future__ import annotations

from cluster.graph.spec import GraphSpec, ModuleStyle

QUERY = r"""
(class_definition
  name: (identifier) @name
  superclasses: (argument_list [(identifier) (attribute)] @bases)?) @definition.class
(function_definition name: (identifier) @name) @definition.function

(call function: (identifier) @callee) @call
(call function: (attribute object: (_) @receiver attribute: (identifier) @callee)) @call

(decorator (identifier) @reference)
(decorator (attribute object: (_) @receiver attribute: (identifier) @reference))
(attribute object: (_) @receiver attribute: (identifier) @reference)
(type (identifier) @reference)
(argument_list (identifier) @reference)
(keyword_argument value: (identifier) @reference)
(assignment right: (identifier) @reference)
(return_statement (identifier) @reference)
(list (identifier) @reference)
(tuple (identifier) @reference)
(dictionary (pair value: (identifier) @reference))
(expression_statement (identifier) @reference)

(import_statement name: (dotted_name . (identifier) @import.module)) @import  ; `import a.b` binds a
(import_statement name: (aliased_import name: (dotted_name) @import.module alias: (identifier) @import.alias)) @import
(import_from_statement
  module_name: [(dotted_name) (relative_import)] @import.module
  name: (dotted_name) @import.name) @import
(import_from_statement
  module_name: [(dotted_name) (relative_import)] @import.module
  name: (aliased_import name: (dotted_name) @import.name alias: (identifier) @import.alias)) @import
(import_from_statement
  module_name: [(dotted_name) (relative_import)] @import.module
  (wildcard_import) @import.name) @import
"""

PYTHON = GraphSpec(
    language="python",
    query=QUERY,
    self_names=frozenset({"self", "cls"}),
    super_names=frozenset({"super()", "super"}),
    constructors=frozenset({"__init__", "__new__"}),
    module_style=ModuleStyle.PYTHON,
    keywords=frozenset({"True", "False", "None", "self", "cls"}),
)
