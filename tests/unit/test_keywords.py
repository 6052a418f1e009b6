"""The keyword leg's terms: identifier-aware, whole compounds, definitions boosted, stable ids."""

from __future__ import annotations

import pytest

from cluster.keywords import (
    WHOLE_PREFIX,
    chunk_keywords,
    defined_names,
    identifier_query,
    query_keywords,
    term_id,
    terms,
)


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
        ("export class Repo {\n  getUserById(id: string): Promise<User> {\n    return x;\n  }\n}", "Repo",
         ["repo", "getuserbyid"]),
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
    call = chunk_keywords("def main():\n    settings = parse_config('a.yaml')\n    run(settings)", "app/main.py", "main")
    whole = WHOLE_PREFIX + "parse_config"
    assert weight(definition, whole) > weight(call, whole) > 0
    assert weight(definition, "app") > 0  # the path counts too


@pytest.mark.parametrize(
    ("query", "name"),
    [("parse_config", "parse_config"), ("getUserById", "getuserbyid"), ("Repo.getUserById", "getuserbyid"),
     ("Vec::push", "push"), ("run()", "run"), ("how is the config parsed", None), ("a-b", None), ("", None)],
)
def test_identifier_queries_are_recognised(query: str, name: str | None) -> None:
    assert identifier_query(query) == name
