"""History tools against git on a real repository's history (issue 30's acceptance).

    python -m bench.history --repo PATH [--sample 100] [--seed 0] [--dates 2023-01-01,2025-01-01]
                            [--limit N] [--out bench/results/history.json]

`--repo` is a git repository with a long history (a bare mirror works: the `fetch` tool brings e.g.
pallets/click, 3,329 commits, 1,378 on the first-parent line); it is cloned into a temp folder and
never changed.

1. Mine: the whole first-parent history of HEAD (`--limit`: the newest N), timed: commits a second,
   and the stored size (JSON of the records) per 1,000 commits.
2. Sample: `--sample` Python functions and methods of HEAD (seeded) whose `def name(` line is the only
   one in its file, so that `git log -L :def name(:path` names exactly that function, and with no
   function or class nested in them, nor nested in a function: git's range for a function ends at
   the next `def` or `class` line, nested or not, so for those git would answer for part of the
   function only (or for the rest of the function around it).
3. symbol_history against `git log --first-parent -L :def name(:path` (git's python funcname driver):
   the commits that changed the function's lines. Ours: `symbol_history(qualified, path)` entries with
   changed lines (a file renamed changes none; git does not list it either). Where we follow a function
   moved to another file, git stops: those commits count against our precision. Git's `:func:` range
   runs on to the line before the next `def` (the blank lines, comments and decorators there count as
   the function's), so the same is reported against `git log -L <first>,<last>:path` too: git
   following exactly the function's lines at HEAD.
4. what_changed against git for two dates: (function, commit) pairs of the sample in the window, git's
   from `-L ... --since=date`, ours from `what_changed(since=date)` items naming the function (under
   any name its history had).
5. Same-run competitor: file history, `git log --first-parent -- path`: every commit that touched the
   function's file counts as touching the function.
6. p50 per call of symbol_history and what_changed on the mined history (in memory).
7. search_commits: every commit embedded with the packaged model (`--no-embed`: keywords only) and
   stored as the index stores it (`HistoryStore`); `--queries` subjects that name one commit only are
   asked, and recall@3 counts the commit among the top 3: the hybrid as served, its keyword and dense
   legs alone, and `git log --grep=<subject> -F -n 3` (newest first), the same-run competitor.
Precision and recall are micro-averaged over (function, commit) pairs.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.graph import file_facts
from cluster.history import History, mine_history, parse_window_end
from cluster.index import HistoryState, HistoryStore, SearchQuery, commit_text, open_vector_store, query_keywords
from cluster.ingest import detect_language
from cluster.local import LocalEncoder
from cluster.settings import EmbeddingSettings
from cluster.space import EncoderIdentity

RESULTS = Path(__file__).resolve().parent / "results" / "history.json"
FUNCTION_KINDS = ("function", "method")


@dataclass(frozen=True)
class Sampled:
    path: str
    name: str
    qualified: str
    line: int = 0  # its lines at HEAD
    end_line: int = 0


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout


def clone(source: Path, dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(source), str(dest)], check=True, capture_output=True)
    (dest / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (dest / ".git" / "info" / "attributes").write_text("*.py diff=python\n")
    return dest


def sample_functions(repo: Path, count: int, seed: int) -> list[Sampled]:
    """Functions and methods of HEAD whose `def name(` line is unique in their file."""
    pool: list[Sampled] = []
    for path in sorted(git(repo, "ls-files", "*.py").splitlines()):
        text = (repo / path).read_text(encoding="utf-8", errors="replace")
        definitions = file_facts(path, detect_language(path), text).definitions
        pool.extend(
            Sampled(path, d.name, d.qualified, d.line, d.end_line)
            for d in definitions
            if d.kind in FUNCTION_KINDS
            and len(re.findall(rf"def {re.escape(d.name)}\(", text)) == 1
            and not any(d.line < inner.line <= d.end_line for inner in definitions)
            and not any(outer.kind in FUNCTION_KINDS and outer.line < d.line <= outer.end_line for outer in definitions)
        )
    random.Random(seed).shuffle(pool)
    return pool[:count]


def line_log(repo: Path, f: Sampled, *extra: str) -> set[str]:
    out = git(repo, "log", "--first-parent", "-s", "--format=%H", f"-L:def {re.escape(f.name)}[(]:{f.path}", *extra)
    return {line for line in out.splitlines() if line}


def span_log(repo: Path, f: Sampled, *extra: str) -> set[str]:
    """`git log -L <line>,<end>:path`: git following exactly the function's lines at HEAD (the same
    tracking as `-L :func:`, without its range running on to the next `def` line)."""
    out = git(repo, "log", "--first-parent", "-s", "--format=%H", f"-L{f.line},{f.end_line}:{f.path}", *extra)
    return {line for line in out.splitlines() if line}


def file_log(repo: Path, f: Sampled, *extra: str) -> set[str]:
    out = git(repo, "log", "--first-parent", "--format=%H", *extra, "--", f.path)
    return {line for line in out.splitlines() if line}


def scores(truth: dict[Sampled, set[str]], ours: dict[Sampled, set[str]]) -> dict[str, float]:
    hits = sum(len(truth[f] & ours[f]) for f in truth)
    found = sum(len(ours[f]) for f in truth)
    true = sum(len(truth[f]) for f in truth)
    precision = hits / found if found else 1.0
    recall = hits / true if true else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 3), "recall": round(recall, 3), "f1": round(f1, 3), "pairs": true}


def symbol_commits(history: History, f: Sampled) -> tuple[set[str], set[tuple[str, str]]]:
    """Our commits that changed `f`'s lines, and every (path, name) its history had."""
    answer = history.symbol_history(f.qualified, f.path, limit=10_000)
    names = {(f.path, f.qualified)} | {(c.path, c.symbol) for c in answer.commits}
    return {c.commit for c in answer.commits if c.lines}, names


def p50_ms(samples: Sequence[float]) -> float:
    return round(statistics.median(samples) * 1000, 3) if samples else 0.0


def run(source: Path, work: Path, sample: int, seed: int, dates: Sequence[str], limit: int | None) -> dict[str, Any]:
    repo = clone(source, work / "repo")
    started = time.perf_counter()
    mined = mine_history(repo, "HEAD", limit=limit)
    mine_s = time.perf_counter() - started
    history = History("bench", mined.commits, mined.spans)
    stored = len(json.dumps([c.model_dump(mode="json") for c in mined.commits]).encode())
    functions = sample_functions(repo, sample, seed)
    truth = {f: line_log(repo, f) for f in functions}
    ours: dict[Sampled, set[str]] = {}
    names: dict[Sampled, set[tuple[str, str]]] = {}
    timings: list[float] = []
    for f in functions:
        started = time.perf_counter()
        ours[f], names[f] = symbol_commits(history, f)
        timings.append(time.perf_counter() - started)
    result: dict[str, Any] = {
        "commits_mined": len(mined.commits),
        "more": mined.more,
        "mine_s": round(mine_s, 1),
        "commits_per_s": round(len(mined.commits) / mine_s, 1) if mine_s else 0.0,
        "stored_bytes_per_1000_commits": round(stored / max(1, len(mined.commits)) * 1000),
        "symbol_changes": sum(len(c.symbols) for c in mined.commits),
        "functions": len(functions),
        "symbol_history": scores(truth, ours),
        "symbol_history_vs_git_span": scores({f: span_log(repo, f) for f in functions}, ours),
        "file_history_baseline": scores(truth, {f: file_log(repo, f) for f in functions}),
        "symbol_history_p50_ms": p50_ms(timings),
        "what_changed": {},
    }
    for date in dates:
        since = parse_window_end(date, time.time)
        started = time.perf_counter()
        items, _ = history.what_changed(since, limit=1_000_000)
        took = time.perf_counter() - started
        in_window = {f: {i.commit for i in items if (i.path, i.symbol) in names[f] and i.lines} for f in functions}
        window_truth = {f: line_log(repo, f, f"--since={date}") for f in functions}
        span_truth = {f: span_log(repo, f, f"--since={date}") for f in functions}
        baseline = {f: file_log(repo, f, f"--since={date}") for f in functions}
        calls: list[float] = []
        for _ in range(20):
            started = time.perf_counter()
            first_page, _ = history.what_changed(since, limit=100)
            calls.append(time.perf_counter() - started)
        result["what_changed"][date] = {
            **scores(window_truth, in_window),
            "vs_git_span": scores(span_truth, in_window),
            "file_history_baseline": scores(window_truth, baseline),
            "items": len(items),
            "all_items_ms": round(took * 1000, 1),
            "p50_ms_limit_100": p50_ms(calls),
            "limit_100_items": len(first_page),
        }
    result["history"] = history  # for commit_search; not written out
    result["repo"] = str(repo)
    return result


def commit_search(history: History, work: Path, queries: int, seed: int, encoder: Any | None) -> dict[str, Any]:
    """recall@3 of `search_commits` (the store's hybrid, as served) for commit subjects used as queries,
    beside its keyword and dense legs alone and `git log --grep` of the subject (newest first)."""
    store = HistoryStore(open_vector_store("embedded", data_dir=work / "store", url=None))
    commits = history.commits
    texts = [commit_text(c) for c in commits]
    started = time.perf_counter()
    if encoder is not None:
        vectors = encoder.encode(texts).tolist()
        identity = encoder.identity
    else:  # no model: a keyword-only search (the vectors are one constant direction)
        identity = EncoderIdentity(model="none", weights_sha256="0" * 64, width=4, max_seq_length=1)
        vectors = [[1.0, 0.0, 0.0, 0.0]] * len(commits)
    embed_s = time.perf_counter() - started
    state = HistoryState(index="bench", folder=str(work), newest=commits[0].commit, identity=identity)
    store.write(state, commits, vectors, [identity.model_dump()] * len(commits), replace=True)
    counts: dict[str, int] = {}
    for c in commits:
        counts[c.subject] = counts.get(c.subject, 0) + 1
    unique = [c for c in commits if counts[c.subject] == 1 and c.subject.strip()]
    random.Random(seed).shuffle(unique)
    asked = unique[:queries]
    hits = {"hybrid": 0, "keyword": 0, "dense": 0, "git_grep": 0}
    timings: list[float] = []
    for c in asked:
        vector = encoder.encode_queries([c.subject])[0].tolist() if encoder is not None else None
        keywords = query_keywords(c.subject)
        legs = {
            "hybrid": SearchQuery(vector=vector, identity=identity if vector else None, keywords=keywords, limit=3),
            "keyword": SearchQuery(keywords=keywords, limit=3),
        }
        if vector is not None:
            legs["dense"] = SearchQuery(vector=vector, identity=identity, limit=3)
        for leg, query in legs.items():
            began = time.perf_counter()
            found = [h.commit for h in store.search("bench", query)]
            if leg == "hybrid":
                timings.append(time.perf_counter() - began)
            hits[leg] += c.commit in found[:3]
        grep = git(work / "repo", "log", "--first-parent", "--format=%H", "-F", f"--grep={c.subject}", "-n", "3")
        hits["git_grep"] += c.commit in grep.split()
    n = max(1, len(asked))
    return {
        "subjects": len(asked),
        "subjects_shared_by_several_commits_left_out": sum(1 for c in commits if counts[c.subject] > 1),
        "recall_at_3": {leg: round(count / n, 3) for leg, count in hits.items() if leg != "dense" or encoder},
        "search_p50_ms": p50_ms(timings),
        "embed_s": round(embed_s, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repo", type=Path, required=True, help="a git repository (a bare mirror works)")
    parser.add_argument("--sample", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dates", default="2023-01-01,2025-01-01")
    parser.add_argument("--limit", type=int, default=None, help="mine only the newest N commits")
    parser.add_argument("--queries", type=int, default=300, help="commit subjects asked of search_commits")
    parser.add_argument("--no-embed", action="store_true", help="search_commits by keywords only (no model)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-history-") as work:
        result = run(args.repo, Path(work), args.sample, args.seed, args.dates.split(","), args.limit)
        encoder = None if args.no_embed else LocalEncoder(EmbeddingSettings())
        result["search_commits"] = commit_search(result.pop("history"), Path(work), args.queries, args.seed, encoder)
    result["source"] = str(args.repo)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
