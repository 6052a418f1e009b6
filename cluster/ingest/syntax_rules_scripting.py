"""Which syntax nodes become chunks in the languages of this group (see `cluster.ingest.syntax_rules`).

PHP: functions, and classes, interfaces, traits and enums split into their methods when big; a braced
`namespace X { ... }` holds top-level definitions. Ruby: methods (`def x`, `def self.x`), and classes
and modules split into their methods when big (nested ones too). Lua: `function f`, `local function f`,
`function M.f` and `function M:f` (Bash's rules are in `cluster.ingest.syntax_rules`).
"""

from __future__ import annotations

from collections.abc import Mapping

from cluster.ingest.syntax_rules import KIND_FUNCTION, KIND_METHOD, SyntaxRules

RULES: Mapping[str, SyntaxRules] = {
    "php": SyntaxRules(
        definitions={"function_definition": KIND_FUNCTION, "method_declaration": KIND_METHOD},
        containers={
            "class_declaration": "class",
            "interface_declaration": "interface",
            "trait_declaration": "trait",
            "enum_declaration": "enum",
        },
        namespaces=frozenset({"namespace_definition"}),
    ),
    "ruby": SyntaxRules(
        definitions={"method": KIND_FUNCTION, "singleton_method": KIND_METHOD},
        containers={"class": "class", "module": "module"},
    ),
    "lua": SyntaxRules(definitions={"function_declaration": KIND_FUNCTION}),
}
