"""What the durable config remembers of each index a client asked to keep fresh."""

from __future__ import annotations

from enum import StrEnum

from pydantic import ConfigDict, Field

from cluster.types import Strict

__all__ = ["IndexOrigin", "IndexOwner", "IndexRegistration"]


class IndexOrigin(StrEnum):
    """Who registered an index: an MCP client (confined to `index.allowed_roots`, re-confined at every
    build) or the admin API (its token is the authority)."""

    MCP = "mcp"
    ADMIN = "admin"


class IndexOwner(Strict):
    """Who registered an index over MCP with an identity of their own (an OAuth access token): its
    subject, and its issuer when it has one. Only they, or an admin, may refresh, remove or re-point it."""

    subject: str = Field(min_length=1, description="The registering token's `sub`.")
    issuer: str | None = Field(default=None, description="The registering token's `iss`.")


class IndexRegistration(Strict):
    """An index the sync actor keeps fresh: the folder (and ref) it follows, who registered it (the
    name is bound to that folder and ref), and the change signature its last submitted build saw.
    Survives restarts in the config store; never any file content."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    name: str = Field(min_length=1, description="The index.")
    folder: str = Field(min_length=1, description="Absolute folder (a git repository for a ref) the index follows.")
    ref: str | None = Field(default=None, description="The branch, tag or commit indexed; None: the working tree.")
    sync: bool = Field(default=True, description="Whether a change of the folder (or ref) is reindexed on its own.")
    registered_at: float = Field(description="Unix time of the registration.")
    signature: str | None = Field(
        default=None, description="The change signature the last submitted build saw (None: not built yet)."
    )
    submitted_at: float | None = Field(default=None, description="Unix time of the last submitted build.")
    origin: IndexOrigin = Field(
        default=IndexOrigin.ADMIN,
        description="Who registered it; a record stored before origins were kept reads as admin.",
    )
    owner: IndexOwner | None = Field(
        default=None,
        description="The caller who registered it over MCP with an identity of its own (auth.mode oauth); "
        "None: nobody in particular (a shared identity, the admin API, a record stored before owners were "
        "kept), and the folder rules alone apply.",
    )
