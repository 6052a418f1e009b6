"""grep_code against ripgrep over the same files: speed, the same matching lines, and no catastrophe.

    python -m bench.grep [--root PATH] [--glob '*.py'] [--repeat 15] [--out bench/results/grep.json]

1. Corpus: `--root` (default: the installed `ray` package's source, ~2,400 non-empty .py files, ~730k
   lines; >= 300k needed), the files `rg --files --glob GLOB` lists, read by `load_corpus` as the
   server reads them (confined, decoded, credentials redacted); the load is timed twice.
2. Patterns an agent greps for (literals, regexes, -i, a literal with metacharacters, none, many),
   each timed `--repeat` times: ours = compile + `GrepCorpus.scan` for every line, and for a page of
   100 and of 1000 (the most one call returns); rg = an `rg` process over the same explicit file list
   (`-H -n --no-heading --column --null`, `-i`/`-F`, default threads, start and pipe included). The
   (path, line) sets must be EQUAL; a difference is printed with a likely cause (RE2's `\\b` is ASCII;
   the served text is redacted) and the process exits 1.
3. Ratio ours p50 / rg p50 per pattern, median and max (acceptance: within 3x).
4. Catastrophic patterns over one 100,000-character line (`(a+)+$`, `(x+x+)+y`): ours, rg, and
   Python's `re` in a subprocess killed after `--re-timeout` (5 s).
5. The design choice, recorded in the JSON: with the in-memory scan at or below rg's p50, a trigram
   index (Zoekt's design) is not needed at this size; none is built.

Results: a table, and bench/results/grep.json (gitignored): versions, corpus facts, rows, medians.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cluster.grep import MAX_GREP_LIMIT, GrepCorpus, GrepPattern
from cluster.search import load_corpus

RESULTS = Path(__file__).resolve().parent / "results" / "grep.json"
MIN_LINES = 300_000  # the acceptance's repository size
ACCEPT_RATIO = 3.0  # ours p50 within 3x of rg's
FULL = 10**9  # a limit no pattern reaches: every matching line
PAGE = 100  # grep_code's default page
CATASTROPHE_CHARS = 100_000
PYTHON_RE_TIMEOUT_S = 5.0
NO_LIMIT_BYTES = 1 << 40  # load_corpus's byte cap, off: the bench holds every file
SHOWN = 5  # differing lines printed per pattern


@dataclass(frozen=True)
class Case:
    """One grep: a label for the table, the pattern and how it is taken."""

    label: str
    pattern: str
    regex: bool = True
    case_sensitive: bool = True


CASES = (
    Case("error message", "is not supported"),
    Case("TODO", "TODO"),
    Case("config key", "RAY_ADDRESS"),
    Case("def *_actor(", r"def \w+_actor\("),
    Case("import ray", r"\bimport\s+ray\b"),
    Case("raise *Error(", r"raise \w+Error\("),
    Case("num_cpus kwarg", r"num_cpus\s*="),
    Case("class line", r"^class \w+\(.*\):$"),
    Case("-i deprecated", "deprecated", case_sensitive=False),
    Case("literal ray.get([", "ray.get([", regex=False),
    Case("no match", "frobnicate_the_quux"),
    Case("self. (many)", r"self\."),
)

CATASTROPHES = (
    Case("(a+)+$", r"(a+)+$"),
    Case("(x+x+)+y", r"(x+x+)+y"),
)


@dataclass(frozen=True)
class Corpus:
    root: Path
    corpus: GrepCorpus
    listed: int  # files rg --files listed
    notes: list[str]
    load_s: list[float]  # load_corpus, first and again

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.corpus.files]

    def facts(self) -> dict[str, Any]:
        lines = self.corpus.buffer.count(b"\n")  # every held file ends in a line feed
        return {
            "root": str(self.root),
            "listed_by_rg": self.listed,
            "files": len(self.corpus.files),
            "left_out": self.listed - len(self.corpus.files),
            "lines": lines,
            "bytes": self.corpus.size,
            "acceptance_size": lines >= MIN_LINES,
        }


@dataclass(frozen=True)
class Comparison:
    equal: bool
    ours: int
    rg: int
    only_ours: list[tuple[str, int]]
    only_rg: list[tuple[str, int]]


def timed(fn: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    """`repeat` wall-clock times of fn() in seconds, and its last answer."""
    samples: list[float] = []
    answer: Any = None
    for _ in range(repeat):
        started = time.perf_counter()
        answer = fn()
        samples.append(time.perf_counter() - started)
    return samples, answer


def percentile(samples: Sequence[float], q: float) -> float:
    """The nearest-rank q-quantile (q=0.5: the median's lower neighbour for an even count)."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def default_root() -> Path:
    spec = importlib.util.find_spec("ray")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("ray is not installed: pass --root")
    return Path(next(iter(spec.submodule_search_locations)))


def rg_binary() -> str:
    here = Path(sys.executable).parent / "rg"
    found = str(here) if here.exists() else shutil.which("rg")
    if found is None:
        raise SystemExit("rg not found: pip install ripgrep")
    return found


def rg_files(rg: str, root: Path, glob: str) -> list[str]:
    """What `rg --files` lists below root (its ignore rules), sorted."""
    command = [rg, "--no-config", "--files", *(["--glob", glob] if glob else [])]
    done = subprocess.run(command, cwd=root, capture_output=True, check=True)
    return sorted(line for line in done.stdout.decode("utf-8", "surrogateescape").splitlines() if line)


def collect(root: Path, rg: str, glob: str = "*.py") -> Corpus:
    listed = rg_files(rg, root, glob)
    loads: list[float] = []
    corpus: GrepCorpus | None = None
    notes: list[str] = []
    for _ in range(2):
        started = time.perf_counter()
        corpus, notes = load_corpus(root.name, root, listed, None, NO_LIMIT_BYTES)
        loads.append(time.perf_counter() - started)
    assert corpus is not None
    return Corpus(root, corpus, len(listed), notes, loads)


def compile_case(case: Case) -> GrepPattern:
    return GrepPattern.compile(case.pattern, regex=case.regex, case_sensitive=case.case_sensitive)


def ours_lines(corpus: GrepCorpus, case: Case, limit: int = FULL) -> set[tuple[str, int]]:
    page = corpus.scan(compile_case(case), limit=limit)
    return {(hit.path, hit.line) for hit in page.hits}


def rg_command(rg: str, case: Case, paths: Sequence[str]) -> list[str]:
    flags = ["-i"] if not case.case_sensitive else []
    flags += ["-F"] if not case.regex else []
    output = ["-H", "-n", "--no-heading", "--column", "--null"]  # path NUL line:column:text, one file or many
    return [rg, "--no-config", *output, *flags, "-e", case.pattern, "--", *paths]


def run_rg(command: Sequence[str], root: Path) -> bytes:
    done = subprocess.run(command, cwd=root, capture_output=True, check=False)
    if done.returncode not in (0, 1):  # 1: no line matched
        raise RuntimeError(f"rg failed ({done.returncode}): {done.stderr.decode('utf-8', 'replace').strip()}")
    return done.stdout


def parse_rg(output: bytes) -> set[tuple[str, int]]:
    """(path, line) of rg's `path NUL line:column:text` records."""
    found: set[tuple[str, int]] = set()
    for record in output.split(b"\n"):
        if not record:
            continue
        path, _, rest = record.partition(b"\0")
        number, _, _ = rest.partition(b":")
        found.add((path.decode("utf-8", "surrogateescape"), int(number)))
    return found


def compare(ours: set[tuple[str, int]], rg: set[tuple[str, int]]) -> Comparison:
    return Comparison(ours == rg, len(ours), len(rg), sorted(ours - rg), sorted(rg - ours))


def served_line(corpus: GrepCorpus, path: str, line: int) -> str | None:
    """Line `line` (1-based) of `path` as the corpus holds it."""
    for f in corpus.files:
        if f.path == path:
            lines = corpus.buffer[f.start : f.end].split(b"\n")
            return lines[line - 1].decode("utf-8", "replace") if 0 < line <= len(lines) else None
    return None


def diagnose(root: Path, corpus: GrepCorpus, path: str, line: int) -> str:
    """A likely cause of a line one engine matched and the other did not."""
    try:
        raw_lines = (root / path).read_bytes().split(b"\n")
        raw = raw_lines[line - 1].decode("utf-8", "replace") if 0 < line <= len(raw_lines) else None
    except OSError:
        raw = None
    served = served_line(corpus, path, line)
    if raw is not None and served is not None and raw != served:
        return "the served text differs from the file's (a credential redacted or bytes undecodable)"
    text = served or raw or ""
    if not text.isascii():
        return "non-ASCII text on the line (rg's \\w \\b \\s \\d are Unicode; RE2's \\b is ASCII)"
    return "unexplained"


def measure(source: Corpus, case: Case, repeat: int, rg: str) -> dict[str, Any]:
    """One pattern: ours full and paged, rg, their times, and whether they found the same lines."""
    corpus, paths = source.corpus, source.paths
    compile_case(case)  # a refused pattern fails here, before any timing
    ours_s, ours = timed(lambda: ours_lines(corpus, case), repeat)
    page_s, _ = timed(lambda: ours_lines(corpus, case, PAGE), repeat)
    most_s, _ = timed(lambda: ours_lines(corpus, case, MAX_GREP_LIMIT), repeat)
    command = rg_command(rg, case, paths)
    rg_s, output = timed(lambda: run_rg(command, source.root), repeat)
    return row(case, ours_s, page_s, rg_s, compare(ours, parse_rg(output)), source, most_s)


def row(
    case: Case,
    ours_s: Sequence[float],
    page_s: Sequence[float],
    rg_s: Sequence[float],
    same: Comparison,
    source: Corpus | None = None,
    most_s: Sequence[float] = (),
) -> dict[str, Any]:
    """The numbers of one pattern; ratios from the measured p50s (unrounded). `most_s`: pages of
    MAX_GREP_LIMIT lines, the most one grep_code call returns."""
    ours_p50, rg_p50, page_p50 = percentile(ours_s, 0.5), percentile(rg_s, 0.5), percentile(page_s, 0.5)
    differing = [("ours only", p, n) for p, n in same.only_ours[:SHOWN]] + [
        ("rg only", p, n) for p, n in same.only_rg[:SHOWN]
    ]
    return {
        **asdict(case),
        "matches": same.ours,
        "rg_matches": same.rg,
        "equal": same.equal,
        "ours_p50_ms": ms(ours_p50),
        "ours_p90_ms": ms(percentile(ours_s, 0.9)),
        "ours_page_p50_ms": ms(page_p50),
        "ours_max_page_p50_ms": ms(percentile(most_s, 0.5)) if most_s else None,
        "rg_p50_ms": ms(rg_p50),
        "rg_p90_ms": ms(percentile(rg_s, 0.9)),
        "ratio": round(ours_p50 / rg_p50, 3),
        "page_ratio": round(page_p50 / rg_p50, 3),
        "only_ours": len(same.only_ours),
        "only_rg": len(same.only_rg),
        "differing": [
            {
                "side": side,
                "path": path,
                "line": line,
                "cause": diagnose(source.root, source.corpus, path, line) if source else None,
                "text": (served_line(source.corpus, path, line) or "")[:200] if source else None,
            }
            for side, path, line in differing
        ],
        "ours_s": list(ours_s),
        "ours_page_s": list(page_s),
        "ours_max_page_s": list(most_s),
        "rg_s": list(rg_s),
    }


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    ratios = [r["ratio"] for r in rows]
    pages = [r["page_ratio"] for r in rows]
    return {
        "median_ratio": round(statistics.median(ratios), 3),
        "max_ratio": max(ratios),
        "max_ratio_pattern": max(rows, key=lambda r: r["ratio"])["pattern"],
        "median_page_ratio": round(statistics.median(pages), 3),
        "max_page_ratio": max(pages),
        "median_within_3x": statistics.median(ratios) <= ACCEPT_RATIO,
        "all_within_3x": max(ratios) <= ACCEPT_RATIO,
        "all_equal": all(r["equal"] for r in rows),
    }


def catastrophe_line(case: Case, chars: int = CATASTROPHE_CHARS) -> str:
    """One line of `chars` characters no backtracking engine gets through: `a`s then `!` for `(a+)+$`
    (`$` fails after every split of the run), `x`s for `(x+x+)+y` (no `y`)."""
    return "a" * (chars - 1) + "!" if "a" in case.pattern else "x" * chars


_PYTHON_RE = "import re, sys; text = open(sys.argv[1]).read(); print(bool(re.search(sys.argv[2], text, re.M)))"


def python_re(path: Path, pattern: str, timeout_s: float) -> dict[str, Any]:
    """Python's `re` over the file in a subprocess killed after `timeout_s`."""
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PYTHON_RE, str(path), pattern],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=True,
        )
    except subprocess.TimeoutExpired:
        return {"python_re_s": None, "python_re": f"timed out after {timeout_s:g} s"}
    return {"python_re_s": round(time.perf_counter() - started, 3), "python_re": f"matched: {done.stdout.strip()}"}


def catastrophic(
    case: Case, work: Path, rg: str, chars: int = CATASTROPHE_CHARS, re_timeout_s: float | None = PYTHON_RE_TIMEOUT_S
) -> dict[str, Any]:
    """Ours, rg and (re_timeout_s not None) Python's `re` over one long line built for `case`."""
    text = catastrophe_line(case, chars)
    path = work / "long_line.txt"
    path.write_text(text + "\n")
    corpus = GrepCorpus([(path.name, text)])
    started = time.perf_counter()
    ours = ours_lines(corpus, case)
    ours_s = time.perf_counter() - started
    rg_s, output = timed(lambda: run_rg(rg_command(rg, case, [path.name]), work), 1)
    out = {
        **asdict(case),
        "line_chars": len(text),
        "ours_s": round(ours_s, 4),
        "ours_matches": len(ours),
        "rg_s": round(rg_s[0], 4),
        "rg_matches": len(parse_rg(output)),
    }
    if re_timeout_s is not None:
        out.update(python_re(path, case.pattern, re_timeout_s))
    return out


def design(totals: dict[str, Any]) -> dict[str, Any]:
    """The answer to the issue's question, from the measured ratios."""
    median, worst, pattern = totals["median_ratio"], totals["max_ratio"], totals["max_ratio_pattern"]
    pages = totals["max_page_ratio"]
    if median <= 1.0:
        answer = (
            f"scan the held text: its p50 is {median}x a ripgrep process's over the same files (median over the"
            f" patterns; worst {worst}x, {pattern!r}, every matching line; a page of {PAGE} at most {pages}x);"
            " a scan that already beats rg needs no trigram index at this size, and no second structure to"
            " build, store and keep in step with each build"
        )
    else:
        answer = (
            f"the scan's p50 is {median}x rg's (median; worst {worst}x, {pattern!r}):"
            f" {'within' if median <= ACCEPT_RATIO else 'OUTSIDE'} the {ACCEPT_RATIO:g}x acceptance; a trigram"
            " index (Zoekt's design) would narrow the text scanned, at the cost of building and storing it"
        )
    return {
        "question": "scan the stored text, or keep a trigram index (Zoekt's design)?",
        "choice": "scan" if median <= 1.0 else "consider a trigram index",
        "answer": answer,
    }


def versions(rg: str) -> dict[str, str]:
    out = {"python": platform.python_version(), "cpus": str(os.cpu_count())}
    for name in ("google-re2", "ripgrep"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "absent"
    out["rg --version"] = subprocess.run([rg, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return out


def run(source: Corpus, cases: Iterable[Case], repeat: int, rg: str, re_timeout_s: float | None) -> dict[str, Any]:
    rows = []
    for case in cases:
        rows.append(measure(source, case, repeat, rg))
        r = rows[-1]
        print(f"  {case.pattern!r}: {r['matches']} lines, ratio {r['ratio']}, equal {r['equal']}", flush=True)
    with tempfile.TemporaryDirectory(prefix="grep-catastrophe-") as folder:
        worst = [catastrophic(case, Path(folder), rg, re_timeout_s=re_timeout_s) for case in CATASTROPHES]
    totals = summary(rows)
    return {
        "versions": versions(rg),
        "corpus": source.facts(),
        "load_corpus_s": [round(s, 3) for s in source.load_s],
        "notes": source.notes,
        "repeat": repeat,
        "rows": rows,
        "catastrophic": worst,
        "summary": totals,
        "design": design(totals),
    }


def table(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        (
            "| pattern | matches | ours p50 / p90 ms (full) | ours p50 ms (page of 100) | ours p50 ms (page of"
            f" {MAX_GREP_LIMIT}) | rg p50 / p90 ms | ratio | equal? |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        flags = ("" if r["regex"] else " -F") + ("" if r["case_sensitive"] else " -i")
        equal = "yes" if r["equal"] else f"NO (+{r['only_ours']} ours, +{r['only_rg']} rg)"
        lines.append(
            f"| `{r['pattern']}`{flags} | {r['matches']} | {r['ours_p50_ms']} / {r['ours_p90_ms']} |"
            f" {r['ours_page_p50_ms']} | {r['ours_max_page_p50_ms']} | {r['rg_p50_ms']} / {r['rg_p90_ms']} |"
            f" {r['ratio']} | {equal} |"
        )
    return "\n".join(lines)


def catastrophe_table(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| pattern | line | ours s | rg s | Python re |", "|---|---|---|---|---|"]
    for r in rows:
        python = r.get("python_re", "-")
        if r.get("python_re_s") is not None:
            python += f" in {r['python_re_s']} s"
        lines.append(f"| `{r['pattern']}` | {r['line_chars']} chars | {r['ours_s']} | {r['rg_s']} | {python} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--root", type=Path, default=None, help="the files to grep (default: the ray package)")
    parser.add_argument("--glob", default="*.py", help="rg --files --glob GLOB ('': every file rg lists)")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--re-timeout", type=float, default=PYTHON_RE_TIMEOUT_S, help="Python re's limit (s)")
    args = parser.parse_args(argv)
    rg = rg_binary()
    root = (args.root or default_root()).resolve()
    source = collect(root, rg, args.glob)
    facts = source.facts()
    print(f"corpus {json.dumps(facts)}; load_corpus {source.load_s[0]:.2f} s (again {source.load_s[1]:.2f} s)")
    if not facts["acceptance_size"]:
        print(f"NOT AN ACCEPTANCE RUN: {facts['lines']} lines < {MIN_LINES}")
    result = run(source, CASES, args.repeat, rg, args.re_timeout)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result["rows"]))
    print(catastrophe_table(result["catastrophic"]))
    print(json.dumps(result["summary"]))
    print(result["design"]["answer"])
    failed = [r for r in result["rows"] if not r["equal"]]
    for r in failed:
        print(f"MISMATCH {r['pattern']!r}: ours {r['matches']} lines, rg {r['rg_matches']}")
        for d in r["differing"]:
            print(f"  {d['side']}: {d['path']}:{d['line']}: {d['cause']}: {d['text']!r}")
    print(f"written {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
