"""The `samespace` command line: run a local cluster, index, search, ask, and administer it.

    samespace run --repo /path/to/repo        # local Ray head (token auth), Serve apps, reindex job
    samespace search "where do we retry requests"
    samespace stop

Everything here is a thin shell over the entry points that exist without it (`serve_apps.mcp_client`,
`serve_apps.admin_client`, `jobs.reindex`, `sidecar.cli`) and over the `ray` and `serve` commands; nothing
in `cluster`, `actors`, `serve_apps` or `jobs` imports it.
"""

from __future__ import annotations

__all__: list[str] = []
