"""Java, Kotlin and Scala code-graph facts (cluster/graph/jvm_spec.py): definitions qualified by their
classes (constructors, records, enums, interfaces, Kotlin objects and extension functions, Scala objects,
traits and extensions), calls with their receivers (static, `this`, `super`, constructor calls), mentions,
every import form, and the cross-file fixtures under tests/fixtures/polyglot_graph."""

from __future__ import annotations

from cluster.graph import SPECS, ModuleStyle, file_facts
from cluster.types import ImportBinding
from tests.support.graph_facts import calls_of, definitions_of, mentions_of

JAVA = """\
package shop.orders;

import java.util.List;
import java.util.*;
import static java.lang.Math.max;
import static org.junit.Assert.*;

@Service
public class OrderService extends Base<Order> implements Runnable, Comparable<OrderService> {
    private final Repo repo;

    public OrderService(Repo repo) {
        super(repo);
        this.repo = repo;
    }

    public int total(List<Item> items) {
        int t = helper(items);
        repo.save(new Order(t));
        Util.log("x");
        this.check();
        super.close();
        items.forEach(this::apply);
        return max(t, 0);
    }

    interface Listener extends EventListener {
        void on(Event e);
    }

    enum Color implements Named {
        RED;

        String label() { return name(); }
    }

    record Point(int x, int y) {
        Point {
            validate(x);
        }
    }
}
"""

KOTLIN = """\
package shop.orders

import kotlin.math.max
import shop.util.*
import shop.model.Order as PlacedOrder

@Service
class OrderService(private val repo: Repo) : Base(repo), Runnable, Comparable<OrderService> {
    fun total(items: List<Item>): Int {
        val t = helper(items)
        repo.save(PlacedOrder(t))
        Util.log("x")
        this.check()
        super.close()
        items.forEach(::apply)
        return max(t, 0)
    }

    companion object {
        fun create(): OrderService = OrderService(Repo())
    }

    interface Listener {
        fun on(e: Event)
    }

    enum class Color : Named {
        RED;

        fun label(): String = name
    }

    object Registry {
        fun all(): List<Color> = Color.values().toList()
    }
}

fun String.shout(): String = uppercase()

typealias Prices = List<Int>
"""

SCALA = """\
package shop.orders

import scala.collection.mutable
import scala.util.{Try, Success => Ok}
import shop.util._
import java.util.{List => JList, Map as JMap, Set => _}

@deprecated
class OrderService(repo: Repo) extends Base(repo) with Runnable with Ordered[OrderService] {
  def this(size: Int) = this(new Repo(size))

  def total(items: List[Item]): Int = {
    val t = helper(items)
    repo.save(new Order(t))
    Util.log("x")
    this.check()
    super.close()
    items.foreach(apply)
    t max 0
  }
}

object OrderService extends Factory {
  def apply(size: Int): OrderService = new OrderService(size)
}

trait Listener {
  def on(e: Event): Unit
}

case class Point(x: Int, y: Int)

enum Color {
  case Red, Green
  def label: String = toString
}

type Prices = List[Int]

extension (s: String)
  def shout: String = s.toUpperCase
"""


def test_the_three_languages_are_registered_as_folder_packages_with_implicit_members() -> None:
    for language in ("java", "kotlin", "scala"):
        spec = SPECS[language]
        assert spec.module_style is ModuleStyle.FOLDER
        assert spec.implicit_members
        assert spec.self_names == frozenset({"this"})
        assert not spec.constructors  # a constructor is named like its class, or is the class


# --- Java ------------------------------------------------------------------------------------------


def test_java_types_constructors_and_methods_are_qualified_by_their_classes_with_bases() -> None:
    assert definitions_of(file_facts("shop/orders/Shop.java", "java", JAVA)) == [
        ("OrderService", "class", 8, 42, ("Base", "Runnable", "Comparable")),
        ("OrderService.OrderService", "method", 12, 15, ()),
        ("OrderService.total", "method", 17, 25, ()),
        ("OrderService.Listener", "interface", 27, 29, ("EventListener",)),
        ("OrderService.Listener.on", "method", 28, 28, ()),
        ("OrderService.Color", "enum", 31, 35, ("Named",)),
        ("OrderService.Color.label", "method", 34, 34, ()),
        ("OrderService.Point", "record", 37, 41, ()),
        ("OrderService.Point.Point", "method", 38, 40, ()),
    ]


def test_java_calls_carry_receivers_and_new_is_a_call_of_the_class() -> None:
    assert calls_of(file_facts("shop/orders/Shop.java", "java", JAVA)) == [
        ("helper", 18, None, "OrderService.total"),
        ("save", 19, "repo", "OrderService.total"),
        ("Order", 19, None, "OrderService.total"),
        ("log", 20, "Util", "OrderService.total"),
        ("check", 21, "this", "OrderService.total"),
        ("close", 22, "super", "OrderService.total"),
        ("forEach", 23, "items", "OrderService.total"),
        ("max", 24, None, "OrderService.total"),
        ("name", 34, None, "OrderService.Color.label"),
        ("validate", 39, None, "OrderService.Point.Point"),
    ]
    mentions = mentions_of(file_facts("shop/orders/Shop.java", "java", JAVA))
    assert {("Service", 8, None), ("Repo", 10, None), ("Item", 17, None), ("apply", 23, "this")} <= mentions
    assert {("repo", 14, "this"), ("t", 24, None), ("EventListener", 27, None)} <= mentions
    assert ("Order", 19, None) not in mentions  # the constructor call is the fact, not a second mention
    assert not any(name in {"total", "OrderService"} and line in (12, 17) for name, line, _ in mentions)


def test_java_single_wildcard_and_static_imports() -> None:
    assert list(file_facts("shop/orders/Shop.java", "java", JAVA).imports) == [
        ImportBinding(alias="List", target="java.util.List", line=3),
        ImportBinding(alias="*", target="java.util", line=4),
        ImportBinding(alias="max", target="java.lang.Math.max", line=5),
        ImportBinding(alias="*", target="org.junit.Assert", line=6),
    ]


# --- Kotlin ----------------------------------------------------------------------------------------


def test_kotlin_classes_objects_and_extension_functions_are_qualified() -> None:
    assert definitions_of(file_facts("shop/orders/Shop.kt", "kotlin", KOTLIN)) == [
        ("OrderService", "class", 7, 36, ("Base", "Runnable", "Comparable")),
        ("OrderService.total", "method", 9, 17, ()),
        ("OrderService.create", "method", 20, 20, ()),  # a companion's member is the class's, as it is called
        ("OrderService.Listener", "interface", 23, 25, ()),
        ("OrderService.Listener.on", "method", 24, 24, ()),
        ("OrderService.Color", "enum", 27, 31, ("Named",)),
        ("OrderService.Color.label", "method", 30, 30, ()),
        ("OrderService.Registry", "object", 33, 35, ()),
        ("OrderService.Registry.all", "method", 34, 34, ()),
        ("String.shout", "method", 38, 38, ()),
        ("Prices", "type", 40, 40, ()),
    ]


def test_kotlin_calls_carry_receivers_and_a_class_call_is_a_constructor_call() -> None:
    assert calls_of(file_facts("shop/orders/Shop.kt", "kotlin", KOTLIN)) == [
        ("helper", 10, None, "OrderService.total"),
        ("save", 11, "repo", "OrderService.total"),
        ("PlacedOrder", 11, None, "OrderService.total"),
        ("log", 12, "Util", "OrderService.total"),
        ("check", 13, "this", "OrderService.total"),
        ("close", 14, "super", "OrderService.total"),
        ("forEach", 15, "items", "OrderService.total"),
        ("max", 16, None, "OrderService.total"),
        ("OrderService", 20, None, "OrderService.create"),
        ("Repo", 20, None, "OrderService.create"),
        ("values", 34, "Color", "OrderService.Registry.all"),
        ("toList", 34, "Color.values()", "OrderService.Registry.all"),
        ("uppercase", 38, None, "String.shout"),
    ]
    mentions = mentions_of(file_facts("shop/orders/Shop.kt", "kotlin", KOTLIN))
    assert {("Service", 7, None), ("Repo", 8, None), ("List", 9, None), ("Item", 9, None)} <= mentions
    assert {("apply", 15, None), ("t", 16, None), ("Int", 40, None)} <= mentions


def test_kotlin_imports_with_alias_and_wildcard() -> None:
    assert list(file_facts("shop/orders/Shop.kt", "kotlin", KOTLIN).imports) == [
        ImportBinding(alias="max", target="kotlin.math.max", line=3),
        ImportBinding(alias="*", target="shop.util", line=4),
        ImportBinding(alias="PlacedOrder", target="shop.model.Order", line=5),
    ]


# --- Scala -----------------------------------------------------------------------------------------


def test_scala_classes_objects_traits_enums_and_extensions_are_qualified() -> None:
    assert definitions_of(file_facts("shop/orders/Shop.scala", "scala", SCALA)) == [
        ("OrderService", "class", 8, 21, ("Base", "Runnable", "Ordered")),
        ("OrderService.total", "method", 12, 20, ()),  # `def this(...)` is the class's constructor, no definition
        ("OrderService", "object", 23, 25, ("Factory",)),
        ("OrderService.apply", "method", 24, 24, ()),
        ("Listener", "trait", 27, 29, ()),
        ("Listener.on", "method", 28, 28, ()),
        ("Point", "class", 31, 31, ()),
        ("Color", "enum", 33, 36, ()),
        ("Color.label", "method", 35, 35, ()),
        ("Prices", "type", 38, 38, ()),
        ("String.shout", "method", 41, 41, ()),
    ]


def test_scala_calls_carry_receivers_and_new_infix_and_apply_are_calls() -> None:
    assert calls_of(file_facts("shop/orders/Shop.scala", "scala", SCALA)) == [
        ("Repo", 10, None, "OrderService"),
        ("helper", 13, None, "OrderService.total"),
        ("save", 14, "repo", "OrderService.total"),
        ("Order", 14, None, "OrderService.total"),
        ("log", 15, "Util", "OrderService.total"),
        ("check", 16, "this", "OrderService.total"),
        ("close", 17, "super", "OrderService.total"),
        ("foreach", 18, "items", "OrderService.total"),
        ("max", 19, "t", "OrderService.total"),
        ("OrderService", 24, None, "OrderService.apply"),
    ]
    mentions = mentions_of(file_facts("shop/orders/Shop.scala", "scala", SCALA))
    assert {("deprecated", 8, None), ("Item", 12, None), ("apply", 18, None), ("toUpperCase", 41, "s")} <= mentions
    assert not any(name == "this" for name, _, _ in mentions)


def test_scala_imports_selectors_renames_wildcards_and_hidden_names() -> None:
    assert list(file_facts("shop/orders/Shop.scala", "scala", SCALA).imports) == [
        ImportBinding(alias="mutable", target="scala.collection.mutable", line=3),
        ImportBinding(alias="Try", target="scala.util.Try", line=4),
        ImportBinding(alias="Ok", target="scala.util.Success", line=4),
        ImportBinding(alias="*", target="shop.util", line=5),
        ImportBinding(alias="JList", target="java.util.List", line=6),
        ImportBinding(alias="JMap", target="java.util.Map", line=6),
    ]


def test_scala_3_imports_and_indented_bodies() -> None:
    source = (
        "import a.b.*\nimport a.B as Z\nimport a.b.C, c.d.{E => F}\n"
        "class Greeter(name: String):\n  def greet(): String =\n    helper(name)\n"
    )
    facts = file_facts("app/Main.scala", "scala", source)
    assert list(facts.imports) == [
        ImportBinding(alias="*", target="a.b", line=1),
        ImportBinding(alias="Z", target="a.B", line=2),
        ImportBinding(alias="C", target="a.b.C", line=3),
        ImportBinding(alias="F", target="c.d.E", line=3),
    ]
    hidden = file_facts("app/Main.scala", "scala", "import a.b.{X => _}\nimport c.{Y => _, _}\n").imports
    assert list(hidden) == [ImportBinding(alias="*", target="c", line=2)]  # a hidden name binds nothing
    assert [(d.qualified, d.kind, d.line) for d in facts.definitions] == [
        ("Greeter", "class", 4),
        ("Greeter.greet", "method", 5),
    ]
    assert [(r.name, r.enclosing) for r in facts.references if r.call] == [("helper", "Greeter.greet")]


# --- the cross-file fixtures ----------------------------------------------------------------------
