"""The `samespace` command line: run a local cluster, index, search, ask, and administer it.

    samespace run --repo /path/to/repo        # local Ray head (token auth), Serve apps, reindex job
    samespace search "where do we retry requests"
    samespace stop

Everything here is a thin shell over the clients of the apps (`samespace.clients`: MCP and admin), the
entry points that exist without it (`jobs.reindex`, `sidecar.cli`) and the `ray` and `serve` commands;
`status_table.py` words the admin API's answers for a person and `failures.py` every failure as one line.
Nothing in `cluster`, `actors`, `serve_apps` or `jobs` imports it.
"""

from __future__ import annotations

__all__: list[str] = []
