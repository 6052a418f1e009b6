"""Index a multi-language repo through the real job; search it over real MCP on real Serve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import ray

from samespace.clients import call_tool, result_text
from tests.support.jobs import reindex
from tests.support.ray_cluster import McpServer, RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.slow]

INDEX = "poly"


@pytest.fixture(scope="module")
def indexed(ray_cluster: RayCluster, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory) -> str:
    import shutil

    from tests.support.ray_cluster import FIXTURES

    repo = tmp_path_factory.mktemp("e2e") / "polyglot"
    shutil.copytree(FIXTURES / "polyglot", repo)
    (repo / "ignored_secret.py").write_text('API_TOKEN = "must never be indexed"\n')
    return reindex(ray_cluster, repo, INDEX)


async def answer(server: McpServer, **arguments: Any) -> dict[str, Any]:
    result = await call_tool(server.url, "search_code", arguments)
    assert not result.is_error, result_text(result)
    assert result.structured_content is not None
    return result.structured_content


async def search(server: McpServer, **arguments: Any) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = (await answer(server, **arguments))["hits"]
    return hits


def test_the_job_log_shows_files_chunks_rate_and_eta(indexed: str) -> None:
    assert "walked 6 files" in indexed  # 5 sources + .gitignore; ignored_secret.py excluded
    assert "progress: files 6/6 chunks" in indexed
    assert "chunks/s ETA" in indexed
    assert f"committed {INDEX!r}" in indexed


@pytest.mark.parametrize(
    ("query", "path", "symbol"),
    [
        ("edit distance between two strings", "pkg/textutil.py", "levenshtein_distance"),
        ("retry a failing call with exponential backoff", "cmd/server.go", "RetryWithBackoff"),
        ("wait until the user stops calling before running the callback", "web/debounce.ts", "debounce"),
        ("write a file atomically so readers never see a torn file", "pkg/storage.py", "write_json_atomically"),
        ("override settings with environment variables", "docs/install.md", "Configuration"),
    ],
)
async def test_a_natural_language_query_finds_the_right_code_in_the_top_3(
    indexed: str, mcp_server: McpServer, query: str, path: str, symbol: str
) -> None:
    hits = await search(mcp_server, query=query, k=3, repo=INDEX)
    assert [(h["path"], h["symbol"]) for h in hits].count((path, symbol)) >= 1, hits
    top = next(h for h in hits if h["symbol"] == symbol)
    assert top["repo"] == INDEX and top["start_line"] >= 1 and top["end_line"] >= top["start_line"]
    assert symbol in top["snippet"]


async def test_filters_restrict_hits_by_language_and_path_prefix(indexed: str, mcp_server: McpServer) -> None:
    go_hits = await search(mcp_server, query="handler", k=10, language="go")
    assert go_hits and {h["language"] for h in go_hits} == {"go"}
    web_hits = await search(mcp_server, query="format a number", k=10, path_prefix="web/")
    assert web_hits and all(h["path"].startswith("web/") for h in web_hits)


async def test_gitignored_files_are_never_indexed_or_readable(indexed: str, mcp_server: McpServer) -> None:
    hits = await search(mcp_server, query="API token secret", k=20, repo=INDEX)
    assert hits and all(h["path"] != "ignored_secret.py" for h in hits)
    result = await call_tool(
        mcp_server.url, "read_code", {"repo": INDEX, "path": "ignored_secret.py", "start_line": 1, "end_line": 1}
    )
    assert result.is_error and "not an indexed file" in result_text(result)


async def test_read_code_returns_the_exact_lines(indexed: str, mcp_server: McpServer, ray_cluster: RayCluster) -> None:
    result = await call_tool(
        mcp_server.url, "read_code", {"repo": INDEX, "path": "cmd/server.go", "start_line": 9, "end_line": 10}
    )
    assert not result.is_error, result_text(result)
    lines = (Path(__file__).parent.parent / "fixtures/polyglot/cmd/server.go").read_text().splitlines()
    assert result.structured_content is not None
    assert result.structured_content["text"] == "\n".join(lines[8:10])
    escape = await call_tool(
        mcp_server.url, "read_code", {"repo": INDEX, "path": "../../etc/passwd", "start_line": 1, "end_line": 1}
    )
    assert escape.is_error


async def test_bad_arguments_get_an_error_naming_the_field(indexed: str, mcp_server: McpServer) -> None:
    result = await call_tool(mcp_server.url, "search_code", {"query": "x", "k": 0})
    assert result.is_error and "k" in result_text(result)
    result = await call_tool(mcp_server.url, "search_code", {"query": ""})
    assert result.is_error and "query" in result_text(result)
    result = await call_tool(mcp_server.url, "search_code", {"query": "x", "language": "klingon"})
    assert result.is_error and "language 'klingon'" in result_text(result) and "python" in result_text(result)
    result = await call_tool(mcp_server.url, "search_code", {"query": "x", "repo": "nope"})
    assert result.is_error
    assert "unknown repo 'nope'" in result_text(result) and INDEX in result_text(result)
    result = await call_tool(
        mcp_server.url, "read_code", {"repo": INDEX, "path": "cmd/server.go", "start_line": 5, "end_line": 2}
    )
    assert result.is_error and "end_line" in result_text(result)


async def test_index_status_reports_space_counts_and_build(indexed: str, mcp_server: McpServer) -> None:
    result = await call_tool(mcp_server.url, "index_status")
    assert not result.is_error, result_text(result)
    assert result.structured_content is not None
    entry = next(i for i in result.structured_content["indexes"] if i["repo"] == INDEX)
    assert entry["files"] == 6 and entry["points"] > 6
    assert entry["space"].startswith("all-MiniLM-L6-v2@") and entry["encoder"]["width"] == 384
    assert entry["built_at"] is not None and entry["providers"] == ["samespace-embedder-cpu0"]
    build = next(b for b in result.structured_content["builds"] if b["build"] == entry["build"])
    assert build["state"] == "committed" and build["chunks_done"] == build["chunks_total"] == entry["points"]


def test_a_query_vector_from_another_encoder_space_is_refused(indexed: str, ray_cluster: RayCluster) -> None:
    from actors import get_index_actor
    from cluster.errors import EncoderMismatch
    from cluster.index import SearchQuery

    index = get_index_actor(ray_cluster.settings)  # type: ignore[arg-type]
    record = ray.get(index.status.remote())["indexes"][0]["record"]
    other = record.identity.model_copy(update={"weights_sha256": "0" * 64})
    with pytest.raises(EncoderMismatch) as caught:
        ray.get(index.search.remote(SearchQuery(scope=INDEX, vector=[0.1] * 384, identity=other, limit=5)))
    assert "refused" in str(caught.value) and caught.value.index == INDEX
    # Through search across all indexes, the mismatching index is reported, not answered.
    answer = ray.get(index.search.remote(SearchQuery(vector=[0.1] * 384, identity=other, limit=5)))
    hits, refused = answer.hits, answer.refused
    assert hits == [] and any(INDEX in r for r in refused)


def test_every_point_carries_its_provenance(indexed: str, ray_cluster: RayCluster) -> None:
    from actors import get_index_actor
    from cluster.index import SearchQuery

    index = get_index_actor(ray_cluster.settings)  # type: ignore[arg-type]
    status = ray.get(index.status.remote())
    record = next(e["record"] for e in status["indexes"] if e["record"].name == INDEX)
    vector = [0.0] * 384
    vector[0] = 1.0
    query = SearchQuery(scope=INDEX, vector=vector, identity=record.identity, limit=100)
    hits = ray.get(index.search.remote(query)).hits
    assert len(hits) == record.chunks
    for hit in hits:
        p = hit.payload
        assert {"repo", "path", "start_line", "end_line", "language", "symbol", "kind", "content_hash"} <= set(p)
        assert p["encoder"] == record.identity.model_dump() and p["space"] == record.identity.space_id
        assert p["provider"] == "samespace-embedder-cpu0" and p["build"] == record.build


CONTROLS = "ctl"


@pytest.fixture(scope="module")
def controlled(ray_cluster: RayCluster, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.support.search_controls import write_tree

    return reindex(ray_cluster, write_tree(tmp_path_factory.mktemp("e2e") / "controls"), CONTROLS)


async def test_search_code_controls_and_cursor_through_mcp(controlled: str, mcp_server: McpServer) -> None:
    from tests.support.search_controls import TEST_FILES

    asked = {"query": "charge a card for an invoice", "k": 50, "repo": CONTROLS}  # k past every chunk: all kept
    included = await search(mcp_server, **asked, tests="include")
    assert {h["path"] for h in included} & TEST_FILES  # the tests that charge a card are found...
    excluded = await search(mcp_server, **asked, tests="exclude")
    assert excluded and not {h["path"] for h in excluded} & TEST_FILES  # ...and left out
    assert ("src/lib.rs", 9) not in {(h["path"], h["start_line"]) for h in excluded}  # the Rust #[test] too
    assert {h["path"] for h in await search(mcp_server, **asked)} == {h["path"] for h in excluded}  # the default
    classes = await search(mcp_server, **asked, kind="class", tests="include")
    assert {(h["path"], h["symbol"]) for h in classes} == {
        ("src/billing.py", "Invoice"),
        ("src/test/java/BillingTest.java", "BillingTest"),
    }
    no_docs = await search(mcp_server, **asked, exclude="docs", tests="include")
    assert "docs/billing.md" in {h["path"] for h in included}
    assert no_docs and not any(h["path"].startswith("docs/") for h in no_docs)
    first = await answer(mcp_server, **{**asked, "k": 4}, rerank=False)
    second = await answer(mcp_server, **{**asked, "k": 4}, rerank=False, cursor=first["cursor"])
    pages = [(h["path"], h["start_line"]) for page in (first, second) for h in page["hits"]]
    whole = await search(mcp_server, **{**asked, "k": 8}, rerank=False)
    assert len(set(pages)) == 8 and pages == [(h["path"], h["start_line"]) for h in whole]  # no overlap, no gap
    refused = await call_tool(
        mcp_server.url, "search_code", {**asked, "k": 5, "rerank": False, "cursor": first["cursor"]}
    )
    assert refused.is_error and "cursor refused" in result_text(refused)
    bad = await call_tool(mcp_server.url, "search_code", {**asked, "kind": "lambda", "tests": "maybe"})
    assert bad.is_error and "kind" in result_text(bad) and "tests" in result_text(bad)
