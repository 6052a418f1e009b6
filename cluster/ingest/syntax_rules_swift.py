"""Which syntax nodes become chunks in the languages of this group (see `cluster.ingest.syntax_rules`).

Swift: the grammar parses classes, structs, enums, actors and extensions alike as `class_declaration`,
so each chunks as a "class" container named by its type (an extension by the type it extends); its
functions and initialisers are methods (`init` named `Type.init`). Properties, subscripts and `deinit`
stay in the container's own chunks.
"""

from __future__ import annotations

from collections.abc import Mapping

from cluster.ingest.syntax_rules import KIND_FUNCTION, KIND_METHOD, SyntaxRules

RULES: Mapping[str, SyntaxRules] = {
    "swift": SyntaxRules(
        definitions={
            "function_declaration": KIND_FUNCTION,
            "init_declaration": KIND_METHOD,
            "protocol_function_declaration": KIND_METHOD,
            "typealias_declaration": "type",
        },
        containers={"class_declaration": "class", "protocol_declaration": "protocol"},
    ),
}
