"""OpenRouter: the wire, the client, the key-wide budget, spend against daily caps (and its file),
request tags, key readiness, a virtual container's values and cloud state."""

from __future__ import annotations

from cluster.cloud.budget import BudgetController, BudgetLimits, BudgetSnapshot, KeyFacts, Outcome, Priority
from cluster.cloud.container import cloud_identity, read_key_facts, requests_per_minute, starting_config
from cluster.cloud.faults import error_for_status, read_json, upstream_faults
from cluster.cloud.key_readiness import NO_KEY_REASON, local_only_roles, missing_key_message, wait_for_key
from cluster.cloud.openai_wire import ChatResult, ToolCall, chat_request_body, parse_chat_result
from cluster.cloud.openrouter import OpenRouterClient
from cluster.cloud.permits import CallCredits, Grants, PermitDesk, SubjectSpend
from cluster.cloud.request_tag import (
    DEFAULT_PROJECT,
    RequestTag,
    caller_kwargs,
    collecting_usage,
    current_request_tag,
    hear_usage,
    set_request_tag,
    tagged,
)
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
from cluster.cloud.spend_file import SPEND_FILE, read_spend, spend_path
from cluster.cloud.state import ContainerState, disagreements

__all__ = [
    "DEFAULT_PROJECT",
    "NO_KEY_REASON",
    "SPEND_FILE",
    "BudgetController",
    "BudgetLimits",
    "BudgetSnapshot",
    "CallCredits",
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
    "SubjectSpend",
    "ToolCall",
    "caller_kwargs",
    "charge_for",
    "chat_request_body",
    "cloud_identity",
    "collecting_usage",
    "current_request_tag",
    "disagreements",
    "error_for_status",
    "hear_usage",
    "local_only_roles",
    "missing_key_message",
    "parse_chat_result",
    "read_json",
    "read_key_facts",
    "read_spend",
    "requests_per_minute",
    "set_request_tag",
    "spend_path",
    "starting_config",
    "tagged",
    "upstream_faults",
    "wait_for_key",
]
