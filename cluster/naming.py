"""The one place each named actor's name is spelled (a typo would start a second actor)."""

from __future__ import annotations

from cluster.roles import Role

INDEX_ACTOR_NAME = "samespace-index"
BUDGET_ACTOR_NAME = "samespace-budget"
EMBEDDER_PREFIX = "samespace-embedder"
RERANKER_PREFIX = "samespace-reranker"
CHAT_ENDPOINT_PREFIX = "samespace-chat"
FLEET_ACTOR_NAME = "samespace-fleet"
SYNC_ACTOR_NAME = "samespace-sync"
SIDECAR_PREFIX = "sidecar"
VIRTUAL_CONTAINER_MARK = "-OR-"  # between a virtual container's PC name and its role (DESIGN §4)


def embedder_actor_name(node_id: str | None, slot: int, device: str, prefix: str = EMBEDDER_PREFIX) -> str:
    """`samespace-embedder-<node8>-gpu<i>` for accelerator actors, `samespace-embedder-cpu<i>` otherwise."""
    if device == "cpu" or node_id is None:
        return f"{prefix}-cpu{slot}"
    return f"{prefix}-{node_id[:8]}-{device}{slot}"


def chat_endpoint_name(role: Role, slot: int) -> str:
    """`samespace-chat-rlm-0`: the configured local endpoint number `slot` of a chat role."""
    return f"{CHAT_ENDPOINT_PREFIX}-{role.value}-{slot}"


def dispatcher_actor_name(role: Role) -> str:
    return f"samespace-dispatch-{role.value}"


def pc_name(host_name: str) -> str:
    """The node's host name without a trailing `.local` (any case)."""
    return host_name[: -len(".local")] if host_name.lower().endswith(".local") else host_name


def virtual_container_name(host_name: str, role: Role) -> str:
    """`<PCName>-OR-<Role>` (DESIGN §4), e.g. 'BASWS35-OR-CodeEmbedding'."""
    return f"{pc_name(host_name)}{VIRTUAL_CONTAINER_MARK}{role.label}"


def is_virtual_container_name(name: str) -> bool:
    return VIRTUAL_CONTAINER_MARK in name


def is_provider_name(name: str) -> bool:
    """Whether a named actor is a provider discovery asks: an embedder, a reranker, a chat endpoint
    or a virtual container (a sidecar's providers are the fleet actor's, never actors of their own)."""
    prefixes = (EMBEDDER_PREFIX, RERANKER_PREFIX, CHAT_ENDPOINT_PREFIX)
    return name.startswith(prefixes) or is_virtual_container_name(name)


def sidecar_provider_name(agent_url: str, agent_id: str, role: Role) -> str:
    """`sidecar-<host:port>-<agent id>-<role>`, e.g. 'sidecar-ws17.lan:9100-3f9a2c1d0b7e-code-embedding'.

    Unique per agent and role: the id is issued by the master at registration, so a
    new agent at the same URL is a new provider, and the gate's verdict ledger probes it afresh."""
    from urllib.parse import urlsplit

    parts = urlsplit(agent_url)
    where = parts.netloc or parts.path or agent_url
    safe = "".join(c if c.isalnum() or c in ".:_-" else "_" for c in where.rsplit("@", 1)[-1])[:80]
    agent = "".join(c for c in agent_id if c.isalnum())[:32]
    return f"{SIDECAR_PREFIX}-{safe}-{agent}-{role.value}" if agent else f"{SIDECAR_PREFIX}-{safe}-{role.value}"
