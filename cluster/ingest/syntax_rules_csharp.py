"""Which syntax nodes become chunks in the languages of this group (see `cluster.ingest.syntax_rules`).

C#: types are containers (split into members when big); methods, constructors, delegates and enums
are chunked whole; a block namespace's body holds top-level definitions (a file-scoped namespace's
declarations are already its siblings). Properties, fields, events, operators and destructors (whose
name is the type's) stay with the rest of their type.
"""

from __future__ import annotations

from collections.abc import Mapping

from cluster.ingest.syntax_rules import KIND_METHOD, SyntaxRules

RULES: Mapping[str, SyntaxRules] = {
    "csharp": SyntaxRules(
        definitions={
            "method_declaration": KIND_METHOD,
            "constructor_declaration": KIND_METHOD,
            "enum_declaration": "enum",
            "delegate_declaration": "type",
        },
        containers={
            "class_declaration": "class",
            "interface_declaration": "interface",
            "struct_declaration": "struct",
            "record_declaration": "record",
        },
        namespaces=frozenset({"namespace_declaration"}),
    ),
}
