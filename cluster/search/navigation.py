"""A navigation tool's answer over several indexes: each index's graph answers, the answers merge.

A symbol defined in one index is walked there (the others do not hold it); a symbol defined in
several indexes is ambiguous like one defined twice in one index: the answer lists the candidates
and walks nothing. Edges stay inside an index: a call from one index into another is not followed.
"""

from __future__ import annotations

from collections.abc import Mapping

from cluster.graph import CodeGraph, GraphAnswer, GraphQuery, GraphTool, ImpactAnswer

__all__ = ["navigate"]


def navigate(graphs: Mapping[str, CodeGraph], query: GraphQuery) -> GraphAnswer:
    answers = {name: graph.answer(query) for name, graph in sorted(graphs.items())}
    if query.tool is GraphTool.DEFINITION or len(answers) <= 1:
        return _merged_definitions(query, answers) if query.tool is GraphTool.DEFINITION else _only(query, answers)
    holding = {name: a for name, a in answers.items() if a.definitions or a.candidates}
    if len(holding) == 1:
        return next(iter(holding.values()))
    if not holding:
        return _none(query, answers)
    candidates = [d for a in holding.values() for d in (a.definitions or a.candidates)]
    note = f"{query.symbol!r} is defined in {len(holding)} indexes ({', '.join(holding)}): name one with repo"
    empty = ImpactAnswer if query.tool is GraphTool.IMPACT else GraphAnswer
    return empty(symbol=query.symbol, candidates=candidates, note=note)


def _only(query: GraphQuery, answers: Mapping[str, GraphAnswer]) -> GraphAnswer:
    if answers:
        return next(iter(answers.values()))
    return _none(query, answers)


def _none(query: GraphQuery, answers: Mapping[str, GraphAnswer]) -> GraphAnswer:
    where = ", ".join(answers) or "no index"
    empty = ImpactAnswer if query.tool is GraphTool.IMPACT else GraphAnswer
    return empty(symbol=query.symbol, note=f"no definition of {query.symbol!r} in {where}")


def _merged_definitions(query: GraphQuery, answers: Mapping[str, GraphAnswer]) -> GraphAnswer:
    found = [d for a in answers.values() for d in a.definitions][: query.limit]
    if found:
        return GraphAnswer(symbol=query.symbol, definitions=found)
    return _none(query, answers)
