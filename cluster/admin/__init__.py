"""The admin surface's decisions: what a push changes and where it goes (the key too); how a restarting role reads."""

from __future__ import annotations

from cluster.admin.key_targets import KeyTargets, any_key_held, key_targets
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
    "KeyTargets",
    "OpenRouterPush",
    "PushPlan",
    "RoleAnswer",
    "RoleStatus",
    "any_key_held",
    "key_check_needed",
    "key_targets",
    "merged",
    "plan_push",
    "plan_repush",
    "role_answer",
]
