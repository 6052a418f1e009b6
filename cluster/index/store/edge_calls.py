"""The calls `EdgeStore` makes of a Qdrant Edge shard: filters, legs, and the candidates of a search.

`query_shard` is a search's candidates on one shard: the collection's own, or a pool of several
small collections (`edge_pool`), whose candidates come back by collection with their own ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import qdrant_edge as qe

from cluster.index.query import SearchQuery
from cluster.index.store.edge_files import engine_errors
from cluster.index.store.edge_pool import TENANT_VECTOR, Tenant, own_payload, slot_of, tenants_filter
from cluster.index.store.protocol import CandidatePool, engine_filter, point_vectors
from cluster.index.store.reads import VECTOR_LEGS, Leg, plan_legs
from cluster.types import CandidateHit, PayloadFilter, StoredPoint

__all__ = ["edge_filter", "edge_vectors", "engine_errors", "query_shard"]


class _EdgeFilters:
    """Qdrant Edge's filter types (`engine_filter`)."""

    @staticmethod
    def match(key: str, value: str) -> Any:
        return qe.FieldCondition(key=key, match=qe.MatchValue(value))

    @staticmethod
    def match_any(key: str, values: list[str]) -> Any:
        return qe.FieldCondition(key=key, match=qe.MatchAny(values))

    @staticmethod
    def combine(must: list[Any], should: list[Any], must_not: list[Any]) -> Any:
        return qe.Filter(must=must or None, should=should or None, must_not=must_not or None)


def edge_filter(filter: PayloadFilter | None) -> qe.Filter | None:
    built: qe.Filter | None = engine_filter(filter, _EdgeFilters())
    return built


def edge_vectors(point: StoredPoint) -> Any:
    """The code vector, the name vector and the keyword vector a point has, by name."""
    return point_vectors(point, qe.SparseVector)


def _edge_query(leg: Leg) -> qe.Query:
    """A leg as Qdrant Edge's query: nearest to its dense vector or its sparse keyword terms."""
    if isinstance(leg.vector, list):
        return qe.Query.Nearest(leg.vector, using=leg.using or None)
    return qe.Query.Nearest(qe.SparseVector(list(leg.vector.indices), list(leg.vector.values)), using=leg.using)


def _ids_and_scores(leg: Leg, limit: int, where: qe.Filter | None, params: qe.SearchParams | None) -> qe.QueryRequest:
    """One leg of a search: ids and scores only (payloads are read once, for the union); a dense leg
    searches with the store's parameters (the graph's ef, rescoring of quantised vectors)."""
    dense = isinstance(leg.vector, list)
    return qe.QueryRequest(
        limit=limit,
        query=_edge_query(leg),
        with_payload=False,
        with_vector=False,
        filter=where,
        params=params if dense else None,
    )


def _run_legs(shard: Any, pool: CandidatePool, requests: list[tuple[str, qe.QueryRequest]]) -> None:
    """Legs in one engine call; each leg's ids and scores go into the pool."""
    if not requests:
        return
    with engine_errors("query"):
        found = shard.query_batch(qe.QueryBatchRequest([request for _, request in requests]))
    for (leg, _), points in zip(requests, found, strict=True):
        pool.add(leg, points)


def _has_ids(ids: Sequence[Any]) -> qe.Filter:
    """Only these points (ids as the engine returned them)."""
    return qe.Filter(must=[qe.HasIdCondition(set(ids))])


def query_shard(
    shard: Any,
    query: SearchQuery,
    params: qe.SearchParams,
    members: Sequence[tuple[str, Tenant | None]],
    *,
    payloads: bool,
    every: bool = False,
) -> dict[str, list[CandidateHit]]:
    """The candidates of `query` on one shard (`VectorStore.query`), by collection. `members`: the
    shard's own collection alone (its tenant None), or pooled collections of the shard, searched in
    one engine call over their rows together (each leg's top `query.leg_limit` of all of them);
    `every`: they are all the pool holds, so no tenant filter is needed (a full scan without one is
    ~40% faster, measured)."""
    legs, limit = plan_legs(query), query.leg_limit
    tenants = [tenant for _, tenant in members if tenant is not None]
    within: PayloadFilter | None = None
    if tenants and not every:
        within = tenants[0].where(None) if len(tenants) == 1 else tenants_filter(t.name for t in tenants)
    pool = CandidatePool()
    _run_legs(
        shard,
        pool,
        [(leg.name, _ids_and_scores(leg, limit, edge_filter(_inside(within, leg.filter)), params)) for leg in legs],
    )
    if query.vector is not None:  # a candidate one vector leg missed gets its exact cosine there
        missed = [(leg, pool.missing(leg.name)) for leg in legs if leg.name in VECTOR_LEGS]
        _run_legs(
            shard,
            pool,
            [(leg.name, _ids_and_scores(leg, len(ids), _has_ids(ids), params)) for leg, ids in missed if ids],
        )
    several, slots = len(tenants) > 1, {}
    if several:  # each candidate's collection: the slot its rows carry
        with engine_errors("query"):
            records = shard.retrieve(pool.ids, with_payload=payloads, with_vector=[TENANT_VECTOR])
        slots = {str(record.id): slot_of(record.vector) for record in records}
        pool.fill(records)
    elif payloads:
        with engine_errors("query"):
            pool.fill(shard.retrieve(pool.ids, with_payload=True, with_vector=False))
    else:
        pool.fill_bare()
    found = pool.candidates(query.vector)
    if not tenants:
        return {members[0][0]: found}
    by_slot = {tenant.slot: (name, tenant) for name, tenant in members if tenant is not None}
    by_collection: dict[str, list[CandidateHit]] = {name: [] for name, _ in members}
    for candidate in found:
        name, tenant = by_slot[slots[candidate.id]] if several else (members[0][0], tenants[0])
        own = own_payload(candidate.payload) if payloads else {}
        by_collection[name].append(replace(candidate, id=tenant.own_id(candidate.id), payload=own))
    return by_collection


def _inside(within: PayloadFilter | None, filter: PayloadFilter | None) -> PayloadFilter | None:
    return filter if within is None else within.both(filter)
