"""The code-graph facts of C, C++ and C# (cluster/graph/cfamily_spec.py): definitions qualified by
their classes (C++'s out-of-class `Foo::bar` by its container), calls with their receivers and
constructor calls, mentions, `#include`s and `using`s as import bindings, and the polyglot fixtures."""

from __future__ import annotations

from pathlib import Path

from cluster.graph import file_facts
from cluster.types import ImportBinding
from tests.support.graph_facts import calls_of, mentions_of

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "polyglot_graph"

C_SOURCE = """\
#include "util/strings.h"
#include "../common/log.h"
#include <stdlib.h>
typedef struct buffer_s { char *data; size_t len; } Buffer;
typedef struct { int code; } Status;
enum Level { LOW, HIGH };
typedef int (*visit_fn)(Buffer *);
#define MAX_LEN 4096
static Buffer *buffer_new(size_t len) {
    Buffer *b = malloc(sizeof(Buffer));
    b->data = xstrdup(len);
    return b;
}
int buffer_each(Buffer *b, visit_fn fn) {
    log_line(LOW);
    b->ops->flush(b);
    return apply(fn, buffer_new);
}
"""

CPP_SOURCE = """\
#include "geo/shape.hpp"
#include <memory>
using namespace std;
using geo::Point;
namespace geo {
class Circle : public Shape, public Named<Circle> {
 public:
  explicit Circle(double r) : r_(r) {}
  double area() const override { return scale(r_); }
  static Circle unit();
 private:
  double r_;
};
template <typename T> T twice(T v) { return v + v; }
}
Circle geo::Circle::unit() { return Circle(1.0); }
void draw(Canvas &c) {
  auto s = std::make_unique<Circle>(2.0);
  Circle local(3.0);
  auto *p = new geo::Circle(4.0);
  c.paint(*s);
  p->area();
  geo::Circle::unit();
  twice<int>(2);
}
"""

CSHARP_SOURCE = """\
using System;
using System.Collections.Generic;
using Json = System.Text.Json.JsonSerializer;
using static System.Math;
namespace Shop.Billing
{
    public interface IPriced { decimal Price(); }
    public class Invoice : Document, IPriced
    {
        private readonly List<Line> lines = new List<Line>();
        public Invoice(Customer customer) : base(customer) { }
        public decimal Price()
        {
            decimal Sum() => Total(lines);
            this.Validate();
            base.Stamp();
            Logger log = new(nameof(Invoice));
            return Round(Sum());
        }
        public string ToJson() => Json.Serialize(this);
    }
    public record Line(string Sku, decimal Amount);
    public enum Status { Draft, Sent }
}
"""


def test_c_functions_types_typedefs_and_macros_are_definitions() -> None:
    facts = file_facts("lib/buf/buffer.c", "c", C_SOURCE)
    assert [(d.qualified, d.kind, d.line, d.end_line, d.bases) for d in facts.definitions] == [
        ("buffer_s", "struct", 4, 4, ()),
        ("Buffer", "type", 4, 4, ()),  # a typedef naming a tagged struct differently
        ("Status", "struct", 5, 5, ()),  # an anonymous struct goes by its typedef
        ("Level", "enum", 6, 6, ()),
        ("visit_fn", "type", 7, 7, ()),
        ("MAX_LEN", "macro", 8, 8, ()),
        ("buffer_new", "function", 9, 13, ()),  # returns a pointer: the name is under a pointer declarator
        ("buffer_each", "function", 14, 18, ()),
    ]


def test_c_calls_carry_their_struct_receivers_and_functions_passed_as_values_are_mentioned() -> None:
    assert calls_of(file_facts("lib/buf/buffer.c", "c", C_SOURCE)) == [
        ("malloc", 10, None, "buffer_new"),
        ("xstrdup", 11, None, "buffer_new"),
        ("log_line", 15, None, "buffer_each"),
        ("flush", 16, "b.ops", "buffer_each"),
        ("apply", 17, None, "buffer_each"),
    ]
    mentions = mentions_of(file_facts("lib/buf/buffer.c", "c", C_SOURCE))
    assert {("Buffer", 9, None), ("visit_fn", 14, None), ("buffer_new", 17, None), ("data", 11, "b")} <= mentions
    assert ("buffer_each", 14, None) not in mentions  # a definition's own name is no mention


def test_c_includes_bind_a_wildcard_to_the_header_module_resolved_from_the_including_folder() -> None:
    assert list(file_facts("lib/buf/buffer.c", "c", C_SOURCE).imports) == [
        ImportBinding(alias="*", target="lib.buf.util.strings", line=1),
        ImportBinding(alias="*", target="lib.common.log", line=2),
        ImportBinding(alias="*", target="stdlib", line=3),
    ]


def test_cpp_classes_methods_and_out_of_class_definitions_share_one_qualification() -> None:
    facts = file_facts("src/circle.cpp", "cpp", CPP_SOURCE)
    assert [(d.qualified, d.kind, d.line, d.end_line, d.bases) for d in facts.definitions] == [
        ("Circle", "class", 6, 13, ("Shape", "Named")),
        ("Circle.Circle", "method", 8, 8, ()),
        ("Circle.area", "method", 9, 9, ()),
        ("twice", "function", 14, 14, ()),  # the namespace qualifies nothing
        ("Circle.unit", "method", 16, 16, ()),  # geo::Circle::unit, defined outside the class
        ("draw", "function", 17, 25, ()),
    ]


def test_cpp_calls_scoped_calls_and_constructions_are_calls_of_their_names() -> None:
    assert calls_of(file_facts("src/circle.cpp", "cpp", CPP_SOURCE)) == [
        ("scale", 9, None, "Circle.area"),
        ("Circle", 16, None, "Circle.unit"),
        ("make_unique", 18, "std", "draw"),
        ("Circle", 19, None, "draw"),  # Circle local(3.0);
        ("Circle", 20, "geo", "draw"),  # new geo::Circle(4.0)
        ("paint", 21, "c", "draw"),
        ("area", 22, "p", "draw"),
        ("unit", 23, "Circle", "draw"),  # geo::Circle::unit(): the innermost scope
        ("twice", 24, None, "draw"),
    ]
    mentions = mentions_of(file_facts("src/circle.cpp", "cpp", CPP_SOURCE))
    assert {("Shape", 6, None), ("Canvas", 17, None), ("Circle", 18, None), ("Point", 4, "geo")} <= mentions


def test_cpp_includes_and_using_declarations_bind_their_names() -> None:
    assert list(file_facts("src/circle.cpp", "cpp", CPP_SOURCE).imports) == [
        ImportBinding(alias="*", target="src.geo.shape", line=1),
        ImportBinding(alias="*", target="memory", line=2),
        ImportBinding(alias="*", target="std", line=3),
        ImportBinding(alias="Point", target="geo.Point", line=4),
    ]


def test_csharp_types_members_and_local_functions_are_qualified_by_their_types() -> None:
    facts = file_facts("Shop/Billing/Invoice.cs", "csharp", CSHARP_SOURCE)
    assert [(d.qualified, d.kind, d.line, d.end_line, d.bases) for d in facts.definitions] == [
        ("IPriced", "interface", 7, 7, ()),
        ("IPriced.Price", "method", 7, 7, ()),
        ("Invoice", "class", 8, 21, ("Document", "IPriced")),
        ("Invoice.Invoice", "method", 11, 11, ()),
        ("Invoice.Price", "method", 12, 19, ()),
        ("Invoice.Price.Sum", "function", 14, 14, ()),
        ("Invoice.ToJson", "method", 20, 20, ()),
        ("Line", "record", 22, 22, ()),
        ("Status", "enum", 23, 23, ()),
    ]


def test_csharp_calls_keep_this_base_and_aliases_as_receivers_and_new_calls_the_type() -> None:
    assert calls_of(file_facts("Shop/Billing/Invoice.cs", "csharp", CSHARP_SOURCE)) == [
        ("List", 10, None, "Invoice"),
        ("Total", 14, None, "Invoice.Price.Sum"),
        ("Validate", 15, "this", "Invoice.Price"),
        ("Stamp", 16, "base", "Invoice.Price"),
        ("Logger", 17, None, "Invoice.Price"),  # Logger log = new(...)
        ("Round", 18, None, "Invoice.Price"),
        ("Sum", 18, None, "Invoice.Price"),
        ("Serialize", 20, "Json", "Invoice.ToJson"),
    ]
    mentions = mentions_of(file_facts("Shop/Billing/Invoice.cs", "csharp", CSHARP_SOURCE))
    assert {("Document", 8, None), ("Line", 10, None), ("Customer", 11, None), ("Invoice", 17, None)} <= mentions
    assert not any(name == "nameof" for name, _, _ in mentions)


def test_csharp_usings_bind_namespaces_as_wildcards_and_aliases_by_name() -> None:
    assert list(file_facts("Shop/Billing/Invoice.cs", "csharp", CSHARP_SOURCE).imports) == [
        ImportBinding(alias="*", target="System", line=1),
        ImportBinding(alias="*", target="System.Collections.Generic", line=2),
        ImportBinding(alias="Json", target="System.Text.Json.JsonSerializer", line=3),
        ImportBinding(alias="*", target="System.Math", line=4),
    ]


def test_c_and_cpp_fixture_includes_name_the_module_that_defines_the_callee() -> None:
    for language, caller, binding in [
        ("c", "c/report.c", ImportBinding(alias="*", target="c.totals", line=2)),
        ("cpp", "cpp/report.cpp", ImportBinding(alias="*", target="cpp.totals", line=4)),
    ]:
        assert binding in file_facts(caller, language, (FIXTURES / caller).read_text(encoding="utf-8")).imports
