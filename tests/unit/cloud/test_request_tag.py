"""Who a cloud call is for (cluster/cloud/request_tag.py): a tool call's subject and id for the length of
the call, as the keyword arguments an actor call carries; and each call's usage collected apart from the
calls running beside it in the same actor."""

from __future__ import annotations

import asyncio

from cluster.cloud import CallUsage, RequestTag, caller_kwargs, collecting_usage, current_request_tag, hear_usage
from cluster.cloud import tagged as tagged_with
from cluster.cloud.budget import Priority


def test_a_tag_holds_for_the_block_and_is_restored_after() -> None:
    assert caller_kwargs() == {} and current_request_tag() == RequestTag()
    with tagged_with("alice", "call-1") as tag:
        assert (tag.subject, tag.call_id, tag.priority) == ("alice", "call-1", Priority.BULK)
        assert caller_kwargs() == {"subject": "alice", "call_id": "call-1"}
        with tagged_with(None, "call-2"):
            assert caller_kwargs() == {"call_id": "call-2"}  # a shared caller: no subject to count
        assert current_request_tag().call_id == "call-1"
    assert caller_kwargs() == {}


async def test_concurrent_calls_each_collect_only_their_own_usage() -> None:
    leftover: list[CallUsage] = []

    async def call(model: str, responses: int) -> list[str]:
        with collecting_usage() as heard:
            for _ in range(responses):
                await asyncio.sleep(0)  # the calls interleave
                hear_usage(CallUsage(model=model, cost=0.01), leftover)
            return [usage.model for usage in heard]

    first, second = await asyncio.gather(call("a", 3), call("b", 2))
    assert (first, second) == (["a"] * 3, ["b"] * 2)
    hear_usage(CallUsage(model="outside"), leftover)  # heard outside any call: kept for the next settling
    assert [usage.model for usage in leftover] == ["outside"]
