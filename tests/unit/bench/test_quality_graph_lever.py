"""The graph lever of bench.quality_levers: a chunk's `calls: …; called by: …` line from a tiny
hand-made graph, added to the header of its embedded text; the ranking boosts."""

from __future__ import annotations

import numpy as np

from bench.quality_graph_lever import (
    ChunkCalls,
    chunk_calls,
    graph_line,
    graph_text,
    package_graph,
    popularity,
    propagate,
)
from cluster.ingest.chunking import chunk_file
from cluster.settings import ChunkingSettings
from cluster.space import embedding_text
from cluster.types import Chunk

FILES = {
    "shop/tax.py": "def rate():\n    return 0.2\n\n\ndef fee():\n    return 1\n",
    "shop/pricing.py": (
        "from shop.tax import rate, fee\n\n\n"
        "def total(items):\n    return sum(items) * (1 + rate()) + fee()\n\n\n"
        "def receipt(items):\n    return str(total(items))\n\n\n"
        "class Till:\n    def ring(self, items):\n        return total(items)\n"
    ),
}


def _calls() -> tuple[list[Chunk], list[ChunkCalls]]:
    files = [(path, text, chunk_file(path, text, ChunkingSettings())) for path, text in FILES.items()]
    graph, _ = package_graph("shop", files)
    chunks = [c for _, _, cs in files for c in cs]
    return chunks, chunk_calls(chunks, graph)


def test_a_chunks_graph_line_names_its_callees_and_its_callers_enclosing_symbols() -> None:
    chunks, calls = _calls()
    by_symbol = {c.symbol: (c, x) for c, x in zip(chunks, calls, strict=True) if c.symbol}
    total, total_calls = by_symbol["total"]
    assert total_calls.calls == ["rate", "fee"]
    assert sorted(total_calls.called_by) == ["receipt", "ring"]  # a method's caller is named bare
    assert total_calls.call_sites == 2
    line = graph_line(total_calls)
    assert line is not None and line.startswith("calls: rate, fee; called by: ")
    assert graph_line(total_calls, callers=False) == "calls: rate, fee"
    assert graph_line(by_symbol["rate"][1]) == "called by: total"
    text = graph_text(total, line)
    header, _, code = embedding_text(total).partition("\n\n")
    assert text == f"{header}\n{line}\n\n{code}"
    assert graph_text(total, None) == embedding_text(total)
    neighbours = {chunks[j].symbol for j in total_calls.neighbours}
    assert {"rate", "fee", "receipt"} <= neighbours


def test_the_graph_line_keeps_five_names_at_most() -> None:
    many = ChunkCalls(calls=[f"f{i}" for i in range(8)], called_by=[])
    assert graph_line(many) == "calls: f0, f1, f2, f3, f4"
    assert graph_line(ChunkCalls()) is None


def test_the_ranking_boosts_leave_non_candidates_out() -> None:
    scores = np.array([[0.5, -np.inf, 0.2]])
    calls = [ChunkCalls(call_sites=3, neighbours={2}), ChunkCalls(call_sites=1), ChunkCalls(neighbours={0, 1})]
    boosted = popularity(scores, calls, 0.1)
    assert boosted[0, 0] == np.float64(0.5 + 0.1 * np.log(4)) and np.isneginf(boosted[0, 1])
    spread = propagate(scores, calls, 0.5)
    assert spread[0, 0] == 0.5 + 0.5 * 0.2 and spread[0, 2] == 0.2 + 0.5 * 0.5 and np.isneginf(spread[0, 1])
