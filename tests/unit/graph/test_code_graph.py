"""The code graph's answers over a small Python repository: resolution through imports, aliases,
self and bases, constructors, the same file; ambiguity kept and said; walks at depth; impact."""

from __future__ import annotations

from cluster.graph import CodeGraph, GraphItem, GraphQuery, GraphRow, GraphTool, file_facts

FILES = {
    "shop/pricing.py": """\
from shop.tax import rate as tax_rate
import shop.tax


def subtotal(items):
    return sum(i.price for i in items)


def total(items):
    return subtotal(items) * (1 + tax_rate()) + shop.tax.fee()
""",
    "shop/tax.py": """\
def rate():
    return 0.2


def fee():
    return 1
""",
    "shop/cart.py": """\
import json
from shop import pricing
from shop.pricing import total


class Base:
    def describe(self):
        return self.name()

    def name(self):
        return "base"


class Cart(Base):
    def __init__(self, items):
        self.items = items

    def checkout(self):
        return total(self.items) + pricing.subtotal(self.items)

    def dump(self):
        return json.dumps(self.describe())


def make():
    return Cart([]).checkout()
""",
    "shop/other.py": """\
class Ledger:
    def name(self):
        return "ledger"


def dumps(x):
    return x


def report(thing):
    return thing.name()
""",
    "tests/test_cart.py": """\
from shop.cart import make


def test_make():
    assert make() == 0
""",
}


def graph() -> CodeGraph:
    rows = []
    for path, text in FILES.items():
        facts = file_facts(path, "python", text)
        rows.append(GraphRow(path, "python", facts.definitions, facts.references, facts.imports))
    return CodeGraph("shop", "abc123", rows)


def sites(answer_items: list[GraphItem]) -> list[tuple[str, int, str | None, int]]:
    return sorted((i.path, i.line, i.symbol, i.depth) for i in answer_items)


def test_callers_follow_imports_aliases_and_module_attributes() -> None:
    g = graph()
    answer = g.callers("rate")
    assert [(d.path, d.symbol, d.qualified) for d in answer.definitions] == [("shop/tax.py", "rate", "shop.tax.rate")]
    assert sites(answer.items) == [("shop/pricing.py", 10, "total", 1)]  # called as tax_rate()
    assert sites(g.callers("fee").items) == [("shop/pricing.py", 10, "total", 1)]  # shop.tax.fee()
    assert sites(g.callers("subtotal").items) == [
        ("shop/cart.py", 19, "Cart.checkout", 1),
        ("shop/pricing.py", 10, "total", 1),
    ]
    assert all(i.repo == "shop" and i.commit == "abc123" and i.confidence == 1.0 for i in answer.items)


def test_a_name_imported_from_outside_the_repository_never_reaches_a_definition_of_it() -> None:
    assert sites(graph().callers("dumps").items) == []  # json.dumps is not shop/other.py's dumps


def g_items(answer) -> list:
    return sites(answer.items)


def test_self_calls_reach_the_enclosing_class_and_its_bases() -> None:
    g = graph()
    answer = g.callers("Base.name")
    assert [(i.path, i.line, i.symbol, i.confidence, i.ambiguous) for i in answer.items] == [
        ("shop/cart.py", 8, "Base.describe", 1.0, False),
        ("shop/other.py", 11, "report", 0.25, True),  # thing.name(): Base.name or Ledger.name
    ]
    assert sites(g.callers("describe").items) == [("shop/cart.py", 22, "Cart.dump", 1)]


def test_an_unknown_receiver_is_an_ambiguous_edge_to_every_method_of_that_name() -> None:
    g = graph()
    answer = g.callers("Ledger.name")
    assert [(i.path, i.line, i.confidence, i.ambiguous) for i in answer.items] == [("shop/other.py", 11, 0.25, True)]


def test_a_constructor_is_called_by_whoever_calls_its_class() -> None:
    g = graph()
    assert sites(g.callers("Cart.__init__").items) == [("shop/cart.py", 26, "make", 1)]
    assert sites(g.callers("Cart").items) == [("shop/cart.py", 26, "make", 1)]


def test_callers_walk_to_the_depth_asked_each_site_once() -> None:
    g = graph()
    walked = sites(g.callers("rate", depth=4).items)
    assert walked == [
        ("shop/cart.py", 19, "Cart.checkout", 2),
        ("shop/cart.py", 26, "make", 3),
        ("shop/pricing.py", 10, "total", 1),
        ("tests/test_cart.py", 5, "test_make", 4),
    ]


def test_callees_resolve_each_call_and_keep_the_ones_outside_the_repository() -> None:
    g = graph()
    answer = g.callees("Cart.checkout")
    assert sorted((i.line, i.target, i.target_path) for i in answer.items) == [
        (19, "subtotal", "shop/pricing.py"),
        (19, "total", "shop/pricing.py"),
    ]
    dump = g.callees("dump")
    assert sorted((i.target or "", i.confidence) for i in dump.items) == [("", 0.0), ("Base.describe", 1.0)]
    deeper = g.callees("make", depth=2)
    assert ("total", 2) in {(i.target, i.depth) for i in deeper.items}


def test_an_ambiguous_symbol_is_answered_with_its_candidates_and_a_path_picks_one() -> None:
    g = graph()
    answer = g.callers("name")
    assert answer.items == [] and "2 definitions" in (answer.note or "")
    assert sorted((c.path, c.symbol) for c in answer.candidates) == [
        ("shop/cart.py", "Base.name"),
        ("shop/other.py", "Ledger.name"),
    ]
    assert [d.symbol for d in g.callers("name", path="shop/other.py").definitions] == ["Ledger.name"]
    assert [d.symbol for d in g.callers("shop.other.Ledger.name").definitions] == ["Ledger.name"]
    assert g.callers("nothing_like_it").note == "no definition of 'nothing_like_it' in shop"


def test_references_include_imports_and_mentions() -> None:
    g = graph()
    answer = g.find_references("total")
    assert sorted((i.path, i.line, i.call) for i in answer.items) == [
        ("shop/cart.py", 3, False),
        ("shop/cart.py", 19, True),
    ]


def test_impact_ranks_callers_then_files_then_tests_by_distance() -> None:
    g = graph()
    answer = g.impact("rate", depth=3)
    assert [(f.path, f.depth) for f in answer.files] == [("shop/pricing.py", 1), ("shop/cart.py", 2)]
    assert answer.tests == []
    deeper = g.impact("rate", depth=4)
    assert [(f.path, f.depth) for f in deeper.tests] == [("tests/test_cart.py", 4)]


def test_the_most_called_definitions_count_their_resolved_call_sites() -> None:
    top = {d.symbol: n for d, n in graph().most_called(3)}
    assert top["subtotal"] == 2


def test_an_import_site_is_resolved_in_its_own_language_whatever_was_resolved_before() -> None:
    rows = []
    for path, language, text in [
        ("py/lib.py", "python", "def total():\n    return 1\n"),
        ("py/use.py", "python", "from py.lib import total\n"),
        ("rb/lib.rb", "ruby", "def total\n  1\nend\n"),
        ("rb/use.rb", "ruby", "total\n"),
    ]:
        facts = file_facts(path, language, text)
        rows.append(GraphRow(path, language, facts.definitions, facts.references, facts.imports))
    g = CodeGraph("mixed", None, rows)
    g.callers("total", path="rb/lib.rb")  # resolves a Ruby site last
    answer = g.find_references("total", path="py/lib.py")
    assert [(i.path, i.line, i.call) for i in answer.items] == [("py/use.py", 1, False)]


def test_min_confidence_leaves_out_and_stops_at_the_guesses() -> None:
    g = graph()
    assert [i.line for i in g.callers("Base.name").items] == [8, 11]
    assert [i.line for i in g.callers("Base.name", min_confidence=0.5).items] == [8]  # thing.name() is a 1-in-4 guess
    assert [i.line for i in g.find_references("Ledger.name", min_confidence=0.5).items] == []


def test_a_name_that_is_exactly_one_definitions_qualified_name_picks_it_over_members_of_that_name() -> None:
    rows = []
    for path, text in {
        "m.py": "def wrap(x):\n    return x\n\n\nclass P:\n    def wrap(self):\n        return wrap(1)\n"
    }.items():
        facts = file_facts(path, "python", text)
        rows.append(GraphRow(path, "python", facts.definitions, facts.references, facts.imports))
    g = CodeGraph("m", None, rows)
    assert [d.symbol for d in g.callers("wrap", path="m.py").definitions] == ["wrap"]
    assert [(i.line, i.symbol) for i in g.callers("wrap").items] == [(7, "P.wrap")]
    assert [d.symbol for d in g.callers("P.wrap").definitions] == ["P.wrap"]


def test_a_tool_call_leaves_out_guesses_under_its_default_unless_asked_for_every_one() -> None:
    g = graph()
    asked = GraphQuery(tool=GraphTool.CALLERS, symbol="Base.name")
    assert (asked.least, GraphQuery(tool=GraphTool.IMPACT, symbol="x").least) == (0.5, 0.25)
    assert [i.line for i in g.answer(asked).items] == [8]
    every = asked.model_copy(update={"min_confidence": 0.0})
    assert [i.line for i in g.answer(every).items] == [8, 11]
