"""The samespace error tree. Every exception pickles across actors (all args passed up).

SamespaceError
 ├── ConfigError              a setting or config file is invalid
 ├── StoreError               the vector store refused an operation
 │    └── CollectionNotFound  a collection or alias does not exist
 ├── IndexNotFound            no index of that name (lists the ones that exist)
 ├── EncoderMismatch          a query vector from another encoder space (DESIGN §10)
 ├── WidthMismatch            a vector of the wrong width
 ├── BuildConflict            another build of the same index is in progress
 ├── UnknownLanguage          a language filter no chunker produces
 ├── UpstreamError            a cloud (OpenRouter) call failed; contained to its provider
 │    ├── RateLimited         429 (and 402 in-flight budget): retry after `retry_after_s`
 │    ├── PaymentRequired     402: credits or key limit exhausted
 │    ├── AuthFailed          401/403: the key is missing, wrong or not allowed
 │    ├── UpstreamUnavailable 5xx / 529: the upstream is down or overloaded
 │    ├── UpstreamTimeout     no answer in time
 │    ├── MalformedResponse   a body that does not parse into the expected shape
 │    └── MissingPin          an embedding route without a pinned upstream (refused, never sent)
 ├── SpendCapReached          a role reached its daily cloud spend cap (until 00:00 UTC)
 ├── NoProviderLeft           every provider of a role failed or none is eligible
 ├── BudgetUnavailable        no cloud permit within the bounded wait (budget saturated or gone)
 ├── GateRefused              a provider failed (or was evicted by) the compatibility gate
 ├── ReadRefused              read_code outside the indexed repository, or unknown file
 ├── ScanError                the repository root cannot be walked (missing, unreadable)
 ├── RefNotFound              a git ref that does not name a commit of the repository
 ├── PathRefused              a path a client may not index (outside the allowed roots, or never indexable)
 ├── IndexRefused             an index name an MCP client may not take, refresh or remove
 ├── ShrinkRefused            a build would drop too much of the serving index (--allow-shrink)
 ├── CloudKeyMissing          a role's policy needs the OpenRouter key and no container holds one
 ├── LimitExceeded           an input over a `limits` cap (the message names the setting)
 ├── PatternRefused          a grep pattern the linear-time engine refuses (names the construct)
 ├── CursorExpired           a page cursor of an answer the index no longer holds (rebuilt since)
 ├── AccessDenied            a caller without the scope an operation needs, or not the index's owner
 ├── QuotaExceeded           a caller over a per-person quota (requests a minute, cloud credits a day)
 └── TokenRejected           an OAuth access token the resource server does not accept (says why, never the token)
"""

from __future__ import annotations

from collections.abc import Sequence


class SamespaceError(Exception):
    """Root of every error samespace raises on purpose."""


def original_error(exc: SamespaceError) -> SamespaceError:
    """The error itself, not Ray's wrapper: an error raised inside an actor arrives as a RayTaskError
    that is also the cause's type, and its str() carries the remote traceback; its `cause` does not."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, SamespaceError) else exc


class ConfigError(SamespaceError):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(field, problem)
        self.field = field
        self.problem = problem

    def __str__(self) -> str:
        return f"config field {self.field!r}: {self.problem}"


class StoreError(SamespaceError):
    def __init__(self, operation: str, detail: str) -> None:
        super().__init__(operation, detail)
        self.operation = operation
        self.detail = detail

    def __str__(self) -> str:
        return f"vector store {self.operation} failed: {self.detail}"


class CollectionNotFound(StoreError):
    def __init__(self, name: str) -> None:
        super().__init__("lookup", name)
        self.args = (name,)
        self.name = name

    def __str__(self) -> str:
        return f"collection or alias {self.name!r} does not exist"


class IndexNotFound(SamespaceError):
    def __init__(self, name: str, known: Sequence[str]) -> None:
        super().__init__(name, list(known))
        self.name = name
        self.known = list(known)

    def __str__(self) -> str:
        known = ", ".join(sorted(self.known)) or "none"
        return f"unknown repo {self.name!r}; indexed repos: {known}"


class EncoderMismatch(SamespaceError):
    """A query vector was produced in a different encoder space than the index's."""

    def __init__(self, index: str, index_space: str, query_space: str) -> None:
        super().__init__(index, index_space, query_space)
        self.index = index
        self.index_space = index_space
        self.query_space = query_space

    def __str__(self) -> str:
        return (
            f"index {self.index!r} lives in encoder space {self.index_space}; "
            f"the query was embedded in {self.query_space}: refused, never answered from a mixed space. "
            f"If the encoder changed, reindex {self.index!r} with the current one"
        )


class WidthMismatch(SamespaceError):
    def __init__(self, source: str, expected: int, got: int) -> None:
        super().__init__(source, expected, got)
        self.source = source
        self.expected = expected
        self.got = got

    def __str__(self) -> str:
        return f"{self.source}: expected vectors of width {self.expected}, got {self.got}"


class BuildConflict(SamespaceError):
    def __init__(self, index: str, build: str) -> None:
        super().__init__(index, build)
        self.index = index
        self.build = build

    def __str__(self) -> str:
        return f"index {self.index!r} is already being built by {self.build!r}"


class UnknownLanguage(SamespaceError):
    def __init__(self, language: str, known: Sequence[str]) -> None:
        super().__init__(language, list(known))
        self.language = language
        self.known = list(known)

    def __str__(self) -> str:
        return f"language {self.language!r} is not known; use one of: {', '.join(self.known)}"


class UpstreamError(SamespaceError):
    """A cloud call failed. `provider` names who failed; messages never carry a key."""

    def __init__(self, provider: str, detail: str, status: int | None = None) -> None:
        super().__init__(provider, detail, status)
        self.provider = provider
        self.detail = detail
        self.status = status

    def __str__(self) -> str:
        status = f" (HTTP {self.status})" if self.status is not None else ""
        return f"{type(self).__name__} from {self.provider}{status}: {self.detail}"


class RateLimited(UpstreamError):
    def __init__(
        self, provider: str, detail: str, status: int | None = 429, retry_after_s: float | None = None
    ) -> None:
        super().__init__(provider, detail, status)
        self.args = (provider, detail, status, retry_after_s)
        self.retry_after_s = retry_after_s


class PaymentRequired(UpstreamError):
    pass


class AuthFailed(UpstreamError):
    pass


class UpstreamUnavailable(UpstreamError):
    pass


class UpstreamTimeout(UpstreamError):
    pass


class MalformedResponse(UpstreamError):
    pass


class MissingPin(UpstreamError):
    pass


class SpendCapReached(SamespaceError):
    """A role reached its daily cloud spend cap: no more cloud calls for it until the UTC day turns
    (local providers carry on under `aggregate` and `backup`; under `cloud` the call fails)."""

    def __init__(self, role: str, cap: float, spent: float, resets_at: str) -> None:
        super().__init__(role, cap, spent, resets_at)
        self.role = role
        self.cap = cap
        self.spent = spent
        self.resets_at = resets_at

    def __str__(self) -> str:
        return (
            f"role {self.role!r} reached its daily cloud spend cap ({self.spent:.6g} of {self.cap:.6g} credits); "
            f"no cloud calls for it until {self.resets_at} (raise the cap with PUT /admin/budget/caps)"
        )


class NoProviderLeft(SamespaceError):
    def __init__(self, role: str, reasons: Sequence[str]) -> None:
        super().__init__(role, list(reasons))
        self.role = role
        self.reasons = list(reasons)

    def __str__(self) -> str:
        return f"no provider left for role {self.role!r}: " + ("; ".join(self.reasons) or "none eligible")


class BudgetUnavailable(SamespaceError):
    def __init__(self, project: str, waited_s: float, detail: str) -> None:
        super().__init__(project, waited_s, detail)
        self.project = project
        self.waited_s = waited_s
        self.detail = detail

    def __str__(self) -> str:
        return f"no cloud permit for project {self.project!r} after {self.waited_s:.0f}s: {self.detail}"


class GateRefused(SamespaceError):
    """A provider failed the compatibility gate (DESIGN §5); it must not serve."""

    def __init__(self, provider: str, verdict: str, detail: str = "") -> None:
        super().__init__(provider, verdict, detail)  # every argument, so it pickles across actors
        self.provider = provider
        self.verdict = verdict
        self.detail = detail

    def __str__(self) -> str:
        detail = f" ({self.detail})" if self.detail else ""
        return f"provider {self.provider!r} refused by the gate: {self.verdict}{detail}"


class ReadRefused(SamespaceError):
    def __init__(self, repo: str, path: str, reason: str) -> None:
        super().__init__(repo, path, reason)
        self.repo = repo
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"cannot read {self.path!r} in repo {self.repo!r}: {self.reason}"


class ScanError(SamespaceError):
    """The repository root cannot be walked: a reindex must fail rather than see an empty repo."""

    def __init__(self, root: str, detail: str) -> None:
        super().__init__(root, detail)
        self.root = root
        self.detail = detail

    def __str__(self) -> str:
        return f"cannot scan the repository at {self.root!r}: {self.detail}"


class RefNotFound(SamespaceError):
    """A ref (branch, tag, commit) to index that the repository's git does not resolve to a commit."""

    def __init__(self, repo: str, ref: str, detail: str) -> None:
        super().__init__(repo, ref, detail)
        self.repo = repo
        self.ref = ref
        self.detail = detail

    def __str__(self) -> str:
        return f"cannot index ref {self.ref!r} of {self.repo!r}: {self.detail}"


class PathRefused(SamespaceError):
    """A folder a client asked to index and may not: `setting` names what decides it."""

    def __init__(self, path: str, reason: str, setting: str) -> None:
        super().__init__(path, reason, setting)
        self.path = path
        self.reason = reason
        self.setting = setting

    def __str__(self) -> str:
        return f"refusing to index {self.path!r}: {self.reason} (see {self.setting})"


class IndexRefused(SamespaceError):
    """An index an MCP client may not take, refresh or remove: the reason never names another folder."""

    def __init__(self, index: str, reason: str) -> None:
        super().__init__(index, reason)
        self.index = index
        self.reason = reason

    def __str__(self) -> str:
        return f"refusing index {self.index!r}: {self.reason}"


class ShrinkRefused(SamespaceError):
    """A build would replace a serving index with one missing too many of its files."""

    def __init__(self, index: str, serving_files: int, new_files: int, max_share: float) -> None:
        super().__init__(index, serving_files, new_files, max_share)
        self.index = index
        self.serving_files = serving_files
        self.new_files = new_files
        self.max_share = max_share

    def __str__(self) -> str:
        dropped = self.serving_files - self.new_files
        return (
            f"refusing to shrink index {self.index!r} from {self.serving_files} to {self.new_files} files "
            f"({dropped} dropped; at most {self.max_share:.0%} may go): check the repository path and that it is "
            "mounted and readable, or rerun with --allow-shrink if the files really are gone"
        )


class CloudKeyMissing(SamespaceError):
    """A role's policy needs the cloud and no virtual container holds the key (e.g. after a
    restart): the message is the one paragraph of cluster/cloud/key_readiness.py, with the ways out."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class LimitExceeded(SamespaceError):
    """An input over one of the `limits` caps (cluster/settings/limits.py): `setting` is the cap's
    name as `limit_name` spells it, so the refusal says what to raise."""

    def __init__(self, what: str, size: int, cap: int, setting: str) -> None:
        super().__init__(what, size, cap, setting)
        self.what = what
        self.size = size
        self.cap = cap
        self.setting = setting

    def __str__(self) -> str:
        return f"{self.what} ({self.size}) is over the cap of {self.cap}: see {self.setting}"


class PatternRefused(SamespaceError):
    """A grep_code pattern that cannot run: `reason` names the construct (RE2 has no look-around or
    back-references; it never matches across a line break)."""

    def __init__(self, pattern: str, reason: str) -> None:
        super().__init__(pattern, reason)
        self.pattern = pattern
        self.reason = reason

    def __str__(self) -> str:
        shown = self.pattern if len(self.pattern) <= 80 else self.pattern[:77] + "..."
        return f"pattern {shown!r} refused: {self.reason}"


class CursorExpired(SamespaceError):
    """A cursor that does not continue this answer: another query's, or the index was rebuilt since."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return f"cursor refused: {self.reason}; ask again without a cursor"


class AccessDenied(SamespaceError):
    """A caller without the scope an operation needs (`scope`: the scope to ask for), or who does not
    own the index it would change. Never raised for an index the caller may not read: that one is
    answered as an unknown index (IndexNotFound), so the answer does not say it exists."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason, scope)
        self.reason = reason
        self.scope = scope

    def __str__(self) -> str:
        return f"access denied: {self.reason}" + (f" (needs scope {self.scope!r})" if self.scope else "")


class QuotaExceeded(SamespaceError):
    """A caller over a per-person quota (`quotas.*`): `setting` names it; the others keep their share."""

    def __init__(self, subject: str, what: str, limit: float, setting: str, retry_after_s: float) -> None:
        super().__init__(subject, what, limit, setting, retry_after_s)
        self.subject = subject
        self.what = what
        self.limit = limit
        self.setting = setting
        self.retry_after_s = retry_after_s

    def __str__(self) -> str:
        return (
            f"quota exceeded for {self.subject!r}: {self.what} (limit {self.limit:g}, {self.setting}); "
            f"retry in {self.retry_after_s:.0f} s"
        )


class TokenRejected(SamespaceError):
    """An access token the resource server does not accept: `reason` says why (expired, another audience,
    another issuer, an unknown or wrong key, a refused algorithm, malformed); never the token itself."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return f"access token rejected: {self.reason}"
