"""What the durable config remembers of each index a client asked to keep fresh."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from cluster.types import Strict

__all__ = ["IndexRegistration"]


class IndexRegistration(Strict):
    """An index the sync actor keeps fresh: the folder (and ref) it follows, and the change signature
    its last submitted build saw. Survives restarts in the config store; never any file content."""

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
