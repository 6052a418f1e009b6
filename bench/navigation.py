"""Navigation accuracy, speed and cost of the code graph (issue 29's acceptance), measured on real packages.

    python -m bench.navigation [--sets dev,test] [--sample 200] [--impact-sample 30] [--seed 0]
                               [--threshold 0.5] [--no-embed] [--out bench/results/navigation.json]

Two package sets, reported apart: dev (httpx, click, jinja2, markdown_it), the set the graph may be
tuned on, and test (requests, rich, packaging), HELD OUT (bench/quality_corpus.py commits both).

1. Each package is copied to a temp folder, walked and chunked as a reindex does
   (`collect_repository`); its rows make a `CodeGraph`. `--sample` of its functions and methods
   (seeded) are asked about.
2. Truth: jedi 0.20 (`get_references(scope="project")`, bench/navigation_truth.py says exactly
   what is kept). A site is (path, line).
3. Ours: `callers(qualified, path, depth=1)` and `find_references` items with confidence >= the
   threshold (the curve at 1.0, 0.5, 0.25 and 0 is always reported); find_references' items on import
   lines are dropped, as jedi's are. `impact(depth=3)` against jedi's call chains 3 deep, for
   `--impact-sample` functions per package.
4. Same-run competitor: grep, a line with `name(` (or, for find_references, the word `name`) in any
   .py file of the package that is not a `def name` line (for a constructor: the class's name too).
5. Precision, recall and F1 micro-averaged over every (definition, site) pair of a set.
6. Speed: ms per `callers` call on one graph of several packages (>= 5,000 functions), cold and warm.
7. Cost: `file_facts` seconds against the rest of collect and against embedding the same chunks
   with the packaged model (`--no-embed` skips it), and the stored payload's bytes with and without
   the graph's fields.
Results: a table per set, then speed and cost, and all of it in `--out` (JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cluster.environment import set_local_env_defaults

set_local_env_defaults()

from bench.navigation_cost import callers_latency, embed_seconds, facts_seconds, store_bytes  # noqa: E402
from bench.navigation_eval import CURVE, PackageResult, build_graph, copy_packages, evaluate_package, summary  # noqa: E402
from bench.quality_corpus import DEFAULT_SEED, PACKAGE_SETS, package_version  # noqa: E402

SPEED_PACKAGES = ("httpx", "click", "jinja2", "markdown_it", "requests", "rich", "packaging", "pip", "setuptools")
HELD_OUT = "test"
ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"  # as bench.run's


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def code_version() -> dict[str, Any]:
    """The commit and uncommitted paths measured (bench.quality_report's, without its imports of bench.run)."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {"commit": git("rev-parse", "--short", "HEAD"), "uncommitted": git("status", "--short").splitlines()}


def _gap(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.3f}"


def set_table(name: str, report: dict[str, Any], threshold: float, thresholds: list[float]) -> str:
    s = report["scores"]
    lines = ["| tool | min confidence | precision | recall | F1 | TP | FP | FN |", "|---|---|---|---|---|---|---|---|"]

    def row(label: str, level: str, m: dict[str, Any]) -> None:
        lines.append(
            f"| {label} | {level} | {_fmt(m['precision'])} | {_fmt(m['recall'])} | {_fmt(m['f1'])} | "
            f"{m['tp']} | {m['fp']} | {m['fn']} |"
        )

    mark = {t: f"{t:g}" + (" (threshold)" if t == threshold else "") for t in thresholds}
    for t in thresholds:
        row("callers (ours)", mark[t], s["callers"][str(t)])
    row("callers (grep `name(`)", "-", s["grep_callers"])
    for t in thresholds:
        row("find_references (ours)", mark[t], s["references"][str(t)])
    row("find_references (grep word)", "-", s["grep_references"])
    for t in thresholds:
        row("impact depth 3 (ours)", mark[t], s["impact_depth3"][str(t)])
    return "\n".join(lines)


def set_report(name: str, results: list[PackageResult], thresholds: list[float], threshold: float) -> dict[str, Any]:
    scores = summary(results, thresholds)
    ours = scores["callers"][str(threshold)]["f1"]
    grep = scores["grep_callers"]["f1"]
    ours_refs = scores["references"][str(threshold)]["f1"]
    grep_refs = scores["grep_references"]["f1"]
    return {
        "held_out": name == HELD_OUT,
        "packages": {r.package: r.version for r in results},
        "functions": sum(r.functions for r in results),
        "sampled": sum(r.sampled for r in results),
        "measured": sum(r.measured for r in results),
        "impact_measured": sum(r.impact_measured for r in results),
        "jedi_failed": sum(len(r.jedi_failed) for r in results),
        "unanswered_by_ours": sum(len(r.unanswered) for r in results),
        "truth_call_sites": sum(r.truth_calls for r in results),
        "truth_reference_sites": sum(r.truth_references for r in results),
        "scores": scores,
        "callers_f1_gap_ours_minus_grep": None if ours is None or grep is None else round(ours - grep, 4),
        "references_f1_gap_ours_minus_grep": None
        if ours_refs is None or grep_refs is None
        else round(ours_refs - grep_refs, 4),
        "per_package": [
            {
                **asdict(r),
                "callers": None,
                "references": None,
                "impact": None,
                "grep_callers": None,
                "grep_references": None,
                "jedi_failed": r.jedi_failed[:20],
                "unanswered": r.unanswered[:20],
                "scores": summary([r], thresholds),
            }
            for r in results
        ],
    }


def measure_cost(name: str, packages: tuple[str, ...], work: Path, encoder: Any) -> dict[str, Any]:
    """The graph's share of one set's reindex (collect with and without the facts, embedding) and its bytes."""
    root = copy_packages(packages, work / f"cost-{name}")
    _, found, collect_s = build_graph(root, name)
    facts_s = facts_seconds(root, found)
    out: dict[str, Any] = {
        "files": found.files,
        "chunks": len(found.chunks),
        "collect_with_graph_s": round(collect_s, 3),
        "facts_s": round(facts_s, 3),
        "collect_without_graph_s": round(collect_s - facts_s, 3),
        "facts_over_collect_without": round(facts_s / (collect_s - facts_s), 3) if collect_s > facts_s else None,
        "store": store_bytes(found),
    }
    if encoder is not None:
        embed = embed_seconds(found, encoder.encode)
        out["embed"] = embed
        out["graph_share_of_reindex_upper_bound"] = round(facts_s / (collect_s - facts_s + embed["seconds"]), 4)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.navigation")
    parser.add_argument("--sets", default=",".join(PACKAGE_SETS), help="comma-separated: dev,test")
    parser.add_argument("--sample", type=int, default=200, help="functions sampled per package")
    parser.add_argument("--impact-sample", type=int, default=30, help="of those, how many impact is measured on")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--threshold", type=float, default=0.5, help="least confidence an item of ours needs to count")
    parser.add_argument("--speed-packages", default=",".join(SPEED_PACKAGES), help="one graph timed for callers")
    parser.add_argument("--speed-sample", type=int, default=500, help="callers calls timed per pass")
    parser.add_argument("--no-embed", action="store_true", help="skip embedding the chunks (the cost's denominator)")
    parser.add_argument("--embed-sets", default="dev,test", help="sets whose chunks are embedded")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="packages judged at once")
    parser.add_argument("--jedi-timeout", type=float, default=120.0, help="seconds jedi may take on one function")
    parser.add_argument("--out", type=Path, default=RESULTS / "navigation.json")
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: a new temporary one)")
    args = parser.parse_args(argv)
    sets = [s for s in PACKAGE_SETS if s in args.sets.split(",")]
    if not sets:
        parser.error(f"--sets: pick from {list(PACKAGE_SETS)}")
    thresholds = sorted({*CURVE, args.threshold}, reverse=True)
    work = (args.work or Path(tempfile.mkdtemp(prefix="samespace-bench-nav-"))).resolve()
    print(f"sets: {', '.join(sets)} ({HELD_OUT!r} is held out: reported, never tuned on); work {work}", flush=True)

    # 1. accuracy: one process per package, `--jobs` at once; nothing timed runs meanwhile
    t0 = time.perf_counter()
    jobs = [(s, p) for s in sets for p in PACKAGE_SETS[s]]
    results: dict[str, list[PackageResult]] = {s: [] for s in sets}
    options = {"n": args.sample, "impact_n": args.impact_sample, "seed": args.seed, "thresholds": thresholds}
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {
            (s, p): pool.submit(evaluate_package, p, work / "accuracy", jedi_timeout_s=args.jedi_timeout, **options)
            for s, p in jobs
        }
        for (s, p), future in futures.items():
            r = future.result()
            results[s].append(r)
            print(
                f"{s}/{p} {r.version}: {r.functions} functions, {r.measured}/{r.sampled} judged "
                f"({len(r.jedi_failed)} jedi failures, {len(r.unanswered)} unanswered by ours), {r.seconds}",
                flush=True,
            )
    accuracy_s = time.perf_counter() - t0

    # 2. speed: one graph over several packages
    speed_packages = tuple(p for p in args.speed_packages.split(",") if p)
    speed_root = copy_packages(speed_packages, work / "speed")
    graph, found, collect_s = build_graph(speed_root, "speed")
    speed = {
        "packages": {p: package_version(p) for p in speed_packages},
        "files": found.files,
        "definitions": len(graph.index.defs),
        "references": len(graph.index.refs),
        "collect_s": round(collect_s, 2),
        **callers_latency(graph, args.speed_sample, args.seed),
    }
    print(f"speed: {speed}", flush=True)
    del graph, found

    # 3. cost, per set
    encoder = None
    if not args.no_embed:
        from cluster.local.encoder import LocalEncoder
        from cluster.settings import EmbeddingSettings

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        encoder = LocalEncoder(EmbeddingSettings())
    embed_sets = set(args.embed_sets.split(","))
    cost = {}
    for s in sets:
        cost[s] = measure_cost(s, PACKAGE_SETS[s], work, encoder if s in embed_sets else None)
        print(f"cost {s}: {cost[s]}", flush=True)

    reports = {s: set_report(s, results[s], thresholds, args.threshold) for s in sets}
    out = {
        "what": "issue 29 acceptance: code graph navigation vs jedi truth, grep competitor in the same run",
        "held_out_set": HELD_OUT,
        "packages": {s: list(PACKAGE_SETS[s]) for s in sets},
        "settings": {
            "sample": args.sample,
            "impact_sample": args.impact_sample,
            "seed": args.seed,
            "threshold": args.threshold,
            "thresholds": thresholds,
            "truth": "jedi get_references(scope='project'); non-definition refs in the root; a call: '(' follows",
            "import_lines": "dropped from both jedi's and our find_references (jedi counts `import f` as a definition)",
            "jedi_timeout_s": args.jedi_timeout,
        },
        "versions": {"python": platform.python_version(), "jedi": package_version("jedi")},
        "machine": {"cpus": os.cpu_count(), "load_avg": [round(x, 2) for x in os.getloadavg()]},
        "code": code_version(),
        "accuracy_s": round(accuracy_s, 1),
        "sets": reports,
        "speed": speed,
        "cost": cost,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(render(out, args.threshold, thresholds))
    print(f"\nwritten: {args.out}")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def render(out: dict[str, Any], threshold: float, thresholds: list[float]) -> str:
    lines = []
    for name, report in out["sets"].items():
        label = "HELD OUT (report only: no tuning decision looks at it)" if report["held_out"] else "tuning set"
        packages = ", ".join(f"{p} {v}" for p, v in report["packages"].items())
        lines += [
            "",
            f"## {name}: {label} — {packages}",
            (
                f"{report['functions']} functions; {report['measured']} of {report['sampled']} sampled judged "
                f"({report['jedi_failed']} jedi failures skipped; {report['unanswered_by_ours']} our lookup left "
                f"unanswered); impact on {report['impact_measured']}; jedi truth: {report['truth_call_sites']} call "
                f"sites, {report['truth_reference_sites']} reference sites"
            ),
            "",
            set_table(name, report, threshold, thresholds),
            "",
            (
                f"F1 gap ours - grep at confidence >= {threshold:g}: "
                f"callers {_gap(report['callers_f1_gap_ours_minus_grep'])}, "
                f"find_references {_gap(report['references_f1_gap_ours_minus_grep'])}"
            ),
        ]
    speed = out["speed"]
    lines += [
        "",
        (
            f"## speed: callers(depth=1) on one graph of {', '.join(speed['packages'])} — {speed['functions']} "
            f"functions, {speed['definitions']} definitions, {speed['references']} references"
        ),
        "",
        "| pass | p50 ms | p90 ms | mean ms | max ms | calls |",
        "|---|---|---|---|---|---|",
    ]
    for name in ("cold", "warm"):
        m = speed[name]
        lines.append(f"| {name} | {m['p50_ms']} | {m['p90_ms']} | {m['mean_ms']} | {m['max_ms']} | {m['n']} |")
    lines += [
        "",
        "## cost of the graph",
        "",
        (
            "| set | files | chunks | collect s | facts s | facts / collect without | embed s "
            "| graph share of reindex ≤ | payload bytes with | without | graph bytes share |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, c in out["cost"].items():
        embed = c.get("embed", {}).get("seconds", "n/a")
        share = c.get("graph_share_of_reindex_upper_bound", "n/a")
        st = c["store"]
        lines.append(
            f"| {name} | {c['files']} | {c['chunks']} | {c['collect_with_graph_s']} | {c['facts_s']} | "
            f"{c['facts_over_collect_without']} | {embed} | {share} | {st['with_graph_bytes']} | "
            f"{st['without_graph_bytes']} | {st['graph_share_of_payload']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
