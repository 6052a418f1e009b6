"""How a dispatcher reaches a sidecar's virtual container: through the fleet actor, naming the provider
and carrying the request's tag as a Ray-hosted container's calls do; rerank scores one per document."""

from __future__ import annotations

from typing import Any

from actors.transports import TRANSPORTS, CloudTransport, SidecarCloudTransport
from cluster.cloud import Priority, RequestTag, set_request_tag, tagged
from cluster.providers import ProviderInfo, ProviderKind
from cluster.roles import Role


class Method:
    def __init__(self, answer: Any) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self._answer = answer

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((args, kwargs))

        async def answered() -> Any:
            return self._answer

        return answered()


class FleetHandle:
    def __init__(self) -> None:
        self.virtual_embed = Method("vectors")
        self.virtual_rerank = Method([(2, 0.9), (0, 0.1)])


def info(name: str, role: Role) -> ProviderInfo:
    return ProviderInfo(
        name=name,
        kind=ProviderKind.CLOUD,
        hosted="sidecar",
        roles=[role],
        node_id="",
        host="ws-7",
        model="m",
        eligible=True,
    )


async def test_a_sidecar_s_virtual_container_is_called_through_the_fleet_actor_with_the_request_s_tag() -> None:
    assert TRANSPORTS[ProviderKind.CLOUD, "sidecar"] is SidecarCloudTransport
    assert TRANSPORTS[ProviderKind.CLOUD, "ray"] is CloudTransport
    handle = FleetHandle()
    embedder = SidecarCloudTransport(handle).provider(info("ws-7-OR-CodeEmbedding", Role.CODE_EMBEDDING))
    reranker = SidecarCloudTransport(handle).provider(info("ws-7-OR-Reranker", Role.RERANKER))
    assert embedder.rerank is None and embedder.call is None and reranker.embed is None and reranker.call is None
    set_request_tag(RequestTag("proj", Priority.INTERACTIVE))
    with tagged("dana", "c1"):
        assert embedder.embed is not None and await embedder.embed(["a"]) == "vectors"
        assert reranker.rerank is not None
        scores = await reranker.rerank("q", ["d0", "d1", "d2"])
    assert handle.virtual_embed.calls == [
        (("ws-7-OR-CodeEmbedding", ["a"], "proj", "interactive"), {"subject": "dana", "call_id": "c1"})
    ]
    assert handle.virtual_rerank.calls == [
        (
            ("ws-7-OR-Reranker", "q", ["d0", "d1", "d2"], None, "proj", "interactive"),
            {"subject": "dana", "call_id": "c1"},
        )
    ]
    assert scores == [0.1, float("-inf"), 0.9]  # a document the upstream did not rank comes last
