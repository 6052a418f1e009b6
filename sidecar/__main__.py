"""python -m sidecar (see sidecar.cli)."""

from __future__ import annotations

from sidecar.cli import main

raise SystemExit(main())
