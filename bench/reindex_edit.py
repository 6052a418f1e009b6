"""The one-file edit of `bench.run`'s incremental step, chosen from the repository being measured.

The file is an indexed one (it has chunks), of a language with a known safe append: Python first
(the append is a new function, so the edited build embeds a new chunk as a real edit would), then
the other languages in the order below, each by its line-comment syntax; the first path in sorted
order within the best-ranked language. A repository with none of them cannot be measured this way
(ValueError).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cluster.types import Chunk

MARKER = "samespace bench: one edited file"
PYTHON_APPEND = "\n\ndef samespace_bench_marker(value):\n    return value * 2\n"

# line comments by language: `{}` is the marker
_COMMENTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("go", "rust", "java", "kotlin", "scala", "swift", "csharp", "c", "cpp", "javascript", "typescript", "tsx"),
        "// {}",
    ),
    (("ruby", "bash", "yaml", "toml", "make", "dockerfile"), "# {}"),
    (("lua", "sql"), "-- {}"),
    (("css",), "/* {} */"),
    (("html", "xml"), "<!-- {} -->"),
    (("markdown", "rst", "text"), "{}"),
)


def _appends() -> dict[str, str]:
    """language → the text appended: valid in that language, and a change of the file's content."""
    appends = {"python": PYTHON_APPEND}
    for languages, comment in _COMMENTS:
        appends.update({language: "\n" + comment.format(MARKER) + "\n" for language in languages})
    return appends


APPENDS = _appends()
RANK = {language: rank for rank, language in enumerate(APPENDS)}


@dataclass(frozen=True)
class Edit:
    """The file to edit (repository-relative POSIX path), its language and the text appended."""

    path: str
    language: str
    append: str


def pick_edit(chunks: Sequence[Chunk]) -> Edit:
    """The file `edit_one_file` edits, chosen deterministically from the collected chunks."""
    languages: dict[str, str] = {}
    for chunk in chunks:
        if chunk.language in RANK:
            languages.setdefault(chunk.path, chunk.language)
    if not languages:
        raise ValueError("no indexed file of a language with a safe append: nothing to edit")
    path = min(languages, key=lambda p: (RANK[languages[p]], p))
    return Edit(path, languages[path], APPENDS[languages[path]])


def edit_one_file(repo: Path, chunks: Sequence[Chunk]) -> Edit:
    """Append `pick_edit`'s text to its file under `repo` (after a newline the file may lack)."""
    edit = pick_edit(chunks)
    target = repo / edit.path
    text = target.read_text(encoding="utf-8")
    target.write_text(text + ("" if not text or text.endswith("\n") else "\n") + edit.append, encoding="utf-8")
    return edit
