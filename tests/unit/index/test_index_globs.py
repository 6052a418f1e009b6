"""Index-name globs (cluster/index/globs.py): fnmatch's meaning at a cost linear in name x pattern, and
the caps a pattern meets before any matching."""

from __future__ import annotations

import fnmatch
import pickle
import random
import time

import pytest

from cluster.errors import LimitExceeded
from cluster.index import compile_glob, path_selector
from cluster.settings import LimitsSettings

WIDE = LimitsSettings(max_glob_chars=10_000, max_glob_wildcards=1_000)
PATTERN_CHARS = "ab.-_*?[]!^\\z"  # wildcards, class syntax, ranges, escapes fnmatch does not honour
NAME_CHARS = "ab.-_]!^\\z[*?"


def generated_cases(count: int, seed: int) -> list[tuple[str, str]]:
    """Random patterns, each with a random name or (every other one) a name made from the pattern, so
    that many cases match: a star becomes a few characters, a '?' one, anything else itself."""
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        pattern = "".join(rng.choice(PATTERN_CHARS) for _ in range(rng.randint(0, 10)))
        if i % 2:
            name = "".join(rng.choice(NAME_CHARS) for _ in range(rng.randint(0, 8)))
        else:
            made = {"*": lambda: "".join(rng.choice(NAME_CHARS) for _ in range(rng.randint(0, 3)))}
            made["?"] = lambda: rng.choice(NAME_CHARS)
            name = "".join(made[c]() if c in made else c for c in pattern)
        cases.append((pattern, name))
    return cases


FIXED = [
    ("api*", "api.feature-x"),
    ("api*", "web"),
    ("*", ""),
    ("?", ""),
    ("a?c", "abc"),
    ("[a-c]x", "bx"),
    ("[!a-c]x", "bx"),
    ("[!a-c]x", "dx"),
    ("[]]", "]"),
    ("[!]]", "a"),
    ("[!]", "[!]"),  # no closing bracket after the '!]': all literal
    ("[z-a]", "m"),  # an empty range never matches
    ("[a-]", "-"),
    ("[", "["),
    ("a[", "a["),
    ("*[b-d]*", "xxcxx"),
    ("**a**", "banana"),
    ("a*b*c", "aXbYc"),
    ("a*b*c", "aXbYcZ"),
    ("\\*", "\\x"),  # a backslash is a plain character in fnmatch
]


@pytest.mark.parametrize(("pattern", "name"), FIXED)
def test_fixed_cases_agree_with_fnmatchcase(pattern: str, name: str) -> None:
    assert compile_glob(pattern, WIDE).matches(name) is fnmatch.fnmatchcase(name, pattern)


def test_hundreds_of_generated_cases_agree_with_fnmatchcase() -> None:
    cases = generated_cases(600, seed=27)
    disagreements = [
        (pattern, name)
        for pattern, name in cases
        if compile_glob(pattern, WIDE).matches(name) is not fnmatch.fnmatchcase(name, pattern)
    ]
    assert disagreements == []
    assert sum(fnmatch.fnmatchcase(name, pattern) for pattern, name in cases) > 30  # matches are among them


def test_a_long_pattern_or_too_many_wildcards_is_refused_naming_the_setting() -> None:
    limits = LimitsSettings()
    with pytest.raises(LimitExceeded, match=r"limits\.max_glob_chars \(SAMESPACE_LIMITS__MAX_GLOB_CHARS\)"):
        compile_glob("a" * (limits.max_glob_chars + 1), limits)
    with pytest.raises(LimitExceeded, match=r"limits\.max_glob_wildcards \(SAMESPACE_LIMITS__MAX_GLOB_WILDCARDS\)"):
        compile_glob("*a" * (limits.max_glob_wildcards + 1), limits)
    assert compile_glob("*a" * limits.max_glob_wildcards, limits).matches("a" * limits.max_glob_wildcards)
    refused = LimitExceeded("index-name pattern length", 201, 200, "limits.max_glob_chars")
    assert str(pickle.loads(pickle.dumps(refused))) == str(refused)  # it crosses actors


def test_the_worst_pattern_the_widest_caps_allow_matches_a_name_in_bounded_time() -> None:
    worst = compile_glob("*a" * 999 + "b", WIDE)  # fnmatch's regex would try the stars' splits
    began = time.perf_counter()
    assert not any(worst.matches("a" * 63) for _ in range(20))
    assert time.perf_counter() - began < 2.0  # about 10 ms on one core: 64 x 2000 steps a name


PATHS = ["src/app.py", "src/legacy/old.py", "vendor/lib/x.js", "web/vendor/y.js", "docs/a.md", "README.md", "x.py"]


@pytest.mark.parametrize(
    ("exclude", "left_out"),
    [
        (["vendor"], {"vendor/lib/x.js", "web/vendor/y.js"}),  # a name without '/': a folder anywhere
        (["src/legacy"], {"src/legacy/old.py"}),  # a folder by its path: everything under it
        (["docs/*"], {"docs/a.md"}),
        (["*.md"], {"docs/a.md", "README.md"}),  # a file name anywhere
        (["src/*.py"], {"src/app.py", "src/legacy/old.py"}),  # '*' crosses folders
        (["src/**/old.py", "x.py"], {"src/legacy/old.py", "x.py"}),
        (["./vendor/"], {"vendor/lib/x.js"}),  # a leading './' and a trailing '/' are the same folder
    ],
)
def test_path_selector_leaves_out_files_and_whole_folders(exclude: list[str], left_out: set[str]) -> None:
    keep = path_selector(None, exclude, LimitsSettings())
    assert keep is not None
    assert {path for path in PATHS if not keep(path)} == left_out
    assert path_selector(None, [], LimitsSettings()) is None  # nothing to leave out: no selector


def test_path_selector_takes_a_folder_for_path_glob_too_and_meets_the_caps() -> None:
    keep = path_selector("src", ["*/legacy"], LimitsSettings())
    assert keep is not None and [path for path in PATHS if keep(path)] == ["src/app.py"]
    with pytest.raises(LimitExceeded, match="path pattern"):
        path_selector(None, ["*" * 40], LimitsSettings())
