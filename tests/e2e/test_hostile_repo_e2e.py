"""End to end: a hostile repository indexed under `aggregate` against the OpenRouter fake.

The generated repository plants canary secrets (a private key file and a PEM block inside code, an
AWS key inside code and in `.aws/credentials`, an OpenRouter key in `.env`, an npm token, a token in
the `.git/config` remote reached through an in-repo symlink, a file listed in `.git/info/exclude`),
a minified bundle and 10,000-deep nesting. It is indexed by the real reindex job (a Ray job) while
the cloud lane embeds beside the local actor. Then no canary appears in anything the fake received,
in any MCP or `/rlm/ask` response, in the store's files (their bytes, and the text the engine reads
back from them), or in the job log; positive controls (a plain marker word, a plain definition's
name) prove each of those channels can see text at all. The job succeeds and
`index_status` reports the skips by reason. Also: a root that vanished is an error, and a root
whose files all vanished does not wipe the serving index.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray
from pydantic import SecretStr
from ray.job_submission import JobStatus, JobSubmissionClient

from samespace.clients import call_tool, result_text
from tests.support.jobs import submit_job, wait_for_job
from tests.support.ray_cluster import FIXTURES, McpServer, RayCluster, reindex_entrypoint

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NAMESPACE = "hostile"
INDEX = "hostile"
CLOUD_KEY = "sk-or-v1-" + "feedface" * 8
MODEL = "qwen/qwen3-embedding-4b"
UPSTREAM = "hostile-exact"
TAG = uuid.uuid4().hex[:12]
DEPTH = 2_000
MARKER = f"plainmarker{TAG}"  # not a secret: must be findable everywhere text goes (positive control)
SYMBOL = f"plainsymbol{TAG}"  # a plain definition's name: the store's keyword indexes keep names as written
# Canary secrets, assembled at run time so no committed file holds a literal credential.
CANARIES = {
    "pem": f"MIIEpAIBAAKCAQEA{TAG}pemcanary" + "Q" * 24,
    "aws": "AKIA" + TAG.upper()[:12] + "CNRY",
    "aws_secret": f"wJalrXUtnFEMI{TAG}K7MDENGbPxRfiCYcanary",
    "github": "gh" + "p_" + (TAG + "githubcanary" + "a" * 30)[:36],
    "openrouter": "sk-or-v1-" + (TAG + "0" * 64)[:64],
    "npm": "npm_" + (TAG + "npmcanary" + "b" * 30)[:36],
    "excluded": f"excludednote{TAG}",
}


def pem_block(body: str) -> str:
    kind = "RSA PRIVATE " + "KEY"  # split so this file holds no key header itself
    return f"-----BEGIN {kind}-----\n{body}\n{'A' * 64}\n-----END {kind}-----"


def write_hostile_repo(root: Path) -> Path:
    repo = root / "hostile"
    shutil.copytree(FIXTURES / "polyglot", repo)
    files = {
        **{
            f"pkg/plain_{i}.py": "".join(
                f"def step_{i}_{j}(value):\n    return value * {j} + {i}\n\n\n" for j in range(4)
            )
            for i in range(30)
        },
        "pkg/marker.py": (
            f'def describe_marker():\n    """Return the plain marker word."""\n    return "{MARKER}"\n\n\n'
            f"def {SYMBOL}():\n    return 1\n"
        ),
        "src/keys.py": (
            "def load_fallback_key():\n    return '''" + pem_block(CANARIES["pem"]) + "'''\n\n\n"
            "def key_size():\n    return 2048\n"
        ),
        "src/settings.py": (
            f'AWS_ACCESS_KEY_ID = "{CANARIES["aws"]}"\nAWS_SECRET_ACCESS_KEY = "{CANARIES["aws_secret"]}"\n\n\n'
            "def region():\n    return 'eu-central-1'\n"
        ),
        "deploy/server.pem": pem_block(CANARIES["pem"]) + "\n",
        "deploy/id_rsa": pem_block(CANARIES["pem"]) + "\n",
        ".env": f"OPENROUTER_API_KEY={CANARIES['openrouter']}\n",
        ".aws/credentials": f"[default]\naws_access_key_id = {CANARIES['aws']}\n"
        f"aws_secret_access_key = {CANARIES['aws_secret']}\n",
        ".npmrc": f"//registry.npmjs.org/:_authToken={CANARIES['npm']}\n",
        "notes/private.md": f"# Private\n\n{CANARIES['excluded']} is only in an excluded file.\n",
        "web/vendor.min.js": ";".join(f"function v{i}(a){{return a*{i}+1}}" for i in range(20_000)) + "\n",
        # 1,000 nested namespaces once killed the job with a RecursionError; 10,000 in every
        # grammar is the pathological corpus's test below.
        "native/deep.cpp": "".join(f"namespace n{i} {{\n" for i in range(DEPTH))
        + "int deepest() { return 1; }\n"
        + "}\n" * DEPTH,
        "native/deep.rs": "".join("mod m {\n" for _ in range(DEPTH)) + "fn deepest() -> i32 { 1 }\n" + "}\n" * DEPTH,
    }
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git = repo / ".git"
    (git / "info").mkdir(parents=True)
    (git / "info" / "exclude").write_text("notes/private.md\n")
    (git / "config").write_text(
        '[core]\n\trepositoryformatversion = 0\n[remote "origin"]\n'
        f"\turl = https://ci-bot:{CANARIES['github']}@github.com/acme/hostile.git\n"
    )
    (repo / "git-remote.cfg").symlink_to(git / "config")
    return repo


@dataclass
class Hostile:
    settings: Any
    fake: Any
    repo: Path
    data_dir: Path
    base: str
    mcp_url: str
    log: str
    responses: list[str] = field(default_factory=list)


def job_env(cluster: RayCluster, settings: Any, fake: Any) -> dict[str, str]:
    routes = {
        "code-embedding": {"model": MODEL, "upstream": UPSTREAM},
        "code-assistant": {"model": "poolside/laguna-s-2.1"},
    }
    return {
        **cluster.env,
        "SAMESPACE_RAY__NAMESPACE": NAMESPACE,
        "SAMESPACE_STORE__DATA_DIR": str(settings.store.data_dir),
        "SAMESPACE_CLOUD__ENABLED": "true",
        "SAMESPACE_CLOUD__BASE_URL": fake.base_url,
        "SAMESPACE_CLOUD__ROUTES": json.dumps(routes),
    }


def run_job(cluster: RayCluster, env: dict[str, str], repo: Path, *extra: str) -> tuple[JobStatus, str]:
    client = JobSubmissionClient(cluster.dashboard_url)
    job_id = submit_job(client, " ".join([reindex_entrypoint(repo, INDEX), *extra]), env)
    status = wait_for_job(client, job_id, timeout_s=600)
    return status, client.get_job_logs(job_id)


@pytest.fixture(scope="module")
def hostile(
    ray_cluster: RayCluster, mcp_server: McpServer, fake_openrouter: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Hostile]:
    from ray import serve

    from actors import ensure_virtual_containers
    from cluster.settings import SamespaceSettings
    from serve_apps.mcp import McpIngress

    fake_openrouter.configure(keys={CLOUD_KEY: {"label": "hostile"}}, upstreams={UPSTREAM: {"vectors": "same"}})
    fake_openrouter.reset()
    data_dir = tmp_path_factory.mktemp("hostile-data")
    settings = SamespaceSettings(
        ray={"namespace": NAMESPACE},
        store={"data_dir": data_dir},
        cloud={
            "enabled": True,
            "base_url": fake_openrouter.base_url,
            "routes": {
                "code-embedding": {"model": MODEL, "upstream": UPSTREAM},
                "code-assistant": {"model": "poolside/laguna-s-2.1"},
            },
        },
    )
    env = job_env(ray_cluster, settings, fake_openrouter)
    containers = ensure_virtual_containers(settings)
    ray.get([c.set_key.remote(SecretStr(CLOUD_KEY)) for c in containers])
    repo = write_hostile_repo(tmp_path_factory.mktemp("hostile-repo"))
    status, log = run_job(ray_cluster, env, repo)
    assert status == JobStatus.SUCCEEDED, log
    serve.run(McpIngress.options(num_replicas=1).bind(settings), name="hostile", route_prefix="/hostile")
    base = f"http://127.0.0.1:{mcp_server.port}/hostile"
    try:
        yield Hostile(settings, fake_openrouter, repo, data_dir, base, f"{base}/mcp/", log)
    finally:
        serve.delete("hostile")
        for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
            ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


async def tool(env: Hostile, name: str, keep: bool = True, **arguments: Any) -> dict[str, Any]:
    """Call an MCP tool; `keep` adds its answer to those the no-answer-holds-a-canary check reads."""
    result = await call_tool(env.mcp_url, name, arguments)
    text = result_text(result)
    if keep:
        env.responses.append(text + json.dumps(result.structured_content or {}))
    assert not result.is_error, text
    return result.structured_content or {}


def leaked(text: str) -> list[str]:
    return [name for name, secret in CANARIES.items() if secret in text]


def test_the_job_succeeds_and_reports_the_skips_by_reason(hostile: Hostile) -> None:
    log = hostile.log
    assert f"committed {INDEX!r}" in log
    assert "skipped: " in log
    for path in (
        ".env",
        "deploy/server.pem",
        "deploy/id_rsa",
        ".aws/",
        ".npmrc",
        "git-remote.cfg",
        "web/vendor.min.js",
        "src/keys.py",
        "src/settings.py",
    ):
        assert path in log, path
    assert "notes/private.md" not in log  # excluded by .git/info/exclude: ignored, not a reportable skip
    assert not leaked(log), leaked(log)
    assert MARKER not in log  # contents never reach the log, plain ones neither
    assert "Traceback" not in log


async def test_index_status_reports_the_skips_by_reason(hostile: Hostile) -> None:
    status = await tool(hostile, "index_status")
    (info,) = [i for i in status["indexes"] if i["repo"] == INDEX]
    counts, paths = info["skipped"]["counts"], info["skipped"]["paths"]
    assert counts["secret-file"] == 5, counts  # .env, server.pem, id_rsa, the .aws/ folder, .npmrc
    assert sorted(paths["secret-file"]) == sorted([".aws/", ".env", ".npmrc", "deploy/id_rsa", "deploy/server.pem"])
    assert paths["symlink-refused"] == ["git-remote.cfg"]
    assert paths["generated"] == ["web/vendor.min.js"]
    assert sorted(paths["secret-content"]) == ["src/keys.py", "src/settings.py"]
    assert "chunk-failed" not in counts  # the 10,000-deep files are chunked, not skipped
    assert not leaked(json.dumps(status))


async def test_the_cloud_lane_embedded_and_no_canary_reached_the_fake(hostile: Hostile) -> None:
    status = await tool(hostile, "index_status")
    (info,) = [i for i in status["indexes"] if i["repo"] == INDEX]
    assert any("-OR-CodeEmbedding" in p for p in info["providers"]), info["providers"]  # cloud rows were written
    # The synthesis step runs on the cloud (no local chat endpoint): the evidence it sends is code.
    await tool(hostile, "ask_code", question="what does describe_marker return?", repo=INDEX, deep=False)
    assert hostile.fake.seen([MARKER]) == [MARKER]  # positive control: the fake does see indexed text
    assert hostile.fake.seen(list(CANARIES.values())) == []


async def test_the_deep_files_and_the_clean_parts_of_leaky_files_are_searchable(hostile: Hostile) -> None:
    files = await tool(hostile, "search_files", query="deep", repo=INDEX)
    assert {"native/deep.cpp", "native/deep.rs"} <= {f["path"] for f in files["files"]}
    symbols = await tool(hostile, "search_symbols", query="key_size", repo=INDEX)
    assert any(s["path"] == "src/keys.py" for s in symbols["hits"])


QUERIES = [
    "private key",
    "aws access key id secret",
    "openrouter api key",
    "git remote url token",
    "npm auth token registry",
    "excluded private note",
    "load fallback key",
    "region",
]


async def test_no_mcp_tool_and_no_ask_returns_a_canary(hostile: Hostile) -> None:
    seen: list[str] = []
    for query in QUERIES:
        for mode in ("hybrid", "keyword"):
            hits = (await tool(hostile, "search_code", query=query, k=20, repo=INDEX, mode=mode))["hits"]
            seen += [json.dumps(h) for h in hits]
        seen.append(json.dumps(await tool(hostile, "ask_code", question=f"where is the {query}?", repo=INDEX)))
    hit = (await tool(hostile, "search_code", query="marker word", k=5, repo=INDEX, mode="keyword"))["hits"]
    assert any(MARKER in h["snippet"] for h in hit)  # positive control: snippets do carry code
    for path in ("src/keys.py", "src/settings.py", "pkg/marker.py"):
        read = await tool(hostile, "read_code", repo=INDEX, path=path, start_line=1, end_line=40)
        seen.append(read["text"])
        near = await tool(hostile, "neighbors", repo=INDEX, path=path, line=1, count=5)
        seen.append(json.dumps(near))
    seen.append(json.dumps(await tool(hostile, "repo_overview", repo=INDEX)))
    for path in (".env", "deploy/server.pem", "git-remote.cfg", ".git/config", "notes/private.md", ".npmrc"):
        result = await call_tool(
            hostile.mcp_url, "read_code", {"repo": INDEX, "path": path, "start_line": 1, "end_line": 10}
        )
        assert result.is_error, path  # never an indexed file
        seen.append(result_text(result))
    everything = "\n".join(seen + hostile.responses)
    assert MARKER in everything
    assert not leaked(everything), leaked(everything)


def test_rlm_ask_returns_no_canary(hostile: Hostile) -> None:
    for query in QUERIES:
        response = httpx.post(
            f"{hostile.base}/rlm/ask", json={"question": f"show me the {query}", "repo": INDEX}, timeout=120
        )
        assert response.status_code == 200, response.text
        assert not leaked(response.text), (query, leaked(response.text))


async def test_no_canary_is_in_the_stores_files_or_in_its_text(hostile: Hostile) -> None:
    blobs = [path.read_bytes() for path in hostile.data_dir.rglob("*") if path.is_file()]
    # The engine's keyword indexes keep names uncompressed, whether or not its log was truncated yet.
    assert any(SYMBOL.encode() in blob for blob in blobs)  # positive control: the byte scan sees stored strings
    for name, secret in CANARIES.items():
        assert not any(secret.encode() in blob for blob in blobs), name
    # Payload text is LZ4-compressed on disk, where a byte scan can miss a string (a repeat inside it becomes
    # a back-reference): every stored line is read back through the engine instead. Not kept: grep_code's
    # answer echoes its pattern, here a canary.
    found = await tool(hostile, "grep_code", keep=False, pattern=MARKER, regex=False, repo=INDEX)
    assert [m["path"] for m in found["matches"]] == ["pkg/marker.py"]  # positive control: grep reads stored text
    for name, secret in CANARIES.items():
        found = await tool(hostile, "grep_code", keep=False, pattern=secret, regex=False, repo=INDEX)
        assert found["matches"] == [] and found["files_searched"] > 0, name


def test_a_vanished_root_is_an_error_and_the_index_keeps_serving(
    ray_cluster: RayCluster, hostile: Hostile, tmp_path: Path
) -> None:
    from actors import get_index_actor

    before = ray.get(get_index_actor(hostile.settings).record.remote(INDEX))
    env = job_env(ray_cluster, hostile.settings, hostile.fake)
    status, log = run_job(ray_cluster, env, tmp_path / "unmounted")
    assert status == JobStatus.FAILED
    # refused at the job's start, before anything is read (the folder is confined again there)
    assert f"reindex failed: refusing to index '{tmp_path / 'unmounted'}': it does not exist" in log, log
    assert "Traceback" not in log, log
    assert ray.get(get_index_actor(hostile.settings).record.remote(INDEX)).build == before.build


def test_a_root_whose_files_all_vanished_does_not_wipe_the_index(
    ray_cluster: RayCluster, hostile: Hostile, tmp_path: Path
) -> None:
    from actors import get_index_actor

    before = ray.get(get_index_actor(hostile.settings).record.remote(INDEX))
    empty = tmp_path / "hostile"
    empty.mkdir()
    env = job_env(ray_cluster, hostile.settings, hostile.fake)
    status, log = run_job(ray_cluster, env, empty)
    assert status == JobStatus.FAILED
    assert f"refusing to shrink index {INDEX!r} from {before.files} to 0 files" in log, log
    assert "--allow-shrink" in log and "Traceback" not in log
    after = ray.get(get_index_actor(hostile.settings).record.remote(INDEX))
    assert after.build == before.build and after.chunks == before.chunks


def test_the_pathological_corpus_is_indexed_by_the_job(
    ray_cluster: RayCluster, hostile: Hostile, tmp_path: Path
) -> None:
    """10,000-deep nesting in every grammar, 1 MB one-line files, a 100,000-line file, NULs, invalid
    UTF-8 and mixed line endings, through the real job. 2,000-line windows keep the embedding work
    to ~450 chunks on 2 CPU cores; the parse, the depth cap, the byte cap and the keyword
    extraction see every line all the same (the 40-line default is covered per file, without
    embedding, by tests/unit/ingest/test_pathological.py)."""
    from actors import get_index_actor
    from tests.support.fakes.pathological import MINIFIED, write_pathological_corpus

    corpus = tmp_path / "pathological"
    written = write_pathological_corpus(corpus)
    env = {**job_env(ray_cluster, hostile.settings, hostile.fake), "SAMESPACE_CHUNKING__WINDOW_LINES": "2000"}
    client = JobSubmissionClient(ray_cluster.dashboard_url)
    job_id = submit_job(client, reindex_entrypoint(corpus, "pathological"), env)
    status = wait_for_job(client, job_id, timeout_s=600)
    log = client.get_job_logs(job_id)
    assert status == JobStatus.SUCCEEDED, log
    record = ray.get(get_index_actor(hostile.settings).record.remote("pathological"))
    skipped = record.skipped.paths
    assert set(skipped.get("generated", [])) == set(MINIFIED)
    assert "chunk-failed" not in skipped
    indexed = len(written) - record.skipped.total
    assert record.files == indexed and record.chunks > indexed  # every other file has its chunks
