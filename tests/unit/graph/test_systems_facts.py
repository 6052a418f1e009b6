"""Rust's and Swift's code-graph facts (cluster/graph/systems_spec.py): impl blocks and extensions
qualifying their methods, traits and protocols as bases, calls with their receivers, mentions, imports."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.graph import file_facts
from cluster.graph.registry import SPECS
from cluster.types import ImportBinding

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "polyglot_graph"

RUST_SOURCE = """\
use crate::geometry::{area, Point as P};
use super::units::*;
use self::helpers::scale;
use std::collections::{self, HashMap};
extern crate serde as sd;

pub trait Shape: Debug + Clone {
    fn area(&self) -> f64;
}

pub struct Circle {
    r: f64,
}

impl Circle {
    pub fn new(r: f64) -> Self {
        Self { r }
    }
    fn grow(&mut self) -> Circle {
        self.scale(2.0);
        geometry::shapes::grow(self.r);
        let p: P = P::origin();
        println!("{}", hidden());
        Circle::new(scale(self.r))
    }
}

impl fmt::Display for Circle {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.r)
    }
}

mod tests {
    use super::*;
    fn check() {
        let v = items.iter().collect::<Vec<Circle>>();
        run(area, v);
    }
}

enum Kind { Round }
type Shapes = Vec<Circle>;
macro_rules! twice { ($e:expr) => { $e; $e } }
"""


def test_rust_impl_blocks_qualify_their_methods_and_impl_trait_for_gives_the_type_its_base() -> None:
    facts = file_facts("crates/geo/src/shapes/circle.rs", "rust", RUST_SOURCE)
    found = [(d.qualified, d.kind, d.line, d.end_line, d.bases) for d in facts.definitions]
    assert found == [
        ("Shape", "trait", 7, 9, ("Debug", "Clone")),
        ("Shape.area", "method", 8, 8, ()),
        ("Circle", "struct", 11, 13, ()),
        ("Circle", "impl", 15, 26, ()),
        ("Circle.new", "method", 16, 18, ()),
        ("Circle.grow", "method", 19, 25, ()),
        ("Circle", "impl", 28, 32, ("Display",)),
        ("Circle.fmt", "method", 29, 31, ()),
        ("tests", "namespace", 34, 40, ()),
        ("tests.check", "function", 36, 39, ()),
        ("Kind", "enum", 42, 42, ()),
        ("Shapes", "type", 43, 43, ()),
        ("twice", "macro", 44, 44, ()),
    ]


def test_rust_calls_carry_paths_and_receivers_and_macros_are_not_calls() -> None:
    facts = file_facts("crates/geo/src/shapes/circle.rs", "rust", RUST_SOURCE)
    calls = [(r.name, r.line, r.qualifier, r.enclosing) for r in facts.references if r.call]
    assert calls == [
        ("scale", 20, "self", "Circle.grow"),
        ("grow", 21, "geometry.shapes", "Circle.grow"),
        ("origin", 22, "P", "Circle.grow"),
        ("new", 24, "Circle", "Circle.grow"),
        ("scale", 24, None, "Circle.grow"),
        ("iter", 37, "items", "tests.check"),
        ("collect", 37, "items.iter()", "tests.check"),
        ("run", 38, None, "tests.check"),
    ]
    assert not any(r.name in {"println", "write", "hidden"} for r in facts.references)
    mentions = {(r.name, r.line, r.qualifier) for r in facts.references if not r.call}
    assert {("Debug", 7, None), ("P", 22, None), ("r", 24, "self"), ("Display", 28, "fmt")} <= mentions
    assert {("Formatter", 29, "fmt"), ("Circle", 37, None), ("area", 38, None), ("Circle", 43, None)} <= mentions
    assert not any(r.name in {"Self", "self"} for r in facts.references)


def test_rust_use_paths_resolve_crate_super_and_self_against_the_files_module() -> None:
    facts = file_facts("crates/geo/src/shapes/circle.rs", "rust", RUST_SOURCE)
    assert list(facts.imports) == [
        ImportBinding(alias="area", target="crates.geo.src.geometry.area", line=1),
        ImportBinding(alias="P", target="crates.geo.src.geometry.Point", line=1),
        ImportBinding(alias="*", target="crates.geo.src.shapes.units", line=2),
        ImportBinding(alias="scale", target="crates.geo.src.shapes.circle.helpers.scale", line=3),
        ImportBinding(alias="collections", target="std.collections", line=4),
        ImportBinding(alias="HashMap", target="std.collections.HashMap", line=4),
        ImportBinding(alias="sd", target="serde", line=5),
        ImportBinding(alias="*", target="crates.geo.src.shapes.circle", line=35),  # `super` of the inline mod
    ]


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ("src/lib.rs", "src.a.b"),  # the crate root's own module is the crate
        ("src/net/mod.rs", "src.net.a.b"),  # mod.rs is its folder's module
        ("tool.rs", "tool.a.b"),  # no src folder: the file's folder is the crate root
    ],
)
def test_rust_self_paths_follow_the_module_a_file_stands_for(path: str, target: str) -> None:
    assert file_facts(path, "rust", "use self::a::b;\n").imports == (ImportBinding(alias="b", target=target, line=1),)


SWIFT_SOURCE = """\
import Foundation
import struct Geometry.Vector

protocol Shape: AnyObject {
    func area() -> Double
}

final class Circle: Base, Shape {
    let r: Double

    init(r: Double) {
        self.r = r
        super.init()
    }

    func area() -> Double {
        return helper(r) * Double.pi
    }
}

extension Circle: CustomStringConvertible {
    static func make() -> Circle {
        let c: Circle = .unit()
        log.write(c)
        return Circle(r: 2).scaled(by: Vector<Int>())
    }
}

struct Point: Codable { var x: Int }
enum Direction { case up }
typealias Shapes = [Shape]
func render(shapes: Shapes) { shapes.forEach(draw) }
"""


def test_swift_types_extensions_and_protocols_give_qualified_members_and_bases() -> None:
    facts = file_facts("Sources/Geometry/Circle.swift", "swift", SWIFT_SOURCE)
    found = [(d.qualified, d.kind, d.line, d.end_line, d.bases) for d in facts.definitions]
    assert found == [
        ("Shape", "protocol", 4, 6, ("AnyObject",)),
        ("Shape.area", "method", 5, 5, ()),
        ("Circle", "class", 8, 19, ("Base", "Shape")),
        ("Circle.init", "method", 11, 14, ()),
        ("Circle.area", "method", 16, 18, ()),
        ("Circle", "extension", 21, 27, ("CustomStringConvertible",)),
        ("Circle.make", "method", 22, 26, ()),
        ("Point", "struct", 29, 29, ("Codable",)),
        ("Direction", "enum", 30, 30, ()),
        ("Shapes", "type", 31, 31, ()),
        ("render", "function", 32, 32, ()),
    ]


def test_swift_calls_include_initialisers_implicit_members_and_receivers() -> None:
    facts = file_facts("Sources/Geometry/Circle.swift", "swift", SWIFT_SOURCE)
    calls = [(r.name, r.line, r.qualifier, r.enclosing) for r in facts.references if r.call]
    assert calls == [
        ("init", 13, "super", "Circle.init"),
        ("helper", 17, None, "Circle.area"),
        ("unit", 23, None, "Circle.make"),
        ("write", 24, "log", "Circle.make"),
        ("Circle", 25, None, "Circle.make"),
        ("scaled", 25, "?", "Circle.make"),
        ("Vector", 25, None, "Circle.make"),
        ("forEach", 32, "shapes", "render"),
    ]
    mentions = {(r.name, r.line, r.qualifier) for r in facts.references if not r.call}
    assert {("r", 12, "self"), ("pi", 17, "Double"), ("Circle", 23, None), ("c", 24, None)} <= mentions
    assert {("Int", 29, None), ("Shape", 31, None), ("draw", 32, None)} <= mentions


def test_swift_imports_bind_the_module_or_the_imported_declaration() -> None:
    facts = file_facts("Sources/Geometry/Circle.swift", "swift", SWIFT_SOURCE)
    assert list(facts.imports) == [
        ImportBinding(alias="Foundation", target="Foundation", line=1),
        ImportBinding(alias="Vector", target="Geometry.Vector", line=2),
    ]


def test_swift_sees_every_files_names_and_calls_of_a_type_reach_its_initialisers() -> None:
    swift, rust = SPECS["swift"], SPECS["rust"]
    assert swift.global_names and swift.implicit_members and swift.constructors == frozenset({"init"})
    assert rust.self_names == frozenset({"self", "Self"}) and not rust.global_names and "::" in rust.separators


def test_the_rust_fixture_imports_the_callee_from_its_file_module() -> None:
    facts = file_facts("rust/src/report.rs", "rust", (FIXTURES / "rust" / "src" / "report.rs").read_text())
    assert ImportBinding(alias="compute_total", target="rust.src.billing.compute_total", line=3) in facts.imports
