"""The README and docs/ stay true: every relative link reaches a file (and a heading, when it names
one), every `make` target exists, every `samespace ...` command line parses with the real CLI, every
`python -m` module exists, and the README stays a landing page (under 150 lines). Each check is also
run over text that breaks it, so a check that could never fail is caught too.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 150
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"```[a-z]*\n(.*?)```", re.DOTALL)
SPAN = re.compile(r"`([^`\n]+)`")
MAKE_TARGET = re.compile(r"^([a-z][a-z-]*):", re.MULTILINE)
PYTHON_M = re.compile(r"python -m ([a-z_][a-z0-9_.]*)")


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    text = FENCE.sub("", markdown)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.MULTILINE)}


def broken_links(document: Path) -> list[str]:
    """Each relative link of `document` whose file, or heading, does not exist."""
    broken = []
    for target in LINK.findall(FENCE.sub("", document.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z]+:", target):  # http(s), mailto: not checked offline
            continue
        path, _, anchor = target.partition("#")
        resolved = (document.parent / path).resolve() if path else document
        if not resolved.exists():
            broken.append(f"{document.name}: {target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text(encoding="utf-8")):
            broken.append(f"{document.name}: {target} (no such heading)")
    return broken


def command_lines(markdown: str) -> list[str]:
    """Shell lines in code blocks and inline code, comments and `VAR=...` prefixes removed."""
    lines = [line for block in FENCE.findall(markdown) for line in block.splitlines()]
    lines += SPAN.findall(FENCE.sub("", markdown))
    commands = []
    for line in lines:
        line = re.sub(r"\s+#\s.*$", "", line).strip()
        line = re.sub(r"^(?:[A-Z_]+=\S+\s+)+", "", line)
        if line:
            commands.append(line)
    return commands


def unknown_make_targets(markdown: str, makefile: str) -> list[str]:
    targets = set(MAKE_TARGET.findall(makefile))
    found = []
    for line in command_lines(markdown):
        match = re.match(r"^make ([a-z][a-z-]*)", line)
        if match and match.group(1) not in targets:
            found.append(line)
    return found


def unparsable_samespace_commands(markdown: str) -> list[str]:
    """`samespace ...` lines the real parser refuses (`samespace sidecar ...`: the sidecar's parser).
    A bare `samespace NAME` in running text is a mention: NAME must be a subcommand."""
    from samespace.cli import build_parser
    from sidecar.cli import build_parser as sidecar_parser

    found = []
    for line in command_lines(markdown):
        for command in re.split(r"\s*(?:&&|;|\|)\s*", re.split(r" [<>] ", line)[0]):
            if not command.startswith("samespace ") or any(marker in command for marker in ("<", "...", "…")):
                continue
            words = shlex.split(command)[1:]
            parser, words = (sidecar_parser(), words[1:]) if words[0] == "sidecar" else (build_parser(), words)
            try:
                if len(words) == 1 and parser.prog == "samespace":
                    parser.parse_args([words[0], "--help"])  # a mention: the subcommand exists (--help exits 0)
                parser.parse_args(words)
            except SystemExit as exit_:
                if exit_.code != 0:
                    found.append(command)
    return found


def module_exists(module: str) -> bool:
    """A `python -m` target: a module file, or a package with a `__main__`, of an importable package."""
    path = ROOT / module.replace(".", "/")
    top_importable = importlib.util.find_spec(module.split(".")[0]) is not None
    return top_importable and (path.with_suffix(".py").exists() or (path / "__main__.py").exists())


def missing_modules(markdown: str) -> list[str]:
    return [module for module in sorted(set(PYTHON_M.findall(markdown))) if not module_exists(module)]


@pytest.mark.parametrize("document", documents(), ids=lambda p: p.name)
def test_every_link_reaches_a_file_and_heading(document: Path) -> None:
    assert broken_links(document) == []


@pytest.mark.parametrize("document", documents(), ids=lambda p: p.name)
def test_every_command_names_what_exists(document: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = document.read_text(encoding="utf-8")
    assert unknown_make_targets(text, (ROOT / "Makefile").read_text(encoding="utf-8")) == []
    assert unparsable_samespace_commands(text) == [], capsys.readouterr().err
    assert missing_modules(text) == []


def test_the_readme_is_a_landing_page() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < README_MAX_LINES
    linked = {target.partition("#")[0] for target in LINK.findall(text)}
    assert {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")} <= linked  # every doc is reachable


def test_each_check_fails_on_text_that_breaks_it(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A title\n\n## Two words\n", encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text(
        "[ok](docs/a.md#two-words) [gone](docs/b.md) [bad anchor](docs/a.md#three) [web](https://x.org/y)\n",
        encoding="utf-8",
    )
    assert broken_links(readme) == [
        "README.md: docs/b.md (no such file)",
        "README.md: docs/a.md#three (no such heading)",
    ]
    text = (
        "```bash\nmake run      # ok\nX=1 make nope\nsamespace search q -k 5\nsamespace serch q\n```\n"
        "`samespace status --bogus`"
    )
    assert unknown_make_targets(text, "run: x\nstop:\n") == ["make nope"]
    assert unparsable_samespace_commands(text) == ["samespace serch q", "samespace status --bogus"]
    assert missing_modules("python -m jobs.reindex and python -m jobs.nowhere and python -m nosuchpkg.x") == [
        "jobs.nowhere",
        "nosuchpkg.x",
    ]
