"""Which syntax nodes become chunks in the languages of this group (see `cluster.ingest.syntax_rules`).

Java's rules live in `cluster.ingest.syntax_rules`; these are Kotlin's and Scala's. Kotlin's class
bodies are no `body` field in its grammar, so a big Kotlin class is one span (windowed by the chunker)
rather than split into members. Type aliases stay with the module's lines: Kotlin's names itself in a
`type` field, and a Scala `type_definition` would be read as C's by `syntax_spans._symbol` (no symbol).
A Scala `def this(...)` is an auxiliary constructor, chunked as a method named `this`.
"""

from __future__ import annotations

from collections.abc import Mapping

from cluster.ingest.syntax_rules import KIND_FUNCTION, SyntaxRules

RULES: Mapping[str, SyntaxRules] = {
    "kotlin": SyntaxRules(
        definitions={"function_declaration": KIND_FUNCTION},
        containers={
            "class_declaration": "class",
            "object_declaration": "object",
            "companion_object": "object",
        },
    ),
    "scala": SyntaxRules(
        definitions={
            "function_definition": KIND_FUNCTION,
            "function_declaration": KIND_FUNCTION,
            "given_definition": "object",
        },
        containers={
            "class_definition": "class",
            "object_definition": "object",
            "trait_definition": "trait",
            "enum_definition": "enum",
        },
        namespaces=frozenset({"package_clause"}),
    ),
}
