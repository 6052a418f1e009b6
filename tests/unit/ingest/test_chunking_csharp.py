"""Syntax-aware chunking of C# (cluster/ingest/syntax_rules_csharp.py): types, their members when a
type is big, namespaces (block and file-scoped), and the comments and attributes above a member."""

from __future__ import annotations

from cluster.ingest.chunking import chunk_file
from cluster.settings import ChunkingSettings
from tests.support.chunk_checks import SETTINGS, assert_exact_text, spans

SOURCE = """\
using System;

namespace Shop
{
    /// <summary>Prices things.</summary>
    public class Pricer : IPricer
    {
        private int rate;

        public Pricer(int rate) { this.rate = rate; }

        // Applies the rate.
        [Obsolete]
        public int Apply(int x)
        {
            return x * rate;
        }

        ~Pricer() { }
    }

    public enum Mode { A, B }
    public delegate int Rule(int x);
}
"""

FILE_SCOPED = """\
namespace Shop.Tools;

public interface ITool { void Use(); }

public struct Handle { public int Id; }

public record Part(string Name);
"""

SMALL = ChunkingSettings(window_lines=6, overlap_lines=1)


def test_csharp_small_types_in_a_namespace_are_chunked_whole() -> None:
    chunks = chunk_file("Shop/Pricer.cs", SOURCE, SETTINGS)
    assert spans(chunks) == [
        (1, 4, "module", None),
        (5, 20, "class", "Pricer"),  # its doc comment included
        (22, 22, "enum", "Mode"),
        (23, 23, "type", "Rule"),
    ]
    assert {c.language for c in chunks} == {"csharp"}
    assert_exact_text(chunks, SOURCE)


def test_a_big_csharp_class_is_split_into_its_constructors_and_methods() -> None:
    chunks = chunk_file("Shop/Pricer.cs", SOURCE, SMALL)
    assert spans(chunks) == [
        (1, 4, "module", None),
        (5, 8, "class", "Pricer"),  # the doc comment, the header and the field
        (10, 10, "method", "Pricer.Pricer"),
        (12, 17, "method", "Pricer.Apply"),  # the comment and the attribute above it
        (19, 20, "class", "Pricer"),  # the destructor stays with the class
        (22, 22, "enum", "Mode"),
        (23, 23, "type", "Rule"),
    ]
    apply = next(c for c in chunks if c.symbol == "Pricer.Apply")
    assert apply.text.splitlines()[:2] == ["        // Applies the rate.", "        [Obsolete]"]
    assert_exact_text(chunks, SOURCE)


def test_csharp_declarations_after_a_file_scoped_namespace_are_top_level() -> None:
    assert spans(chunk_file("Shop/Tools/Tool.cs", FILE_SCOPED, SETTINGS)) == [
        (1, 1, "module", None),
        (3, 3, "interface", "ITool"),
        (5, 5, "struct", "Handle"),
        (7, 7, "record", "Part"),
    ]
