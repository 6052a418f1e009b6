"""The five roles and four policies (DESIGN §2, §3), and what a policy means for each role.

Pure data and functions; every other module asks here instead of re-deriving a rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    CODE_EMBEDDING = "code-embedding"
    EMBEDDING = "embedding"
    RERANKER = "reranker"
    CODE_ASSISTANT = "code-assistant"
    RLM = "rlm"

    @property
    def writes_index(self) -> bool:
        """Embedding roles write vectors into an index: they need a pinned upstream (DESIGN §6)."""
        return self in EMBEDDING_ROLES

    @property
    def fans_out(self) -> bool:
        """Only the embedding roles have a fan-out pool; the others are single calls."""
        return self in EMBEDDING_ROLES

    @property
    def label(self) -> str:
        """CamelCase label used in virtual container names: 'CodeEmbedding', 'Rlm', ..."""
        return _LABELS[self]


class Policy(StrEnum):
    LOCAL = "local"
    CLOUD = "cloud"
    AGGREGATE = "aggregate"
    BACKUP = "backup"


EMBEDDING_ROLES = frozenset({Role.CODE_EMBEDDING, Role.EMBEDDING})
SINGLE_CALL_ROLES = frozenset({Role.RERANKER, Role.CODE_ASSISTANT, Role.RLM})
CHAT_ROLES = frozenset({Role.CODE_ASSISTANT, Role.RLM})  # served by chat models (local servers or the cloud)
DEFAULT_POLICY = Policy.AGGREGATE  # "the user asked for capacity, not a failover" (peer)

_LABELS = {
    Role.CODE_EMBEDDING: "CodeEmbedding",
    Role.EMBEDDING: "Embedding",
    Role.RERANKER: "Reranker",
    Role.CODE_ASSISTANT: "CodeAssistant",
    Role.RLM: "Rlm",
}


@dataclass(frozen=True)
class Behaviour:
    """What a policy does for one role.

    joins_fan_out:   cloud providers pull from the same queue as local ones
    allows_fallback: cloud is held in reserve, used only when no local provider can serve
    local_serves:    local actors serve this role (False under `cloud`: not even the query encoder)
    """

    joins_fan_out: bool
    allows_fallback: bool
    local_serves: bool

    @property
    def cloud_may_serve(self) -> bool:
        return self.joins_fan_out or self.allows_fallback or not self.local_serves


_BEHAVIOUR = {
    Policy.AGGREGATE: Behaviour(joins_fan_out=True, allows_fallback=False, local_serves=True),
    Policy.BACKUP: Behaviour(joins_fan_out=False, allows_fallback=True, local_serves=True),
    Policy.LOCAL: Behaviour(joins_fan_out=False, allows_fallback=False, local_serves=True),
    Policy.CLOUD: Behaviour(joins_fan_out=True, allows_fallback=False, local_serves=False),
}


def effective_behaviour(role: Role, policy: Policy) -> Behaviour:
    """DESIGN §3: single-call roles have no fan-out, so `aggregate` acts as `backup` for them."""
    if policy is Policy.AGGREGATE and not role.fans_out:
        return _BEHAVIOUR[Policy.BACKUP]
    return _BEHAVIOUR[policy]


def fill_policies(configured: Mapping[Role, Policy] | None) -> dict[Role, Policy]:
    """Every role gets a policy: a missing role means `aggregate`, never off or local by accident."""
    configured = configured or {}
    return {role: configured.get(role, DEFAULT_POLICY) for role in Role}
