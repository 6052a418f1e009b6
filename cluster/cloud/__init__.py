"""OpenRouter: the wire, the client, the key-wide budget, spend against daily caps, request tags,
key readiness and cloud state."""

from __future__ import annotations

from cluster.cloud.budget import BudgetController, BudgetLimits, BudgetSnapshot, KeyFacts, Outcome, Priority
from cluster.cloud.faults import read_json, upstream_faults
from cluster.cloud.key_readiness import NO_KEY_REASON, local_only_roles, missing_key_message, wait_for_key
from cluster.cloud.openai_wire import ChatResult, ToolCall, chat_request_body, parse_chat_result
from cluster.cloud.openrouter import OpenRouterClient
from cluster.cloud.permits import Grants, PermitDesk
from cluster.cloud.request_tag import DEFAULT_PROJECT, RequestTag, current_request_tag, set_request_tag
from cluster.cloud.spend import (
    CallUsage,
    Charge,
    ModelPrice,
    SpendLedger,
    SpendRecord,
    SpendState,
    SpendView,
    charge_for,
)
from cluster.cloud.state import ContainerState, disagreements

__all__ = [
    "DEFAULT_PROJECT",
    "NO_KEY_REASON",
    "BudgetController",
    "BudgetLimits",
    "BudgetSnapshot",
    "CallUsage",
    "Charge",
    "ChatResult",
    "ContainerState",
    "Grants",
    "KeyFacts",
    "ModelPrice",
    "OpenRouterClient",
    "Outcome",
    "PermitDesk",
    "Priority",
    "RequestTag",
    "SpendLedger",
    "SpendRecord",
    "SpendState",
    "SpendView",
    "ToolCall",
    "charge_for",
    "chat_request_body",
    "current_request_tag",
    "disagreements",
    "local_only_roles",
    "missing_key_message",
    "parse_chat_result",
    "read_json",
    "set_request_tag",
    "upstream_faults",
    "wait_for_key",
]
