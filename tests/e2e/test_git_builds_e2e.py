"""Git-aware builds end to end: real Ray, the real model and store, real git repositories.

Every build records its commit, branch and dirtiness; hits carry the commit; a ref (branch, tag,
commit) is indexed from the repository's objects without touching the checkout, and a feature
branch indexed after its base embeds only the chunks it changed (counted at the embedder).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import ray

from tests.support.git_repos import git, git_repo, module
from tests.support.ray_cluster import RayCluster

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NAMESPACE = "gitbuilds"
EMBEDDER = "samespace-embedder-cpu0"


@dataclass
class Env:
    settings: Any
    tmp: pytest.TempPathFactory

    @property
    def index(self) -> Any:
        from actors import get_index_actor

        return get_index_actor(self.settings)

    def reindex(self, repo: Path, name: str, **kwargs: Any) -> tuple[Any, list[str]]:
        from actors.build_ports import run_reindex

        lines: list[str] = []
        return run_reindex(self.settings, repo, name, emit=lines.append, **kwargs), lines

    def encodes(self, texts: list[str]) -> int:
        """How many times the embedder encoded these texts, in all."""
        embedder = ray.get_actor(EMBEDDER, namespace=NAMESPACE)
        return sum(ray.get([embedder.encode_count.remote(text) for text in texts]))

    def texts(self, folder: Path) -> list[str]:
        from cluster.build import collect_chunks
        from cluster.index.representations import name_text
        from cluster.space import embedding_text

        chunks, _, _ = collect_chunks(folder, self.settings)
        return [embedding_text(c) for c in chunks] + [name_text(c) for c in chunks]

    def search(self, name: str | None, text: str) -> list[Any]:
        from cluster.index import SearchQuery

        embedder = ray.get_actor(EMBEDDER, namespace=NAMESPACE)
        vector, identity = ray.get(embedder.encode_query.remote(text))
        hits = ray.get(
            self.index.search.remote(SearchQuery(scope=name, vector=vector.tolist(), identity=identity, limit=5))
        ).hits
        return list(hits)


@pytest.fixture(scope="module")
def env(ray_cluster: RayCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    from cluster.settings import SamespaceSettings

    settings = SamespaceSettings(ray={"namespace": NAMESPACE}, store={"data_dir": tmp_path_factory.mktemp("git-data")})
    try:
        yield Env(settings, tmp_path_factory)
    finally:
        for entry in [e for e in ray.util.list_named_actors(all_namespaces=True) if e["namespace"] == NAMESPACE]:
            ray.kill(ray.get_actor(entry["name"], namespace=NAMESPACE))


def test_a_build_records_its_commit_and_hits_carry_it(env: Env) -> None:
    repo = git_repo(env.tmp.mktemp("record") / "shop")
    head = git(repo, "rev-parse", "HEAD")
    record, lines = env.reindex(repo, "shop")
    assert record.source.model_dump() == {"vcs": "git", "commit": head, "branch": "main", "ref": None, "dirty": False}
    assert record.origin == record.repo_root == str(repo)
    assert f"source: main at {head}" in lines
    hit = env.search("shop", "validate the refund record")[0]
    assert (hit.payload["commit"], hit.payload["ref"]) == (head, "main")

    # Edited, indexed dirty; then the edit is committed: same files, so no new build, but the
    # record now names the new commit and is clean.
    (repo / "refund.py").write_text(module("refund", "* 3"))
    dirty, _ = env.reindex(repo, "shop")
    assert dirty.source.dirty and dirty.source.commit == head and dirty.build != record.build
    git(repo, "commit", "-qam", "refunds triple")
    committed, lines = env.reindex(repo, "shop")
    assert any(line.startswith("up to date:") for line in lines)
    assert committed.build == dirty.build
    assert committed.source.commit == git(repo, "rev-parse", "HEAD") and not committed.source.dirty
    assert ray.get(env.index.record.remote("shop")).source == committed.source  # stored, not just returned


def test_a_feature_branch_by_ref_embeds_only_what_it_changed_and_leaves_the_checkout_alone(env: Env) -> None:
    repo = git_repo(env.tmp.mktemp("branch") / "shop")
    base, _ = env.reindex(repo, "base")
    git(repo, "checkout", "-q", "-b", "feature")
    changed = {"invoice": "* 5", "shipment": "+ 11", "customer": "- 7"}  # one function in each of 3 files
    for topic, body in changed.items():
        (repo / f"{topic}.py").write_text(module(topic, body))
    git(repo, "commit", "-qam", "feature: three files")
    feature_commit = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    (repo / "payment.py").write_text("def work_in_progress():\n    return 'not committed'\n")
    status_before = git(repo, "status", "--porcelain")

    export = env.tmp.mktemp("expected-feature")
    git(repo, "clone", "-q", "--branch", "feature", str(repo), str(export / "tree"))  # only to count the texts
    texts = env.texts(export / "tree")
    before = env.encodes(texts)
    feature, lines = env.reindex(repo, "shop.feature", ref="feature")
    encoded = env.encodes(texts) - before
    assert encoded == 2 * 3  # the code and name texts of the 3 changed chunks, nothing else
    assert (feature.embedded, feature.reused) == (3, base.chunks - 3)
    assert "reusing unchanged vectors of index 'base' (same folder, same space)" in lines
    assert feature.source.model_dump() == {
        "vcs": "git",
        "commit": feature_commit,
        "branch": "feature",
        "ref": "feature",
        "dirty": False,
    }
    assert git(repo, "status", "--porcelain") == status_before  # the checkout (and its dirty file) untouched
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert feature.origin == str(repo) and feature.repo_root != str(repo)

    # Both refs searchable: the branch's text in its index, main's in the base index.
    feature_hit = step_0(env.search("shop.feature", "step 0 of the invoice pipeline"), "invoice")
    assert "* 5" in feature_hit.payload["text"]
    assert feature_hit.payload["ref"] == "feature" and feature_hit.payload["commit"] == feature_commit
    base_hit = step_0(env.search("base", "step 0 of the invoice pipeline"), "invoice")
    assert "* 2" in base_hit.payload["text"] and base_hit.payload["ref"] == "main"
    read = ray.get(env.index.read_lines.remote("shop.feature", "invoice.py", 3, 3))
    assert "* 5" in read.text  # read_code serves the ref's files, not the checkout's
    from cluster.grep import GrepRequest

    grepped = ray.get(env.index.grep.remote(GrepRequest(pattern=r"\* 5$", repo="shop.feature")))
    assert [(m.path, m.line, m.symbol, m.commit) for m in grepped.matches] == [
        ("invoice.py", 3, "invoice_step_0", feature_commit)
    ]  # grep_code searches the ref's exported tree
    assert ray.get(env.index.grep.remote(GrepRequest(pattern="work_in_progress", repo="shop.feature"))).matches == []
    assert "work_in_progress" not in (Path(feature.repo_root) / "payment.py").read_text()

    again, lines = env.reindex(repo, "shop.feature", ref="feature")
    assert again.build == feature.build and f"up to date: feature is still at {feature_commit}" in lines

    export_dir = Path(feature.repo_root)
    assert export_dir.is_dir() and export_dir.stat().st_mode & 0o777 == 0o700
    assert ray.get(env.index.remove.remote("shop.feature")) == [feature.build]
    assert not export_dir.exists()
    assert "shop.feature" not in ray.get(env.index.names.remote())


def step_0(hits: list[Any], topic: str) -> Any:
    found = [hit for hit in hits if hit.payload["symbol"] == f"{topic}_step_0"]
    assert found, [hit.payload["symbol"] for hit in hits]
    return found[0]


def test_an_unknown_ref_fails_before_anything_is_built(env: Env) -> None:
    from cluster.errors import RefNotFound

    repo = git_repo(env.tmp.mktemp("noref") / "shop")
    with pytest.raises(RefNotFound, match="does not resolve"):
        env.reindex(repo, "noref", ref="no-such-branch")
    assert "noref" not in ray.get(env.index.names.remote())
