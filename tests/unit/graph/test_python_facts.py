"""Python's code-graph facts (cluster/graph/python_spec.py): definitions qualified by their
classes, calls with their receivers, mentions, and every import form made absolute."""

from __future__ import annotations

from cluster.graph import file_facts
from cluster.types import ImportBinding

SOURCE = """\
import os.path as osp
import json
from .a import b as c
from ..pkg.mod import helper, Other as O
from x import *
class A(B, m.C):
    def f(self, x):
        self.g(x); osp.join(1); foo(); A.h()
        return Bar
    def g(self, y):
        def inner(): return helper(y)
        return inner
@decor
def top(): A(); json.dumps(top)
"""


def test_definitions_are_qualified_by_what_encloses_them_and_classes_keep_their_bases() -> None:
    facts = file_facts("pkg/sub/mod.py", "python", SOURCE)
    found = [(d.qualified, d.kind, d.line, d.end_line, d.bases) for d in facts.definitions]
    assert found == [
        ("A", "class", 6, 12, ("B", "C")),
        ("A.f", "method", 7, 9, ()),
        ("A.g", "method", 10, 12, ()),
        ("A.g.inner", "function", 11, 11, ()),
        ("top", "function", 14, 14, ()),
    ]


def test_calls_carry_their_receiver_and_the_definition_around_them() -> None:
    facts = file_facts("pkg/sub/mod.py", "python", SOURCE)
    calls = [(r.name, r.line, r.qualifier, r.enclosing) for r in facts.references if r.call]
    assert calls == [
        ("g", 8, "self", "A.f"),
        ("join", 8, "osp", "A.f"),
        ("foo", 8, None, "A.f"),
        ("h", 8, "A", "A.f"),
        ("helper", 11, None, "A.g.inner"),
        ("A", 14, None, "top"),
        ("dumps", 14, "json", "top"),
    ]
    mentions = {(r.name, r.line) for r in facts.references if not r.call}
    assert {("B", 6), ("C", 6), ("Bar", 9), ("inner", 12), ("decor", 13), ("top", 14)} <= mentions
    assert not any(r.name in {"f", "g"} and not r.call for r in facts.references)  # a definition's own name is no use


def test_every_import_form_binds_its_alias_to_an_absolute_target() -> None:
    facts = file_facts("pkg/sub/mod.py", "python", SOURCE)
    assert list(facts.imports) == [
        ImportBinding(alias="osp", target="os.path", line=1),
        ImportBinding(alias="json", target="json", line=2),
        ImportBinding(alias="c", target="pkg.sub.a.b", line=3),
        ImportBinding(alias="helper", target="pkg.pkg.mod.helper", line=4),
        ImportBinding(alias="O", target="pkg.pkg.mod.Other", line=4),
        ImportBinding(alias="*", target="x", line=5),
    ]


def test_a_file_that_does_not_parse_cleanly_still_gives_the_facts_it_has() -> None:
    facts = file_facts("m.py", "python", "def ok():\n    run()\ndef broken(:\n")
    assert [d.qualified for d in facts.definitions][:1] == ["ok"]
    assert [(r.name, r.enclosing) for r in facts.references if r.call] == [("run", "ok")]


def test_a_language_without_a_spec_has_no_facts() -> None:
    assert file_facts("notes.txt", "text", "def f(): g()") == file_facts("x.md", "markdown", "# f")
    assert not file_facts("notes.txt", "text", "def f(): g()").definitions
