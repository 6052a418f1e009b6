"""Syntax-aware chunking of Kotlin and Scala (cluster/ingest/syntax_rules_jvm.py): functions, classes,
objects, traits and enums become chunks with their symbols; big Scala containers split into members."""

from __future__ import annotations

from cluster.ingest.chunking import chunk_file
from cluster.settings import ChunkingSettings
from tests.support.chunk_checks import SETTINGS, assert_exact_text, spans

KOTLIN = """\
package shop

import kotlin.math.max

/** Sums the prices. */
fun computeTotal(prices: List<Int>): Int {
    return prices.sum()
}

class Report(private val total: Int) {
    fun runReport(): Int = max(total, 0)
}

object Registry {
    val names = listOf("a")
}

interface Listener {
    fun on(total: Int)
}

fun String.shout(): String = uppercase()
"""

SCALA = """\
package shop

import scala.util.Try

// Totals of orders.
object Billing {
  def computeTotal(prices: Seq[Int]): Int = prices.sum
}

trait Listener {
  def on(total: Int): Unit
}

enum Color {
  case Red, Green
}

class Report(total: Int) {
  def this() = this(0)

  def runReport(): Int = {
    val t = total
    Billing.computeTotal(Seq(t))
  }
}

def top(): Unit = println(1)
"""


def test_kotlin_functions_classes_objects_and_interfaces_get_symbols_and_kinds() -> None:
    chunks = chunk_file("shop/Report.kt", KOTLIN, SETTINGS)
    assert spans(chunks) == [
        (1, 3, "module", None),
        (5, 8, "function", "computeTotal"),
        (10, 12, "class", "Report"),
        (14, 16, "object", "Registry"),
        (18, 20, "class", "Listener"),
        (22, 22, "function", "shout"),
    ]
    assert {c.language for c in chunks} == {"kotlin"}
    assert chunks[1].text.startswith("/** Sums the prices. */")
    assert_exact_text(chunks, KOTLIN)


def test_scala_objects_traits_enums_classes_and_functions_get_symbols_and_kinds() -> None:
    chunks = chunk_file("shop/Report.scala", SCALA, SETTINGS)
    assert spans(chunks) == [
        (1, 3, "module", None),
        (5, 8, "object", "Billing"),
        (10, 12, "trait", "Listener"),
        (14, 16, "enum", "Color"),
        (18, 25, "class", "Report"),
        (27, 27, "function", "top"),
    ]
    assert chunks[1].text.startswith("// Totals of orders.")
    assert_exact_text(chunks, SCALA)


def test_a_big_scala_class_is_split_into_its_methods() -> None:
    chunks = chunk_file("shop/Report.scala", SCALA, ChunkingSettings(window_lines=5, overlap_lines=1))
    report = [s for s in spans(chunks) if s[3] is not None and s[3].startswith("Report")]
    assert report == [
        (18, 18, "class", "Report"),
        (19, 19, "method", "Report.this"),
        (21, 24, "method", "Report.runReport"),
    ]  # the closing brace has no word, so no chunk of its own
    assert_exact_text(chunks, SCALA)


def test_scala_definitions_inside_a_braced_package_are_top_level_chunks() -> None:
    source = "package shop {\n  class A {\n    def f(): Int = 1\n  }\n}\n"
    assert ("class", "A") in [(kind, symbol) for _, _, kind, symbol in spans(chunk_file("A.scala", source, SETTINGS))]
