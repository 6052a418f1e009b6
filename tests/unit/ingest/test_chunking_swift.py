"""Swift chunking (cluster/ingest/syntax_rules_swift.py): types, extensions and protocols as containers,
their functions and initialisers as methods named by the type, top-level functions and type aliases."""

from __future__ import annotations

from cluster.ingest.chunking import chunk_file
from cluster.settings import ChunkingSettings
from tests.support.chunk_checks import SETTINGS, assert_exact_text, spans

SWIFT_SOURCE = """import Foundation

/// Something with an area.
protocol Shape {
    func area() -> Double
}

// A round shape.
final class Circle: Shape {
    let radius: Double

    init(radius: Double) {
        self.radius = radius
    }

    /// Its area.
    func area() -> Double {
        return Double.pi * radius * radius
    }
}

extension Circle: CustomStringConvertible {
    var description: String { "circle" }
}

typealias Shapes = [Shape]

@discardableResult
func totalArea(_ shapes: Shapes) -> Double {
    shapes.reduce(0) { $0 + $1.area() }
}

print(totalArea([Circle(radius: 1)]))
"""


def test_swift_types_functions_and_aliases_get_symbols_and_line_ranges() -> None:
    chunks = chunk_file("Sources/Geometry/Shapes.swift", SWIFT_SOURCE, SETTINGS)
    assert spans(chunks) == [
        (1, 1, "module", None),
        (3, 6, "protocol", "Shape"),
        (8, 20, "class", "Circle"),
        (22, 24, "class", "Circle"),
        (26, 26, "type", "Shapes"),
        (28, 31, "function", "totalArea"),
        (33, 33, "module", None),
    ]
    assert {c.language for c in chunks} == {"swift"}
    assert_exact_text(chunks, SWIFT_SOURCE)


def test_a_big_swift_class_is_split_into_its_initialiser_and_methods() -> None:
    chunks = chunk_file(
        "Sources/Geometry/Shapes.swift", SWIFT_SOURCE, ChunkingSettings(window_lines=8, overlap_lines=1)
    )
    circle = [span for span in spans(chunks) if span[3] is not None and span[3].startswith("Circle")]
    assert circle == [
        (8, 10, "class", "Circle"),
        (12, 14, "method", "Circle.init"),
        (16, 19, "method", "Circle.area"),
        (22, 24, "class", "Circle"),  # the extension; the closing brace alone is no chunk
    ]
    assert_exact_text(chunks, SWIFT_SOURCE)


def test_a_swift_protocol_requirement_is_a_method_of_the_protocol() -> None:
    source = (
        "protocol Store {\n"
        + "".join(f"    var p{i}: Int {{ get }}\n" for i in range(4))
        + "    func load() -> Data\n}\n"
    )
    chunks = chunk_file("Sources/Store.swift", source, ChunkingSettings(window_lines=4, overlap_lines=1))
    found = spans(chunks)
    assert (6, 6, "method", "Store.load") in found
    assert {(kind, symbol) for _, _, kind, symbol in found} == {("protocol", "Store"), ("method", "Store.load")}
