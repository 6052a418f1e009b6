"""The `index` section: who may index what over MCP, and how registered indexes stay fresh."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from cluster.settings.bearer import bearer_token

ALLOWED_ROOTS_ENV = "SAMESPACE_INDEX__ALLOWED_ROOTS"
DEFAULT_SYNC_PERIOD_S = 60.0
DEFAULT_SYNC_DEBOUNCE_S = 5.0
READER_KINDS = ("group", "sub")


class IndexSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    allowed_roots: list[Path] = Field(
        default_factory=list,
        description="Folders (and their subfolders) an MCP client may index; empty: indexing over MCP is off "
        f"({ALLOWED_ROOTS_ENV}, a JSON list). The admin API and the CLI are not confined to them.",
    )
    sync_period_s: float = Field(
        default=DEFAULT_SYNC_PERIOD_S, ge=0.5, description="How often the sync actor looks at each registered folder."
    )
    sync_debounce_s: float = Field(
        default=DEFAULT_SYNC_DEBOUNCE_S,
        ge=0,
        description="A change must stay unchanged this long before it is reindexed (edits in progress wait).",
    )
    groups: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Named groups of indexes (names or globs) a tool can read together as repo='@<group>', "
        'e.g. {"backend": ["api", "billing*"]}.',
    )
    acl: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Who may read an index under auth.mode=oauth: an index name or glob mapped to readers, each "
        "'group:<name>' (a group in the token's groups claim) or 'sub:<subject>' (a token's subject), e.g. "
        '{"billing*": ["group:payments", "sub:alice"]}. An exact name\'s entry wins over globs, the glob with more '
        "literal characters over one with fewer (a tie: the entry written first); an index no entry matches is "
        "open to every reader; samespace:admin reads every index.",
    )
    history_commits: int = Field(
        default=1000,
        ge=0,
        description="Commits a first build mines, newest first (later builds mine every commit since); "
        "0: no history is mined.",
    )
    history_backfill: bool = Field(
        default=False,
        description="After the index is served, the reindex job goes on mining older commits, history_commits "
        "at a time, each batch stored as it lands, until the history is whole.",
    )
    hook_secret: Annotated[SecretStr | None, bearer_token("index.hook_secret")] = Field(
        default=None,
        description="Shared secret of POST /admin/hooks/git (a git host's push webhook, HMAC-SHA256 signed); "
        "None or blank: the hook is off; under 16 bytes: refused.",
    )

    @field_validator("acl")
    @classmethod
    def _readers_are_named(cls, acl: dict[str, list[str]]) -> dict[str, list[str]]:
        for pattern, readers in acl.items():
            for reader in readers:
                kind, sep, name = reader.partition(":")
                if not sep or kind not in READER_KINDS or not name:
                    raise ValueError(
                        f"index.acl[{pattern!r}]: reader {reader!r} is neither 'group:<name>' nor 'sub:<subject>'"
                    )
        return acl

    @field_validator("allowed_roots")
    @classmethod
    def _absolute(cls, roots: list[Path]) -> list[Path]:
        for root in roots:
            if not root.expanduser().is_absolute():
                raise ValueError(f"allowed root {str(root)!r} is not an absolute path")
        return [root.expanduser() for root in roots]
