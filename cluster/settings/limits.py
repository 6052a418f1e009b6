"""The `limits` section: what one input may cost. Every cap has a default, and every refusal names
the setting (`limits.<field>`, env `SAMESPACE_LIMITS__<FIELD>`) that decides it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cluster.settings.bearer import setting_name


def limit_name(field: str) -> str:
    """How a refusal names a cap: 'limits.max_glob_chars (SAMESPACE_LIMITS__MAX_GLOB_CHARS)'."""
    return setting_name(f"limits.{field}")


class LimitsSettings(BaseModel):
    """Caps on untrusted input: glob patterns, request bodies, jobs, registrations, and how often
    index_status may ask git."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    max_glob_chars: int = Field(
        default=200, ge=1, le=10_000, description="Longest index-name glob a tool's repo argument may hold."
    )
    max_glob_wildcards: int = Field(
        default=16, ge=1, le=1_000, description="Most wildcards ('*', '?', '[') in one index-name glob."
    )
    max_scope_patterns: int = Field(
        default=64, ge=1, le=10_000, description="Most names and globs one scope (a group) may expand to."
    )
    max_ask_body_bytes: int = Field(
        default=64 << 10, ge=1024, description="Largest POST /rlm/ask body, read as a capped stream."
    )
    max_hook_body_bytes: int = Field(
        default=1 << 20, ge=1024, description="Largest POST /admin/hooks/git body, read as a capped stream."
    )
    hook_window_s: float = Field(
        default=300.0,
        gt=0,
        le=86_400,
        description="A webhook delivery's timestamp must lie within this many seconds of now; its delivery id "
        "is remembered this long, so a replay is refused.",
    )
    max_hook_deliveries: int = Field(
        default=10_000,
        ge=1,
        le=1_000_000,
        description="Webhook delivery ids one replica remembers within hook_window_s (replay protection, in "
        "memory, per replica); while it is full, a new delivery is refused (429) until old ones age out.",
    )
    max_jobs_per_index: int = Field(
        default=1, ge=1, le=16, description="Reindex jobs of one index running at once (a second request joins)."
    )
    max_jobs_total: int = Field(default=4, ge=1, le=256, description="Reindex jobs running at once, all indexes.")
    max_registrations: int = Field(
        default=256, ge=1, le=100_000, description="Registered indexes the sync actor keeps fresh."
    )
    status_git_period_s: float = Field(
        default=30.0,
        ge=0,
        description="index_status answers from recorded state and asks git about an index at most once per "
        "this period.",
    )
    grep_budget_s: float = Field(
        default=2.0,
        gt=0,
        le=60,
        description="Longest one grep_code call scans; a scan cut short says so and gives a cursor to go on.",
    )
    grep_max_bytes: int = Field(
        default=512 << 20,
        ge=1 << 20,
        description="Most text grep_code keeps in memory for one index (its files in path order; files past it "
        "are left out of the scan, and the answer says how many).",
    )
