"""The admin API and the operator page, under /admin (mounted in the MCP replica's app, or deployed alone).

    serve run serve_apps.admin:build_app      # route prefix /admin

This `__init__` is the package's one door. Behind it: `_api.py` (`AdminApi`, the plain service: status
of roles, providers, gate, budget, sidecars; the OpenRouter push), `_app.py` (the routes, the admin
token check, `AdminIngress`), `_indexes.py` (index routes and the git push webhook), `_hook_auth.py`
(the webhook's signed string, header checks and replay ledger), `_jobs.py` (the recent Ray jobs),
`_page.py` (the operator page, its files in `static/`), `_audit.py` (admin actions in the audit log,
`GET /admin/audit`, and the process's one `replica_audit_log`, which the MCP tools append to as well).
"""

from __future__ import annotations

from serve_apps.admin._api import AdminApi
from serve_apps.admin._app import AdminIngress, build_admin_asgi, build_app
from serve_apps.admin._audit import replica_audit_log
from serve_apps.admin._hook_auth import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    sign_delivery,
    signed_message,
)
from serve_apps.admin._jobs import JobList

__all__ = [
    "DELIVERY_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "AdminApi",
    "AdminIngress",
    "JobList",
    "build_admin_asgi",
    "build_app",
    "replica_audit_log",
    "sign_delivery",
    "signed_message",
]
