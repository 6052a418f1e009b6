"""The pathological corpus: time and peak memory of our walk + chunk + keywords vs
plain 40-line windows, same corpus, same run.

    python -m bench.pathological

The corpus (tests/support/fakes/pathological.py: every grammar nested 10,000 deep, ~1 MB one-line files,
a 100,000-line file, NULs, invalid UTF-8, mixed line endings) is generated in a temp folder, then
each run goes back to back in a fresh process, measured from a launcher process around it (wall
time; CPU time and peak RSS from RUSAGE_CHILDREN once the run has exited; imports included):
1. ours: cluster.ingest.walker.walk_repository (the reindex's walk settings), generated_reason (skips
   minified and generated files), chunk_file and chunk_keywords for every chunk.
2. baseline: read every file, cut plain 40-line windows, count words with one regex (the
   "100-line alternative" with none of the guards).
Results: printed, and written to bench/results/pathological.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
RUNS = ("ours", "baseline")
BASELINE_WINDOW_LINES = 40
_WORD = re.compile(r"\w+")


def run_ours(root: Path) -> dict[str, Any]:
    from cluster.index.keywords import chunk_keywords
    from cluster.ingest.chunking import chunk_file
    from cluster.ingest.generated import generated_reason
    from cluster.ingest.walker import walk_repository, walk_settings
    from cluster.settings import load_settings

    settings = load_settings()
    walk = walk_settings(settings)
    files = chunks = chunk_bytes = terms = 0
    generated: dict[str, str] = {}
    for source in walk_repository(root, walk):
        files += 1
        reason = generated_reason(source.path, source.text)
        if reason is not None:
            generated[source.path] = reason
            continue
        for chunk in chunk_file(source.path, source.text, settings.chunking):
            chunks += 1
            chunk_bytes += len(chunk.text.encode("utf-8", "surrogatepass"))
            terms += len(chunk_keywords(chunk.text, source.path, chunk.symbol).indices)
    return {
        "files": files,
        "chunks": chunks,
        "chunk_bytes": chunk_bytes,
        "terms": terms,
        "skipped_generated": len(generated),
        "generated": generated,
    }


def run_baseline(root: Path) -> dict[str, Any]:
    files = chunks = chunk_bytes = terms = 0
    for folder, _, names in os.walk(root):
        for name in sorted(names):
            text = (Path(folder) / name).read_bytes().decode("utf-8", errors="replace")
            files += 1
            lines = text.split("\n")
            for first in range(0, len(lines), BASELINE_WINDOW_LINES):
                body = "\n".join(lines[first : first + BASELINE_WINDOW_LINES])
                if not body.strip():
                    continue
                chunks += 1
                chunk_bytes += len(body.encode("utf-8", "surrogatepass"))
                terms += len(Counter(word.lower() for word in _WORD.findall(body)))
    return {"files": files, "chunks": chunks, "chunk_bytes": chunk_bytes, "terms": terms}


def worker(run: str, root: Path) -> None:
    """One run in this process; its counts as one JSON line on stdout."""
    result = run_ours(root) if run == "ours" else run_baseline(root)
    print(json.dumps(result))


def launcher(run: str, root: Path) -> None:
    """Start the worker, wait, and report its wall time and peak RSS (this process's only child)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bench.pathological", "--worker", run, str(root)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    wall_s = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = usage.ru_utime + usage.ru_stime  # steadier than wall time on a shared machine
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(
        json.dumps(
            {
                "wall_s": round(wall_s, 3),
                "cpu_s": round(cpu_s, 3),
                "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
                **result,
            }
        )
    )  # ru_maxrss: KiB on Linux


def measure(run: str, root: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.pathological", "--launch", run, str(root)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pathological")
    parser.add_argument("--worker", nargs=2, metavar=("RUN", "ROOT"), help=argparse.SUPPRESS)
    parser.add_argument("--launch", nargs=2, metavar=("RUN", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker[0], Path(args.worker[1]))
        return 0
    if args.launch:
        launcher(args.launch[0], Path(args.launch[1]))
        return 0

    from tests.support.fakes.pathological import write_pathological_corpus

    with tempfile.TemporaryDirectory(prefix="samespace-pathological-") as folder:
        root = Path(folder)
        described = write_pathological_corpus(root)
        corpus_bytes = sum((root / path).stat().st_size for path in described)
        runs = {run: measure(run, root) for run in RUNS}
    ours, baseline = runs["ours"], runs["baseline"]
    results = {
        "corpus": {"files": len(described), "bytes": corpus_bytes},
        "runs": runs,
        "ours_over_baseline": {
            key: round(ours[key] / baseline[key], 3)
            for key in ("wall_s", "cpu_s", "peak_rss_mb", "chunks", "chunk_bytes")
            if baseline.get(key)
        },
        "ours_chunk_bytes_over_corpus": round(ours["chunk_bytes"] / corpus_bytes, 3),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "pathological.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
