"""The operator page: `GET /admin/ui` (an HTML shell) and `GET /admin/ui.js` (its script).

    open http://127.0.0.1:8000/admin/ui, enter the admin token once per browser session

A browser cannot send a bearer header on a plain navigation, so these two routes are the only ones of
the admin app served without the token (`is_open`, used by `build_admin_asgi`'s `require_token`), and
they hold no data at all: the shell is a login form, an empty page and the script. The token entered
there is kept in the tab's `sessionStorage` (never a cookie, never the URL, never the history) and sent
as `Authorization: Bearer` on every `fetch` the script makes to the same admin API; every table and
figure comes from those answers and is written with `textContent` only. An answer of 401 signs out.

What the page shows, and from where:
    roles and policies, providers   GET /admin/providers, GET /admin/openrouter (the configured policies)
    the compatibility gate          GET /admin/gate; "Re-verify gate": POST /admin/gate/verify
    the budget, spend against caps  GET /admin/budget (its `spend` section); "Set cap": PUT /admin/budget/caps
    indexes                         GET /admin/indexes (registrations and builds)
    the sidecar fleet               GET /admin/sidecars
    recent jobs                     GET /admin/jobs (serve_apps/admin/_jobs.py)
    the latest audit lines          GET /admin/audit?limit=50 (serve_apps/admin/_audit.py)
    "Push policy"                   POST /admin/openrouter {"policies": {role: policy}}
An API error is shown in place as its HTTP status and message.

The page is three static files of this package, `static/page.html` (the shell), `static/page.css` and
`static/page.js`, read once when the app is built (`page_assets`). The shell holds the style inline and
loads the script from this origin with its sha384 as Subresource Integrity: a script whose bytes
differ from the ones hashed is not run. Headers: a Content-Security-Policy that allows scripts from
this origin only (the page has no inline script) and the one inline <style> by its sha256, no
framing, no referrer, no caching.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.responses import Response

from cluster.roles import Policy, Role
from serve_apps.http_guard import route_path

UI_ROUTE = "/ui"
UI_SCRIPT_ROUTE = "/ui.js"
OPEN_ROUTES = frozenset({UI_ROUTE, UI_SCRIPT_ROUTE})
TOKEN_STORAGE_KEY = "samespace.admin.token"  # sessionStorage: this tab, until it closes or signs out
STATIC = "static"  # this package's folder of page files (package data in pyproject.toml)

# Fixed headers of both routes; the Content-Security-Policy is added with the style's hash.
HEADERS: Mapping[str, str] = {
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


@dataclass(frozen=True)
class PageAssets:
    """The page as served: the shell, the script, and the headers that pin them."""

    html: str
    script: str
    headers: Mapping[str, str]


def _digest(name: str, text: str) -> str:
    """A CSP / Subresource Integrity hash of `text` as served (UTF-8): `sha256-…` or `sha384-…`."""
    return f"{name}-{base64.b64encode(hashlib.new(name, text.encode()).digest()).decode()}"


def content_security_policy(style_hash: str) -> str:
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            f"style-src '{style_hash}'",
            "connect-src 'self'",
            "img-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'none'",  # the login form never submits: the script reads it
            "frame-ancestors 'none'",
        ]
    )


def _static(name: str) -> str:
    return (resources.files("serve_apps.admin") / STATIC / name).read_text(encoding="utf-8")


@functools.cache
def page_assets() -> PageAssets:
    """The shell (style inline, the script's sha384 as its integrity) and the script (the token key,
    the roles and the policies filled in), read from the static files once."""
    script = (
        _static("page.js")
        .replace("__TOKEN_KEY__", json.dumps(TOKEN_STORAGE_KEY))
        .replace("__ROLES__", json.dumps([role.value for role in Role]))
        .replace("__POLICIES__", json.dumps([policy.value for policy in Policy]))
    )
    style = _static("page.css")
    # The shell holds no data at all. The token input has no `name`, so even a form submitted without
    # the script would carry nothing, and `form-action 'none'` stops such a submission anyway.
    html = _static("page.html").replace("__STYLE__", style).replace("__SCRIPT_INTEGRITY__", _digest("sha384", script))
    csp = content_security_policy(_digest("sha256", style))
    return PageAssets(html=html, script=script, headers={"Content-Security-Policy": csp, **HEADERS})


def is_open(request: Request) -> bool:
    """Whether this request is for the page's shell or script: the admin routes that need no token."""
    return request.method == "GET" and route_path(request.scope) in OPEN_ROUTES


def add_page_routes(app: FastAPI) -> None:
    """`GET /ui` and `GET /ui.js` on the admin app; `is_open` lets them past its token check."""
    page = page_assets()

    @app.get(UI_ROUTE, include_in_schema=False)
    async def operator_page() -> Response:
        return Response(page.html, media_type="text/html", headers=dict(page.headers))

    @app.get(UI_SCRIPT_ROUTE, include_in_schema=False)
    async def operator_script() -> Response:
        return Response(page.script, media_type="text/javascript", headers=dict(page.headers))
