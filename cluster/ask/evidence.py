"""Evidence for an answer: blocks of located source, de-duplicated, merged and budgeted (DESIGN §9).

Tools return their results already split into blocks (one per hit, chunk or file); a block knows
where it came from, so a citation `path:start-end` can be checked against what was gathered.
Budgets are counted in characters against the model's context window (tokens ≈ chars / 3.2, peer).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from cluster.types import Strict

TOKEN_CHAR_RATIO = 3.2  # peer: chars per token, a deliberate over-estimate of tokens for code
SAFETY_MARGIN_TOKENS = 256  # peer
MIN_OUTPUT_TOKENS = 768  # peer: the least a reply may be given
TRUNCATE_MIN_ROOM = 200  # peer: a block is cut with '…' only when this much room is left

# `path:start-end` (or `path:line`); a path has a dot-extension or a slash.
CITATION_RE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.[A-Za-z0-9]+|(?:[\w.-]+/)+[\w.-]+):(\d+)(?:-(\d+))?")

Via = Literal["seed", "rlm"]


class EvidenceBlock(Strict):
    """One located piece of evidence (a chunk, a file's lines, an overview)."""

    tool: str = Field(description="Which tool produced it ('seed' = the plain retrieval of the question).")
    via: Via = "rlm"
    repo: str | None = None
    path: str | None = None
    start_line: int | None = None
    end_line: int | None = None
    symbol: str | None = None
    kind: str = "chunk"
    text: str

    @property
    def located(self) -> bool:
        return self.span is not None

    @property
    def span(self) -> tuple[str, int, int] | None:
        """`(path, start_line, end_line)` of a located block, else None."""
        if self.path is None or self.start_line is None or self.end_line is None:
            return None
        return self.path, self.start_line, self.end_line

    @property
    def citation(self) -> str | None:
        return f"{self.path}:{self.start_line}-{self.end_line}" if self.located else None

    def key(self) -> tuple[Any, ...]:
        """Same place, same block: a chunk found by two tools is one block."""
        if self.located:
            return (self.repo, self.path, self.start_line, self.end_line)
        return ("text", self.tool, " ".join(self.text.split()).lower())

    def header(self) -> str:
        where = self.citation or self.tool
        what = f" {self.symbol}" if self.symbol else ""
        repo = f" [repo {self.repo}]" if self.repo else ""
        return f"### {where}{what} ({self.kind}){repo}"

    def render(self) -> str:
        return f"{self.header()}\n{self.text.rstrip()}"


def estimate_tokens(chars: int) -> int:
    return math.ceil(chars / TOKEN_CHAR_RATIO)


def evidence_budget_chars(context_tokens: int, overhead_chars: int, output_tokens: int, cap_chars: int) -> int:
    """Characters of evidence that fit beside the prompt (`overhead_chars`) and a reply of
    `output_tokens` (never below MIN_OUTPUT_TOKENS) in a `context_tokens` window; at most `cap_chars`."""
    room = (
        context_tokens - SAFETY_MARGIN_TOKENS - max(MIN_OUTPUT_TOKENS, output_tokens) - estimate_tokens(overhead_chars)
    )
    return max(0, min(cap_chars, int(room * TOKEN_CHAR_RATIO)))


@dataclass
class EvidenceSet:
    """Blocks in arrival order under a character budget; seen places are never added twice."""

    budget_chars: int
    blocks: list[EvidenceBlock] = field(default_factory=list)
    dropped_for_budget: int = 0
    duplicates: int = 0
    _seen: set[tuple[Any, ...]] = field(default_factory=set)

    @property
    def chars(self) -> int:
        return sum(len(b.render()) + 2 for b in self.blocks)

    def add(self, blocks: Iterable[EvidenceBlock]) -> list[EvidenceBlock]:
        """Admit new blocks while they fit; returns the admitted ones (possibly one truncated)."""
        admitted = []
        for block in blocks:
            if block.key() in self._seen or self._covered(block):
                self.duplicates += 1
                continue
            room = self.budget_chars - self.chars
            size = len(block.render()) + 2
            if size > room:
                if room - len(block.header()) < TRUNCATE_MIN_ROOM:
                    self.dropped_for_budget += 1
                    continue
                keep = room - len(block.header()) - 4
                block = block.model_copy(update={"text": block.text[:keep] + "…"})
            self._seen.add(block.key())
            self.blocks.append(block)
            admitted.append(block)
        return admitted

    def _covered(self, block: EvidenceBlock) -> bool:
        """A range inside a block already held (a neighbour or a re-read of a hit) adds nothing."""
        span = block.span
        return span is not None and any(b.repo == block.repo and _contains(b.span, span) for b in self.blocks)

    def render(self, blocks: Sequence[EvidenceBlock] | None = None) -> str:
        return "\n\n".join(b.render() for b in (self.blocks if blocks is None else blocks))

    def repo_of(self, path: str) -> str | None:
        """The repository of a path seen in the evidence (the model often omits it)."""
        return next((b.repo for b in self.blocks if b.path == path and b.repo), None)

    def within(self, budget_chars: int) -> EvidenceSet:
        """A copy holding the first blocks that fit `budget_chars` (a smaller window downstream)."""
        smaller = EvidenceSet(budget_chars)
        smaller.add(self.blocks)
        return smaller

    def find(self, path: str, start: int, end: int) -> EvidenceBlock | None:
        """The block a citation points into: same path, cited lines inside (or overlapping) its range."""
        best = None
        for block in self.blocks:
            span = block.span
            if span is None or not _same_path(span[0], path):
                continue
            _, first, last = span
            if first <= start and end <= last:
                return block
            if best is None and start <= last and first <= end:
                best = block
        return best


def _contains(outer: tuple[str, int, int] | None, inner: tuple[str, int, int]) -> bool:
    """Whether the `(path, start, end)` span `outer` holds all of `inner`."""
    return outer is not None and outer[0] == inner[0] and outer[1] <= inner[1] and inner[2] <= outer[2]


def _same_path(held: str, cited: str) -> bool:
    return held == cited or held.endswith("/" + cited)


@dataclass(frozen=True)
class CitedSpan:
    path: str
    start_line: int
    end_line: int


def citations_in(text: str) -> list[CitedSpan]:
    """Every `path:start-end` / `path:line` written in `text`, in order, without repeats."""
    seen: set[CitedSpan] = set()
    spans = []
    for match in CITATION_RE.finditer(text or ""):
        path, start, end = match.group(1), int(match.group(2)), int(match.group(3) or match.group(2))
        span = CitedSpan(path.rstrip("."), min(start, end), max(start, end))
        if span not in seen:
            seen.add(span)
            spans.append(span)
    return spans
