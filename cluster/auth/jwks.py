"""The issuer's signing keys: where they are (auth.jwks_url, else the issuer's metadata), fetching them
over HTTP, and the cache that lets keys rotate without a fetch storm.

Discovery tries `<issuer>/.well-known/openid-configuration` (OpenID Connect Discovery), then RFC 8414's
`/.well-known/oauth-authorization-server` (the path inserted after the host for an issuer with a path),
then OpenID's path-inserted form; a document that answers must name exactly `auth.issuer`, or the
keys are refused (a metadata document of another issuer is never trusted).

The cache (`SigningKeys`): a key set is trusted for `auth.jwks_cache_s` (never less than
`auth.jwks_refresh_min_s`); a token whose `kid` is not in it asks for one refetch, and no fetch starts
within `auth.jwks_refresh_min_s` of the previous one, so a burst of tokens with unknown kids costs one
fetch. Concurrent callers share one fetch. A failed fetch keeps what is cached (until it expires) and
is not retried before the same interval: when no trusted key set is left, every token is refused
(fail closed). Keys named by a token (`jku`, `x5u`, `jwk` headers) are never fetched or used.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from jwt import PyJWK
from jwt.exceptions import PyJWTError

from cluster.errors import TokenRejected
from cluster.settings import AuthSettings

__all__ = [
    "MAX_BODY_BYTES",
    "FetchFailed",
    "FetchJson",
    "SigningKeys",
    "http_json_fetcher",
    "metadata_urls",
]

log = logging.getLogger("samespace.auth")

FetchJson = Callable[[str], Awaitable[dict[str, Any]]]
MAX_BODY_BYTES = 1024 * 1024  # a metadata document or key set larger than this is refused
MAX_REDIRECTS = 3
KEYS_UNAVAILABLE = "signing keys unavailable"
_KEY_TYPES = frozenset({"RSA", "EC", "OKP"})  # public-key types; `oct` (a shared secret) is never a signing key


class FetchFailed(Exception):
    """A metadata document or key set that could not be had as a JSON object (the verifier fails closed)."""

    def __init__(self, url: str, problem: str) -> None:
        super().__init__(url, problem)
        self.url = url
        self.problem = problem

    def __str__(self) -> str:
        return f"GET {self.url}: {self.problem}"


def http_json_fetcher(timeout_s: float, *, max_bytes: int = MAX_BODY_BYTES) -> FetchJson:
    """The production `fetch_json`: an HTTP GET answered by a JSON object within `timeout_s` in all,
    following at most MAX_REDIRECTS redirects and only to http(s) URLs that never leave https; a body
    over `max_bytes`, a non-2xx answer or anything but a JSON object raises FetchFailed."""

    async def fetch_json(url: str) -> dict[str, Any]:
        try:
            async with asyncio.timeout(timeout_s), httpx.AsyncClient(timeout=timeout_s) as client:
                return await _get_json(client, url, max_bytes)
        except TimeoutError:
            raise FetchFailed(url, f"no answer within {timeout_s:g} s") from None
        except httpx.HTTPError as error:
            raise FetchFailed(url, type(error).__name__) from None

    return fetch_json


async def _get_json(client: httpx.AsyncClient, url: str, max_bytes: int) -> dict[str, Any]:
    current = httpx.URL(url)
    for _ in range(MAX_REDIRECTS + 1):
        async with client.stream("GET", current, headers={"Accept": "application/json"}) as response:
            if response.is_redirect:
                target = current.join(response.headers.get("location", ""))
                if target.scheme not in ("https", "http") or (current.scheme == "https" and target.scheme != "https"):
                    raise FetchFailed(url, f"redirect to a {target.scheme or 'relative'} URL refused")
                current = target
                continue
            if not response.is_success:
                raise FetchFailed(url, f"HTTP {response.status_code}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise FetchFailed(url, f"body over {max_bytes} bytes")
        try:
            document = json.loads(bytes(body))
        except (ValueError, RecursionError):
            raise FetchFailed(url, "not JSON") from None
        if not isinstance(document, dict):
            raise FetchFailed(url, "not a JSON object")
        return document
    raise FetchFailed(url, f"more than {MAX_REDIRECTS} redirects")


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be, in the order tried (OpenID appended, RFC 8414 inserted,
    OpenID inserted; the last two are one URL for an issuer without a path)."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")

    def inserted(well_known: str) -> str:
        return urlunsplit((parts.scheme, parts.netloc, f"/.well-known/{well_known}{path}", "", ""))

    urls = [issuer.rstrip("/") + "/.well-known/openid-configuration", inserted("oauth-authorization-server")]
    if path:
        urls.append(inserted("openid-configuration"))
    return urls


class _KeySet:
    """One fetched JWKS: its usable public keys (raw JWKs) and the PyJWK built for each (key, alg)."""

    def __init__(self, keys: list[dict[str, Any]]) -> None:
        self.keys = keys
        self._built: dict[tuple[int, str], PyJWK | None] = {}

    def candidates(self, kid: str | None) -> list[int] | None:
        """The keys a token's `kid` may name (None: that kid is not in this set); a token without a kid
        may use the only key of a set that holds exactly one."""
        if kid is None:
            return [0] if len(self.keys) == 1 else []
        found = [i for i, key in enumerate(self.keys) if key.get("kid") == kid]
        return found or None

    def build(self, index: int, algorithm: str) -> PyJWK | None:
        """The key bound to `algorithm`, or None when the key's own `alg` or type does not allow it."""
        if (index, algorithm) not in self._built:
            jwk = self.keys[index]
            built: PyJWK | None = None
            if jwk.get("alg") in (None, algorithm):
                try:
                    built = PyJWK(jwk, algorithm=algorithm)
                except (PyJWTError, ValueError, TypeError):
                    built = None
            self._built[(index, algorithm)] = built
        return self._built[(index, algorithm)]


def usable_keys(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The public signing keys of a JWKS document: `use` sig (or absent), `key_ops` allowing verify
    (or absent), an asymmetric type PyJWT can load, and no private part."""
    keys = document.get("keys")
    if not isinstance(keys, list):
        return []
    usable = []
    for key in keys:
        if not isinstance(key, dict) or key.get("kty") not in _KEY_TYPES or "d" in key:
            continue
        if key.get("use", "sig") != "sig" or not isinstance(key.get("kid", ""), str):
            continue
        ops = key.get("key_ops")
        if ops is not None and (not isinstance(ops, list) or "verify" not in ops):
            continue
        try:
            PyJWK(key)
        except (PyJWTError, ValueError, TypeError):
            continue
        usable.append(key)
    return usable


class SigningKeys:
    """The issuer's current public keys, cached (see the module doc for when they are fetched)."""

    def __init__(self, auth: AuthSettings, *, fetch_json: FetchJson, clock: Callable[[], float]) -> None:
        if auth.issuer is None:
            raise ValueError("SigningKeys needs auth.issuer")
        self._issuer = auth.issuer
        self._configured_url = auth.jwks_url
        self._discovered_url: str | None = None
        self._cache_s = max(auth.jwks_cache_s, auth.jwks_refresh_min_s)
        self._refresh_min_s = auth.jwks_refresh_min_s
        self._fetch_json = fetch_json
        self._clock = clock
        self._keys: _KeySet | None = None
        self._fetched_at = 0.0
        self._attempted_at: float | None = None
        self._generation = 0  # attempts made: a caller that waited for another's fetch does not fetch again
        self._problem = KEYS_UNAVAILABLE  # why the last attempt failed, as a token's refusal says it
        self._lock = asyncio.Lock()

    async def key_for(self, kid: str | None, algorithm: str) -> list[PyJWK]:
        """The keys that may have signed a token with this `kid` and `alg` (more than one only when the
        issuer publishes one kid twice); raises TokenRejected when there is none."""
        keys = await self._trusted()
        found = keys.candidates(kid)
        if found is None:  # an unknown kid: the issuer may have rotated its keys since the last fetch
            await self._refresh()
            keys = self._usable() or keys
            found = keys.candidates(kid)
        if found is None:
            raise TokenRejected("unknown signing key")
        if not found:
            raise TokenRejected("no key id (kid), and the issuer publishes more than one key")
        built = [key for key in (keys.build(i, algorithm) for i in found) if key is not None]
        if not built:
            raise TokenRejected("the signing key does not allow the token's algorithm")
        return built

    async def _trusted(self) -> _KeySet:
        keys = self._usable()
        if keys is None or self._clock() - self._fetched_at >= self._cache_s:
            await self._refresh()
            keys = self._usable()
        if keys is None:
            raise TokenRejected(self._problem)
        return keys

    def _usable(self) -> _KeySet | None:
        """The cached set while it is trusted, else None."""
        if self._keys is None or self._clock() - self._fetched_at >= self._cache_s:
            return None
        return self._keys

    async def _refresh(self) -> None:
        """Fetch the key set, unless another caller did while this one waited, or the last attempt was
        under jwks_refresh_min_s ago; a failure is logged (never raised) and keeps what is cached."""
        generation = self._generation
        async with self._lock:
            now = self._clock()
            if self._generation != generation:
                return
            if self._attempted_at is not None and now - self._attempted_at < self._refresh_min_s:
                return
            self._attempted_at = now
            try:
                document = await self._fetch_json(await self._jwks_url())
                keys = usable_keys(document)
                if not keys:
                    raise FetchFailed(self._configured_url or self._discovered_url or "", "no usable signing key")
            except TokenRejected as refused:  # the metadata names another issuer, or no usable key URL
                log.warning("auth: the issuer's metadata was refused: %s", refused.reason)
                self._problem = f"{KEYS_UNAVAILABLE} ({refused.reason})"
                return
            except Exception as error:  # noqa: BLE001 - any failure to get keys refuses tokens (fail closed)
                log.warning("auth: the issuer's signing keys could not be fetched: %s", _describe(error))
                self._problem = KEYS_UNAVAILABLE
                self._discovered_url = None  # discover again next time: the issuer may have moved them
                return
            finally:
                self._generation += 1
            self._keys = _KeySet(keys)
            self._fetched_at = self._clock()

    async def _jwks_url(self) -> str:
        if self._configured_url is not None:
            return self._configured_url
        if self._discovered_url is None:
            self._discovered_url = await self._discover()
        return self._discovered_url

    async def _discover(self) -> str:
        """`jwks_uri` of the first metadata document that answers; TokenRejected when it is another
        issuer's, or names keys outside https for an https issuer."""
        failures = []
        for url in metadata_urls(self._issuer):
            try:
                metadata = await self._fetch_json(url)
            except Exception as error:  # noqa: BLE001 - a location that does not answer: try the next
                failures.append(_describe(error))
                continue
            if metadata.get("issuer") != self._issuer:
                raise TokenRejected("the issuer's metadata names another issuer")
            jwks_uri = metadata.get("jwks_uri")
            if not isinstance(jwks_uri, str) or not _allowed_key_url(self._issuer, jwks_uri):
                raise TokenRejected("the issuer's metadata has no usable jwks_uri")
            return jwks_uri
        raise FetchFailed(self._issuer, "no metadata document answered: " + "; ".join(failures))


def _allowed_key_url(issuer: str, url: str) -> bool:
    scheme = urlsplit(url).scheme
    return scheme == "https" or (scheme == "http" and urlsplit(issuer).scheme == "http")


def _describe(error: BaseException) -> str:
    """A fetch failure for the log: our own message, else the error's type (an HTTP client's message
    may quote a URL or body, never a token, but keep the line short)."""
    return str(error) if isinstance(error, FetchFailed) else type(error).__name__
