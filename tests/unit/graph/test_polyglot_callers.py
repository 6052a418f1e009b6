"""Every language the graph reads, end to end but for Ray: a two-file fixture per language
(tests/fixtures/polyglot_graph/<language>/, its expected.json naming the callee and the call site
in the other file) is walked and chunked as a reindex does, its rows' facts go through the stored
payload and back, and `callers` of the callee finds that call site, resolved to that definition."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cluster.build.collect import collect_repository
from cluster.graph import CodeGraph, GraphRow
from cluster.index import RowPayload
from cluster.settings import SamespaceSettings

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "polyglot_graph"
LANGUAGES = sorted(p.name for p in FIXTURE.iterdir() if (p / "expected.json").is_file())
REQUIRED = {
    "python", "javascript", "typescript", "go", "rust", "java", "c", "cpp", "csharp",
    "kotlin", "scala", "php", "ruby", "swift", "lua", "bash",
}  # fmt: skip


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> CodeGraph:
    root = tmp_path_factory.mktemp("polyglot") / "polyglot_graph"
    shutil.copytree(FIXTURE, root)  # a copy outside any git checkout, as a user's folder would be
    found = collect_repository(root, SamespaceSettings())
    rows = []
    for chunk in found.chunks:
        stored = RowPayload.model_validate(RowPayload(**chunk.model_dump()).stored())
        rows.append(GraphRow(stored.path, stored.language, stored.definitions, stored.references, stored.imports))
    return CodeGraph("polyglot", "c0ffee", rows)


def test_the_fixture_has_a_cross_file_call_in_every_language_the_issue_names() -> None:
    assert set(LANGUAGES) >= REQUIRED


@pytest.mark.parametrize("language", LANGUAGES)
def test_callers_of_each_languages_callee_find_the_call_in_the_other_file(graph: CodeGraph, language: str) -> None:
    expected = json.loads((FIXTURE / language / "expected.json").read_text())
    answer = graph.callers(expected["callee"], path=expected["callee_path"])
    assert [d.path for d in answer.definitions] == [expected["callee_path"]], answer.note
    sites = {(i.path, i.line, i.symbol) for i in answer.items if i.confidence >= 0.5}
    assert (expected["call_path"], expected["call_line"], expected["caller"]) in sites, answer.items
    assert expected["call_path"] != expected["callee_path"]
