"""python -m samespace (see samespace.cli)."""

from __future__ import annotations

from samespace.cli import main

raise SystemExit(main())
