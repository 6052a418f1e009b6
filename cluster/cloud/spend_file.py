"""Where today's cloud spend is kept between restarts of the budget actor, and how it is read back.

The file is `<store.data_dir>/spend.json`, beside the embedded store on the head node. The budget
actor writes it (atomically, `cluster.config.write_bytes_atomic`); a file that cannot be read is
logged and spend starts again from 0, never a failure.
"""

from __future__ import annotations

import logging
from pathlib import Path

from cluster.cloud.spend import SpendRecord
from cluster.settings import SamespaceSettings

__all__ = ["SPEND_FILE", "read_spend", "spend_path"]

SPEND_FILE = "spend.json"

log = logging.getLogger("samespace.budget")


def spend_path(settings: SamespaceSettings) -> Path:
    """Where the budget actor keeps today's spend: beside the embedded store, on the head."""
    return Path(settings.store.data_dir) / SPEND_FILE


def read_spend(path: Path) -> SpendRecord | None:
    """The persisted spend; None when there is none or it cannot be read (logged: spend starts at 0)."""
    try:
        return SpendRecord.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        log.warning("spend file %s unreadable, today's spend starts again from 0: %s", path, exc)
        return None
