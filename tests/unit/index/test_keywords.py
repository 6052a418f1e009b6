"""The keyword leg's terms: identifier-aware, whole compounds, definitions boosted, stable ids."""

from __future__ import annotations

import random
import re

import pytest

from cluster.index.keywords import (
    MAX_DECLARATION_LINE_CHARS,
    WHOLE_PREFIX,
    chunk_keywords,
    defined_names,
    identifier_query,
    method_name,
    query_keywords,
    term_id,
    terms,
)
from cluster.index.tokens import identifier_tokens


def weight(sparse: object, term: str) -> float:
    indices, values = sparse.indices, sparse.values  # type: ignore[attr-defined]
    return dict(zip(indices, values, strict=True)).get(term_id(term), 0.0)


def test_terms_split_identifiers_and_keep_each_compound_whole() -> None:
    assert terms("getUserById(id)") == ["get", "user", "id", "id", WHOLE_PREFIX + "getuserbyid"]  # "by": a stop word
    assert terms("parse_config x") == ["pars", "config", WHOLE_PREFIX + "parse_config"]  # stemmed pieces
    assert terms("HTTPServerError") == ["http", "server", "error", WHOLE_PREFIX + "httpservererror"]


def test_stop_words_go_and_inflections_meet() -> None:
    assert terms("Returns the parsed headers of the entries") == terms("return parse header entry")
    assert terms("classes of a class") == ["class", "class"]


def test_term_ids_are_stable_32_bit_and_the_query_side_weighs_each_term_once() -> None:
    assert term_id("config") == term_id("config") and 0 <= term_id("config") < 2**32
    query = query_keywords("parse config parse")
    assert sorted(query.indices) == query.indices and set(query.values) == {1.0}
    assert len(query.indices) == 2


@pytest.mark.parametrize(
    ("text", "symbol", "names"),
    [
        ("def parse_config(path):\n    return load(path)", "parse_config", ["parse_config"]),
        (
            "export class Repo {\n  getUserById(id: string): Promise<User> {\n    return x;\n  }\n}",
            "Repo",
            ["repo", "getuserbyid"],
        ),
        ("public static List<User> listAll(int n) throws IOException {", None, ["listall"]),
        ("func (r *Repo) FindUser(id int) (*User, error) {\n  return r.get(id)\n}", None, ["finduser"]),
        ("const handler = async (req) => {\n  await save(req)\n}", None, ["handler"]),
        ("x = parse_config(p)\nif (ok) {\n  run()\n}", None, []),
        ("## Install\n\nRun make.", "Install", ["install"]),
    ],
)
def test_defined_names_are_the_declarations_not_the_calls(text: str, symbol: str | None, names: list[str]) -> None:
    assert defined_names(text, symbol) == names


def test_a_definition_outweighs_a_call_of_the_same_name() -> None:
    definition = chunk_keywords("def parse_config(path):\n    return load(path)", "app/config.py", "parse_config")
    call = chunk_keywords(
        "def main():\n    settings = parse_config('a.yaml')\n    run(settings)", "app/main.py", "main"
    )
    whole = WHOLE_PREFIX + "parse_config"
    assert weight(definition, whole) > weight(call, whole) > 0
    assert weight(definition, "app") > 0  # the path counts too


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("parse_config", "parse_config"),
        ("getUserById", "getuserbyid"),
        ("Repo.getUserById", "getuserbyid"),
        ("Vec::push", "push"),
        ("run()", "run"),
        ("how is the config parsed", None),
        ("a-b", None),
        ("", None),
    ],
)
def test_identifier_queries_are_recognised(query: str, name: str | None) -> None:
    assert identifier_query(query) == name


# --- linear time, the same names ------------------------------------------------------------

# The old method-line pattern (quadratic on long lines): `method_name` must agree with it.
REFERENCE_METHOD_LINE = re.compile(
    r"^\s*(?:(?:public|private|protected|static|async|readonly|override|abstract|final|export|default|"
    r"virtual|inline|pub|unsafe|get|set)\s+)*(?:[\w<>\[\],.?]+\s+)?([A-Za-z_$][A-Za-z0-9_$]*)\s*(?:<[^>]*>)?"
    r"\([^;=]*\)\s*(?::[^;={]*)?(?:throws [\w., ]+)?\{\s*$"
)


def reference_method_name(line: str) -> str | None:
    match = REFERENCE_METHOD_LINE.match(line)
    return match.group(1) if match else None


@pytest.mark.parametrize(
    ("line", "name"),
    [
        ("  public static List<User> listAll(int n) throws IOException {", "listAll"),
        ("  getUserById(id: string): Promise<User> {", "getUserById"),
        ("  async fetch<T>(url: string): Promise<T> {", "fetch"),
        ("  get (x) {", "get"),  # a modifier word that is the name after all
        ("  public Foo() {", "Foo"),
        ("  void run(Runnable r) { // go", None),
        ("  if (ready) {", "if"),  # defined_names drops keywords afterwards
        ("  x = compute(a) {", None),
        ("  foo(a); bar(b) {", None),
        ("  foo(a) : b { c } : d {", None),
        ("  foo(a) : (b) {", "foo"),
        ("  foo(a) throws X, Y.Z {", "foo"),
        ("  foo(a\x00b) {", "foo"),  # a NUL in the line is no parameter mark
        ("  foo(a) {  ", "foo"),
        ("  foo(a)", None),
    ],
)
def test_method_name_reads_declaration_lines_as_the_reference_pattern(line: str, name: str | None) -> None:
    assert method_name(line) == name == reference_method_name(line)


def fuzz_line(rng: random.Random) -> str:
    """A line shaped like a declaration with random damage: the cases where the two could differ."""
    noise = ["(", ")", "{", ":", ";", "=", "<", ">", " ", "a", "b1", ",", "throws ", "?", "[]", ".", "é", "\x00"]

    def junk(most: int) -> str:
        return "".join(rng.choice(noise) for _ in range(rng.randint(0, most)))

    line = rng.choice(["", " ", "\t  "])
    for _ in range(rng.randint(0, 3)):
        line += rng.choice(["public", "static", "get", "set", "async", "pub"]) + rng.choice([" ", "  ", ""])
    if rng.random() < 0.6:
        line += rng.choice(["int", "List<X>", "Map<A, B>", "a.b", "T[]", "get"]) + rng.choice([" ", ""])
    line += rng.choice(["foo", "getX", "$a", "_b", "set", "", "1x"]) + rng.choice(["", " ", "<T>", "<T(>", "<;=>"])
    line += "(" + junk(5) + rng.choice([")", ""])
    line += rng.choice(["", " ", junk(4), ": Foo", " : X<Y>", " throws IOException, X.Y", ") throws b", "):c", " ) "])
    return line + rng.choice(["{", " {", "{ ", "", "{}", " { \t"])


def test_method_name_agrees_with_the_reference_pattern_on_fuzzed_lines() -> None:
    rng = random.Random(14)
    lines = [fuzz_line(rng) for _ in range(20_000)]
    found = [line for line in lines if reference_method_name(line) is not None]
    assert len(found) > 1_000  # the fuzz reaches matches, not only misses
    assert [method_name(line) for line in lines] == [reference_method_name(line) for line in lines]


def test_a_line_past_the_cap_is_no_method_declaration() -> None:
    line = "  void run(" + "int a, " * (MAX_DECLARATION_LINE_CHARS // 7) + "int b) {"
    assert len(line) > MAX_DECLARATION_LINE_CHARS and reference_method_name(line) == "run"
    assert method_name(line) is None


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "text",
    [
        "func (" * 200_000,  # the receiver group once scanned to the end from every `func (`
        "def " + " " * 1_000_000,
        "const " * 200_000,
        "  public foo(" + "a): b " * 2_700 + "{",  # 4.9 s in the old method-line regex
        ("x(" + ")" * 8_000 + ":" * 8_000 + "{ {\n") * 50,
        "A" * 1_000_000,
        "aB1_" * 250_000,
    ],
)
def test_keyword_extraction_stays_linear_on_hostile_text(text: str) -> None:
    """Each of these once took from seconds to hours; the timeout is the check."""
    assert defined_names(text, None) == []  # none of them declares anything
    assert len(chunk_keywords(text, "hostile.js", None).indices) >= 2  # its own terms and the path's
    assert len(identifier_tokens(text)) <= len(text)


@pytest.mark.timeout(20)
def test_defined_names_of_a_chunk_with_thousands_of_definitions_are_unique_in_order() -> None:
    text = "".join(f"function f{i}(a,b){{return a*{i}+b}}" for i in range(20_000))
    names = defined_names(text, None)
    assert names == [f"f{i}" for i in range(20_000)]
