"""Which syntax nodes of each grammar become chunks: definitions chunked whole, containers split
into members when big, wrappers, namespaces, and the kinds a chunk reports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

KIND_WINDOW = "window"
KIND_MODULE = "module"
KIND_SECTION = "section"
KIND_FUNCTION = "function"
KIND_METHOD = "method"


@dataclass(frozen=True)
class SyntaxRules:
    """Which syntax nodes of a grammar become chunks."""

    definitions: Mapping[str, str]  # node type -> kind of a definition chunked whole
    containers: Mapping[str, str] = field(default_factory=dict)  # split into members when big
    wrappers: frozenset[str] = frozenset()  # wrap one definition: decorators, export, template
    namespaces: frozenset[str] = frozenset()  # their body holds top-level definitions
    variables: frozenset[str] = frozenset()  # count when a declarator's value is a function
    member_groups: frozenset[str] = frozenset()  # hold more members of the enclosing body
    needs_body: frozenset[str] = frozenset()  # count only with a body (not a forward decl)


_JS_DEFINITIONS = {
    "function_declaration": KIND_FUNCTION,
    "generator_function_declaration": KIND_FUNCTION,
    "function_expression": KIND_FUNCTION,  # export default function () {}
    "method_definition": KIND_METHOD,
}
_JS_RULES = SyntaxRules(
    definitions=_JS_DEFINITIONS,
    containers={"class_declaration": "class", "class": "class"},
    wrappers=frozenset({"export_statement"}),
    variables=frozenset({"lexical_declaration", "variable_declaration"}),
)
_TS_RULES = SyntaxRules(
    definitions={
        **_JS_DEFINITIONS,
        "method_signature": KIND_METHOD,
        "abstract_method_signature": KIND_METHOD,
        "interface_declaration": "interface",
        "type_alias_declaration": "type",
        "enum_declaration": "enum",
    },
    containers={"class_declaration": "class", "abstract_class_declaration": "class", "class": "class"},
    wrappers=frozenset({"export_statement"}),
    variables=frozenset({"lexical_declaration", "variable_declaration"}),
)
_C_TYPES = {"struct_specifier": "struct", "union_specifier": "union", "enum_specifier": "enum"}
_C_NEEDS_BODY = frozenset({*_C_TYPES, "class_specifier", "type_definition"})

RULES: Mapping[str, SyntaxRules] = {
    "python": SyntaxRules(
        definitions={"function_definition": KIND_FUNCTION},
        containers={"class_definition": "class"},
        wrappers=frozenset({"decorated_definition"}),
    ),
    "go": SyntaxRules(
        definitions={
            "function_declaration": KIND_FUNCTION,
            "method_declaration": KIND_METHOD,
            "type_declaration": "type",
        }
    ),
    "javascript": _JS_RULES,
    "typescript": _TS_RULES,
    "tsx": _TS_RULES,
    "rust": SyntaxRules(
        definitions={
            "function_item": KIND_FUNCTION,
            "function_signature_item": KIND_FUNCTION,
            "struct_item": "struct",
            "enum_item": "enum",
            "union_item": "union",
            "type_item": "type",
            "macro_definition": "macro",
        },
        containers={"impl_item": "impl", "trait_item": "trait"},
        namespaces=frozenset({"mod_item"}),
    ),
    "java": SyntaxRules(
        definitions={
            "method_declaration": KIND_METHOD,
            "constructor_declaration": KIND_METHOD,
            "compact_constructor_declaration": KIND_METHOD,
        },
        containers={
            "class_declaration": "class",
            "interface_declaration": "interface",
            "enum_declaration": "enum",
            "record_declaration": "record",
            "annotation_type_declaration": "interface",
        },
        member_groups=frozenset({"enum_body_declarations"}),
    ),
    "c": SyntaxRules(
        definitions={"function_definition": KIND_FUNCTION, "type_definition": "type", **_C_TYPES},
        needs_body=_C_NEEDS_BODY,
    ),
    "cpp": SyntaxRules(
        definitions={
            "function_definition": KIND_FUNCTION,
            "type_definition": "type",
            "union_specifier": "union",
            "enum_specifier": "enum",
        },
        containers={"class_specifier": "class", "struct_specifier": "struct"},
        wrappers=frozenset({"template_declaration"}),
        namespaces=frozenset({"namespace_definition", "linkage_specification"}),
        needs_body=_C_NEEDS_BODY,
    ),
    "bash": SyntaxRules(definitions={"function_definition": KIND_FUNCTION}),
}
