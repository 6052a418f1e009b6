"""Who a sidecar agent is: its normalised agent URL, an id the master issues at registration, and
a per-agent credential (a random secret; the master keeps only its sha256)."""

from __future__ import annotations

import hashlib
import secrets
from urllib.parse import urlsplit

AGENT_ID_BYTES = 6  # 12 hex characters: readable in a provider name, never guessed (credentials guard the agent)
CREDENTIAL_BYTES = 32
# Agent URL schemes: the peer's http(s), the WebSocket spellings of the same endpoint, and the
# reference sidecar's default `sidecar://<hostname>`.
AGENT_SCHEMES = {"http": "http", "https": "https", "ws": "http", "wss": "https", "sidecar": "sidecar"}
DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise_agent_url(raw: str) -> str:
    """One spelling per agent endpoint: lower-case scheme and host, ws(s) as http(s), no default port,
    no trailing slash. ValueError (naming the rule, not echoing the input) for credentials in the URL
    (`user@`), a query or fragment, an unknown scheme, no host or a bad port."""
    try:
        parts = urlsplit(raw.strip())
        port = parts.port
    except ValueError:
        raise ValueError("not a URL with a valid host and port") from None
    scheme = AGENT_SCHEMES.get(parts.scheme.lower())
    if scheme is None:
        raise ValueError(f"the scheme must be one of {', '.join(sorted(AGENT_SCHEMES))}")
    if "@" in parts.netloc:
        raise ValueError("credentials (user@) are not allowed in an agent URL")
    if parts.query or parts.fragment or "?" in raw or "#" in raw:
        raise ValueError("an agent URL has no query or fragment")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise ValueError("an agent URL needs a host")
    where = f"[{host}]" if ":" in host else host
    if port is not None and port != DEFAULT_PORTS.get(scheme):
        where = f"{where}:{port}"
    return f"{scheme}://{where}{parts.path.rstrip('/')}"


def credential_digest(credential: str) -> str:
    """The sha256 hex of an agent credential: what the master keeps and compares."""
    return hashlib.sha256(credential.encode("utf-8")).hexdigest()


def new_agent_id() -> str:
    return secrets.token_hex(AGENT_ID_BYTES)


def new_credential() -> str:
    return secrets.token_urlsafe(CREDENTIAL_BYTES)
