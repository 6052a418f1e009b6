"""Hybrid scoring: one score per candidate from the code cosine, the name cosine and the keyword
score, over one index or several (DESIGN §10).

    score = dense_weight · cos(query, code vector) + name_weight · cos(query, name vector)
          + keyword_weight · bm25 / best bm25 of its index + definition_weight · [defines the name asked]

Why a weighted sum of scores and not reciprocal-rank fusion: RRF (k 60) keeps only the legs'
ranks, so a keyword hit with a weak score weighs as much as a strong dense one, and a candidate
one leg missed loses that leg entirely. Here every candidate has both exact cosines (the store
returns its vectors) and the keyword leg counts in proportion to its strength. On the dev packages
of bench.quality (607 docstring → function queries), RRF 1:1 reached recall@10 0.776 and MRR 0.512;
this sum with the weights of `FusionParams` reaches 0.840 and 0.579, and the weights chosen with
any one dev package held out were the same (0.4, 0.2).

The scores of several indexes are comparable: every hit scores exactly as it does when its index
is searched alone, on one scale. Cosines are absolute (every index searched is in the query's
encoder space). Raw BM25 is not: the store weighs terms by IDF over each collection, so the same
chunk scores higher in a larger index (tests/unit/index/test_fusion.py shows a caller outscoring the
definition it calls once they sit in different indexes); each index's keyword scores are therefore
divided by that index's best. The same place (path, lines and text) found in several indexes is
returned once, with the other indexes in its `also_in`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cluster.index.payload import RowPlace
from cluster.types import CandidateHit, FusionParams, ScoredHit

__all__ = ["ALSO_IN", "Ranked", "best_places", "fuse_candidates", "rank_candidates", "tie_end"]

ALSO_IN = "also_in"  # payload key of a fused hit: the other indexes holding the same place (`RowPayload.also_in`)


Ranked = list[tuple[float, CandidateHit]]


def fuse_candidates(candidates: Iterable[CandidateHit], params: FusionParams, limit: int) -> list[ScoredHit]:
    """The best `limit` places, best first; ties go to the lower (repo, path, line). Every candidate
    carries its payload (at least its place and build)."""
    return best_places(rank_candidates(candidates, params), limit)


def rank_candidates(candidates: Iterable[CandidateHit], params: FusionParams) -> Ranked:
    """Every candidate with its score, best first: needs of the payload only the build (each build's
    keyword scores are divided by its best). The places come after (`best_places`), so a caller may
    read the payloads of the first few only (`tie_end` says where a cut may fall)."""
    pool = list(candidates)
    best_keyword: dict[str, float] = {}  # per build: raw BM25 is not comparable across collections
    for c in pool:
        build = str(c.payload.get("build", ""))
        best_keyword[build] = max(best_keyword.get(build, 0.0), c.keyword)
    scored = [(_score(c, params, best_keyword[str(c.payload.get("build", ""))]), c) for c in pool]
    return sorted(scored, key=lambda item: -item[0])


def tie_end(ranked: Ranked, cut: int) -> int:
    """Where a cut at `cut` may end without splitting candidates of equal score (whose order the
    places decide)."""
    end = min(cut, len(ranked))
    while 0 < end < len(ranked) and ranked[end][0] == ranked[end - 1][0]:
        end += 1
    return end


def best_places(ranked: Ranked, limit: int) -> list[ScoredHit]:
    """The best `limit` places of ranked candidates that carry their payloads, best first; ties go to the
    lower (repo, path, line); a place in several indexes once, with the others in `also_in`."""
    rows = [(score, c, RowPlace.model_validate(c.payload)) for score, c in ranked]
    rows.sort(key=lambda item: (-item[0], item[2].repo, item[2].path, item[2].start_line or 0))
    places: dict[tuple[str, int, int, str], tuple[float, CandidateHit, str, list[str]]] = {}
    for score, candidate, row in rows:
        held = places.get(row.place)
        if held is None:
            places[row.place] = (score, candidate, row.repo, [])
        elif row.repo != held[2]:
            held[3].append(row.repo)
    best = list(places.values())[: max(limit, 0)]  # dicts keep insertion order: best first
    return [_hit(score, candidate, others) for score, candidate, _, others in best]


def _score(candidate: CandidateHit, params: FusionParams, best_keyword: float) -> float:
    score = 0.0
    if candidate.dense is not None:
        score += params.dense_weight * candidate.dense
    if candidate.name is not None:
        score += params.name_weight * candidate.name
    if best_keyword > 0:
        score += params.keyword_weight * candidate.keyword / best_keyword
    if candidate.definition:
        score += params.definition_weight
    return score


def _hit(score: float, candidate: CandidateHit, others: Sequence[str]) -> ScoredHit:
    payload = dict(candidate.payload)
    if others:
        payload[ALSO_IN] = sorted(set(others))
    return ScoredHit(id=candidate.id, score=score, payload=payload)
