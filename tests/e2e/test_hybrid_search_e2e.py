"""Hybrid search through MCP search_code on real Ray + Serve: exact identifiers, modes, filters,
and an index whose chunk text is an older version (refused until rebuilt)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import ray

from samespace.clients import call_tool, result_text
from tests.support.ray_cluster import McpServer, RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NAMESPACE = "hybrid"
REPO = "accounts"

SOURCES = {
    "src/users/repository.ts": """export class UserRepository {
  constructor(private readonly db: Database) {}

  getUserById(id: string): Promise<User | undefined> {
    return this.db.users.findOne({ id });
  }

  listActiveUsers(): Promise<User[]> {
    return this.db.users.find({ active: true });
  }
}
""",
    "src/users/handlers.ts": """export async function showProfile(req: Request, repo: UserRepository) {
  const user = await repo.getUserById(req.params.id);
  return user ? render(user) : notFound();
}

export async function deleteProfile(req: Request, repo: UserRepository) {
  const user = await repo.getUserById(req.params.id);
  if (user) await repo.remove(user);
}
""",
    "app/config.py": '''import yaml


def parse_config(path):
    """Read the service settings from a YAML file."""
    with open(path) as handle:
        return yaml.safe_load(handle)


def default_settings():
    return {"port": 8080, "debug": False}
''',
    "app/main.py": """from app.config import parse_config


def main(argv):
    settings = parse_config(argv[1])
    serve(settings)


def reload(path):
    return parse_config(path)
""",
    "docs/setup.md": "# Setup\n\nInstall the service, write a YAML settings file and start it.\n",
}


@pytest.fixture(scope="module")
def hybrid(ray_cluster: RayCluster, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from ray import serve

    from actors.build_ports import run_reindex
    from cluster.settings import SamespaceSettings
    from serve_apps.mcp import McpIngress

    repo = tmp_path_factory.mktemp("hybrid-repo") / REPO
    for path, text in SOURCES.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE}, store={"data_dir": tmp_path_factory.mktemp("hybrid-data")}
    )
    run_reindex(settings, repo, REPO, emit=lambda line: None)
    serve.run(McpIngress.options(num_replicas=1).bind(settings), name="hybrid", route_prefix="/hybrid")
    try:
        yield f"http://127.0.0.1:{mcp_server.port}/hybrid/mcp/"
    finally:
        serve.delete("hybrid")
        for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
            ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


async def search(url: str, **arguments: Any) -> dict[str, Any]:
    result = await call_tool(url, "search_code", {"repo": REPO, **arguments})
    assert not result.is_error, result_text(result)
    return dict(result.structured_content or {})


@pytest.mark.parametrize(
    ("query", "path", "symbol"),
    [
        ("getUserById", "src/users/repository.ts", "UserRepository"),  # the class chunk holds the method
        ("parse_config", "app/config.py", "parse_config"),
    ],
)
async def test_an_exact_identifier_ranks_its_defining_chunk_first(
    hybrid: str, query: str, path: str, symbol: str
) -> None:
    found = await search(hybrid, query=query, k=5)
    assert found["mode"] == "hybrid" and found["encoded_by"]
    first = found["hits"][0]
    assert (first["path"], first["symbol"]) == (path, symbol)


async def test_each_mode_runs_its_own_legs_and_says_which(hybrid: str) -> None:
    keyword = await search(hybrid, query="parse_config", k=5, mode="keyword")
    dense = await search(hybrid, query="read settings from a yaml file", k=5, mode="dense")
    assert keyword["mode"] == "keyword" and keyword["encoded_by"] is None
    assert keyword["hits"][0]["symbol"] == "parse_config"
    assert dense["mode"] == "dense" and dense["hits"][0]["path"] == "app/config.py"


async def test_filters_apply_to_every_leg(hybrid: str) -> None:
    for mode in ("keyword", "dense", "hybrid"):
        found = await search(hybrid, query="getUserById parse_config", k=10, mode=mode, language="python")
        assert found["hits"] and {h["language"] for h in found["hits"]} == {"python"}, mode
        found = await search(hybrid, query="getUserById", k=10, mode=mode, path_prefix="src/users")
        assert {h["path"] for h in found["hits"]} <= {p for p in SOURCES if p.startswith("src/users")}, mode


async def test_an_index_with_an_older_chunk_text_version_is_refused_until_rebuilt(hybrid: str) -> None:
    from actors import get_index_actor
    from cluster.settings import SamespaceSettings

    index = get_index_actor(SamespaceSettings(ray={"namespace": NAMESPACE}))
    current = ray.get(index.record.remote(REPO))
    old_identity = current.identity.model_copy(update={"chunk_text_version": current.identity.chunk_text_version - 1})
    build = ray.get(index.begin_build.remote("legacy", old_identity, current.repo_root, None))
    ray.get(index.commit_build.remote(build, 0, []))
    for mode in ("hybrid", "dense", "keyword"):
        result = await call_tool(hybrid, "search_code", {"query": "parse_config", "repo": "legacy", "mode": mode})
        text = result_text(result)
        assert result.is_error and "reindex" in text.lower() and "legacy" in text, (mode, text)
