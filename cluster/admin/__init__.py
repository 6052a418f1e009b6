"""The admin surface's decisions: what a push changes and where it goes; how a restarting role reads."""

from __future__ import annotations

from cluster.admin.push_plan import (
    NO_KEY_YET,
    OpenRouterPush,
    PushPlan,
    key_check_needed,
    merged,
    plan_push,
    plan_repush,
)
from cluster.admin.role_status import CallFailure, RoleAnswer, RoleStatus, role_answer

__all__ = [
    "NO_KEY_YET",
    "CallFailure",
    "OpenRouterPush",
    "PushPlan",
    "RoleAnswer",
    "RoleStatus",
    "key_check_needed",
    "merged",
    "plan_push",
    "plan_repush",
    "role_answer",
]
