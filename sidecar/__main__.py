"""python -m sidecar (see sidecar.cli)."""

from sidecar.cli import main

raise SystemExit(main())
