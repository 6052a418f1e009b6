"""The compatibility gate (DESIGN §5): a provider serves only after its vectors match the space.

Pure asyncio logic over an injected clock; no Ray, no HTTP. A probe embeds PROBE_TEXTS over a
candidate and over a reference (or against stored vectors: the drift sentinel, DESIGN §12) and
checks, in this order: upstream pin → reference embeds → candidate embeds → width → row count →
cosine of every matching pair (min ≥ MIN_COSINE).

A sole cloud provider has no counterpart: it is verified on width and pin only, and says so
(coverage `width-and-pin-only`, no cosine — never a fake 1.0).

The verdicts are kept by `cluster.gate.ledger.GateLedger`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from pydantic import Field, field_validator, model_validator

from cluster.errors import SamespaceError, WidthMismatch
from cluster.types import Clock, Strict

__all__ = [
    "MIN_COSINE",
    "PROBE_TEXTS",
    "PROBE_TIMEOUT_S",
    "STORED_REFERENCE",
    "Coverage",
    "GateKey",
    "GateReport",
    "ProbeTarget",
    "Regime",
    "Verdict",
    "compare",
    "describe_fault",
    "probe",
    "reference_report",
]

MIN_COSINE = 0.99
PROBE_TIMEOUT_S = 15.0
STORED_REFERENCE = "stored-vectors"  # `reference` of a report probed against stored vectors alone
_DETAIL_MAX_CHARS = 240

# Short and structurally varied, to exercise tokenizer and pooling differences (DESIGN §5).
PROBE_TEXTS: tuple[str, ...] = (
    "def normalize(v):\n    n = math.sqrt(sum(x * x for x in v))\n    return [x / n for x in v]",
    'f, err := os.Open(path)\nif err != nil {\n\treturn nil, fmt.Errorf("open %s: %w", path, err)\n}',
    "export class LruCache<K, V> {\n  private items = new Map<K, V>();\n  constructor(private max: number) {}\n}",
    "pub fn checksum(bytes: &[u8]) -> u32 {\n    bytes.iter().fold(0u32, |acc, b| acc.wrapping_add(*b as u32))\n}",
    "SELECT repo, COUNT(*) AS chunks FROM points WHERE language = 'go' GROUP BY repo ORDER BY chunks DESC;",
    "public Optional<User> findById(long id) {\n    return users.stream().filter(u -> u.getId() == id).findFirst();\n}",
    "The documentation cache is refreshed every hour, so a page you just edited may look stale for a while.",
    "git log --oneline --since=2.weeks -- src/ | head -n 20",
    "## Migrating to v2\n\nThe `index` command now takes `--repo` instead of a positional path.",
    '{"role": "code-embedding", "policy": "aggregate", "upstream": "nebius", "width": 384}',
)


class Verdict(StrEnum):
    VERIFIED = "verified"
    NO_PROVIDER_PIN = "no-provider-pin"
    DIMENSION_MISMATCH = "dimension-mismatch"
    VECTOR_INCOMPATIBLE = "vector-incompatible"
    PROBE_FAILED = "probe-failed"

    @property
    def transient(self) -> bool:
        """Only a failed probe is retried (with backoff); every other verdict stands for its key."""
        return self is Verdict.PROBE_FAILED


class Regime(StrEnum):
    LOCAL_REF = "local-ref"  # local / aggregate / backup: the reference is a local provider
    CLOUD_REF = "cloud-ref"  # cloud: the reference is another cloud provider of the same model


class Coverage(StrEnum):
    COSINE = "cosine"  # every matching pair compared against a reference
    WIDTH_AND_PIN_ONLY = "width-and-pin-only"  # no counterpart: a named coverage loss (DESIGN §5)
    REFERENCE = "reference"  # this provider is the reference: it defines the space


@dataclass(frozen=True)
class ProbeTarget:
    """One provider as the gate sees it: who it is, and how to embed texts through it."""

    name: str
    model: str
    upstream: str | None
    needs_pin: bool  # cloud embedding providers need a pinned upstream; local ones don't
    embed: Callable[[list[str]], Awaitable[np.ndarray]] = field(repr=False, compare=False)


class GateKey(Strict):
    """What a verdict is about: a change of any field means a new check (DESIGN §5)."""

    provider: str
    model: str
    upstream: str | None
    regime: Regime

    @classmethod
    def of(cls, target: ProbeTarget, regime: Regime) -> GateKey:
        return cls(provider=target.name, model=target.model, upstream=target.upstream, regime=regime)

    def __str__(self) -> str:
        return f"{self.provider}|{self.model}|{self.upstream or '-'}|{self.regime.value}"


class GateReport(Strict):
    """One verdict, with what was measured. Never carries probe texts or keys."""

    key: GateKey
    verdict: Verdict
    coverage: Coverage | None = Field(description="How much was checked; None unless verified.")
    reference: str | None = Field(description="The reference's name; None for an anchor or the reference itself.")
    min_cosine: float | None = Field(description="None when no cosine was computed (never a fake 1.0).")
    mean_cosine: float | None
    width: int | None = Field(description="Width the candidate returned; None when it returned nothing.")
    expected_width: int = Field(ge=0, description="The index's width; 0 only when a run raised before saying.")
    checked_at: float = Field(description="Clock time of the verdict.")
    detail: str = Field(description="One line on why; never texts or keys.")

    @field_validator("detail")
    @classmethod
    def _one_line(cls, value: str) -> str:
        return _clip(value)

    @model_validator(mode="after")
    def _consistent(self) -> GateReport:
        if (self.coverage is None) == (self.verdict is Verdict.VERIFIED):
            raise ValueError(f"verdict {self.verdict.value!r} with coverage {self.coverage}: coverage iff verified")
        if (self.min_cosine is None) != (self.mean_cosine is None):
            raise ValueError("min_cosine and mean_cosine are reported together or not at all")
        if self.coverage is not None and (self.coverage is Coverage.COSINE) != (self.min_cosine is not None):
            raise ValueError(f"coverage {self.coverage.value!r} and min_cosine {self.min_cosine} disagree")
        return self

    def line(self) -> str:
        """One log line: who, what was checked, what came out."""
        k = self.key
        return (
            f"gate {k.provider} {k.model}@{k.upstream or '-'} [{k.regime.value}] {self.verdict.value}"
            f" coverage={self.coverage.value if self.coverage else '-'}"
            f" min={_fmt(self.min_cosine)} mean={_fmt(self.mean_cosine)}"
            f" width={self.width if self.width is not None else '-'}/{self.expected_width}"
            f" reference={self.reference or '-'}: {self.detail}"
        )


def compare(candidate_vectors: np.ndarray, reference_vectors: np.ndarray) -> tuple[float, float]:
    """(min, mean) cosine of matching rows; both sides are normalised first."""
    cand = np.asarray(candidate_vectors, dtype=np.float64)
    ref = np.asarray(reference_vectors, dtype=np.float64)
    if cand.ndim != 2 or cand.shape != ref.shape or cand.shape[0] == 0:
        raise ValueError(f"cannot compare shapes {cand.shape} and {ref.shape}")
    cand_norms = np.linalg.norm(cand, axis=1)
    ref_norms = np.linalg.norm(ref, axis=1)
    if not (_usable(cand, cand_norms) and _usable(ref, ref_norms)):
        raise ValueError("rows must be finite and non-zero to have a cosine")
    cosines = np.einsum("ij,ij->i", cand / cand_norms[:, None], ref / ref_norms[:, None])
    return float(cosines.min()), float(cosines.mean())


@dataclass(frozen=True)
class _Reporter:
    """Makes the reports of one probe: who was probed, against whom, for which width, when."""

    key: GateKey
    reference: str | None
    expected_width: int
    clock: Clock

    def __call__(
        self,
        verdict: Verdict,
        detail: str,
        *,
        coverage: Coverage | None = None,
        width: int | None = None,
        cosines: tuple[float, float] | None = None,
    ) -> GateReport:
        return GateReport(
            key=self.key,
            verdict=verdict,
            coverage=coverage,
            reference=self.reference,
            min_cosine=cosines[0] if cosines else None,
            mean_cosine=cosines[1] if cosines else None,
            width=width,
            expected_width=self.expected_width,
            checked_at=self.clock(),
            detail=detail,
        )


async def probe(
    candidate: ProbeTarget,
    reference: ProbeTarget | None,
    *,
    regime: Regime,
    expected_width: int,
    clock: Clock,
    reference_vectors: np.ndarray | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> GateReport:
    """Probe `candidate` against `reference` (or against stored `reference_vectors`) — DESIGN §5 order.

    With stored vectors no reference is embedded; `reference`, if also given, only names them.
    With neither, the candidate is checked on pin and width only.
    """
    ref_name = reference.name if reference is not None else None
    if ref_name is None and reference_vectors is not None:
        ref_name = STORED_REFERENCE
    report = _Reporter(GateKey.of(candidate, regime), ref_name, expected_width, clock)

    # 1. upstream pin: an unpinned cloud embedding route is never even probed (DESIGN §6)
    if candidate.needs_pin and not candidate.upstream:
        return report(Verdict.NO_PROVIDER_PIN, "no pinned upstream: not probed")

    # 2. reference embeds the probes (unless stored vectors stand in for it)
    ref_vectors = await _reference_vectors(reference, reference_vectors, report, timeout_s)
    if isinstance(ref_vectors, GateReport):
        return ref_vectors

    # 3. candidate embeds
    vectors = await _candidate_vectors(candidate, report, timeout_s)
    if isinstance(vectors, GateReport):
        return vectors
    return _verdict(vectors, ref_vectors, report)


async def _reference_vectors(
    reference: ProbeTarget | None, stored: np.ndarray | None, report: _Reporter, timeout_s: float
) -> np.ndarray | GateReport | None:
    """The reference's probe vectors (stored ones stand in for it), None with no reference, or the
    failed probe's report when the reference timed out, failed or returned unusable rows."""
    ref_vectors: np.ndarray | None = None
    if stored is not None:
        ref_vectors = np.asarray(stored)
    elif reference is not None:
        try:
            ref_vectors = np.asarray(await asyncio.wait_for(reference.embed(list(PROBE_TEXTS)), timeout_s))
        except TimeoutError:
            return report(Verdict.PROBE_FAILED, f"reference {reference.name} timed out after {timeout_s:g}s")
        except Exception as exc:  # noqa: BLE001 - any fault of the reference is a failed probe, named
            return report(Verdict.PROBE_FAILED, f"reference {reference.name} failed: {describe_fault(exc)}")
    if ref_vectors is not None:
        problem = _shape_problem(ref_vectors, report.expected_width)
        if problem:
            return report(Verdict.PROBE_FAILED, f"reference {report.reference} unusable: {problem}")
    return ref_vectors


async def _candidate_vectors(candidate: ProbeTarget, report: _Reporter, timeout_s: float) -> np.ndarray | GateReport:
    """The candidate's probe vectors as rows, or the report of a probe that failed or a width refused."""
    try:
        vectors = np.asarray(await asyncio.wait_for(candidate.embed(list(PROBE_TEXTS)), timeout_s))
    except TimeoutError:
        return report(Verdict.PROBE_FAILED, f"candidate timed out after {timeout_s:g}s")
    except WidthMismatch as exc:  # the client refused rows of the wrong width: that is the verdict
        detail = f"width {exc.got}, index wants {report.expected_width}"
        return report(Verdict.DIMENSION_MISMATCH, detail, width=exc.got)
    except Exception as exc:  # noqa: BLE001 - any other fault of the candidate is a failed probe, named
        return report(Verdict.PROBE_FAILED, f"candidate failed: {describe_fault(exc)}")
    if vectors.ndim != 2:
        return report(Verdict.PROBE_FAILED, f"candidate returned an array of shape {vectors.shape}, not rows")
    return vectors


def _verdict(vectors: np.ndarray, ref_vectors: np.ndarray | None, report: _Reporter) -> GateReport:
    """Steps 4 to 7 over the candidate's rows: width, row count, and the cosine against the reference."""
    width, expected_width = int(vectors.shape[1]), report.expected_width

    # 4. width: never relaxed
    if width != expected_width:
        return report(Verdict.DIMENSION_MISMATCH, f"width {width}, index wants {expected_width}", width=width)

    # 5. one row per probe text
    if vectors.shape[0] != len(PROBE_TEXTS):
        return report(Verdict.PROBE_FAILED, f"{vectors.shape[0]} rows for {len(PROBE_TEXTS)} probe texts", width=width)
    if not _usable(vectors, np.linalg.norm(vectors.astype(np.float64), axis=1)):
        return report(Verdict.PROBE_FAILED, "candidate returned non-finite or zero rows", width=width)

    # 6. no counterpart: width and pin only, and said so
    if ref_vectors is None:
        return report(
            Verdict.VERIFIED,
            "no reference: width and pin only (a pinned upstream may still change behind the pin)",
            coverage=Coverage.WIDTH_AND_PIN_ONLY,
            width=width,
        )

    # 7. cosine of every matching pair
    cosines = compare(vectors, ref_vectors)
    if cosines[0] < MIN_COSINE:
        detail = f"min cosine {cosines[0]:.4f} < {MIN_COSINE} against {report.reference}"
        return report(Verdict.VECTOR_INCOMPATIBLE, detail, width=width, cosines=cosines)
    detail = f"min cosine {cosines[0]:.4f} >= {MIN_COSINE} against {report.reference}"
    return report(Verdict.VERIFIED, detail, coverage=Coverage.COSINE, width=width, cosines=cosines)


def reference_report(target: ProbeTarget, *, regime: Regime, expected_width: int, clock: Clock) -> GateReport:
    """The reference defines the space: verified without a probe (still refused if it lacks a needed pin)."""
    unpinned = target.needs_pin and not target.upstream
    return GateReport(
        key=GateKey.of(target, regime),
        verdict=Verdict.NO_PROVIDER_PIN if unpinned else Verdict.VERIFIED,
        coverage=None if unpinned else Coverage.REFERENCE,
        reference=None,
        min_cosine=None,
        mean_cosine=None,
        width=None,
        expected_width=expected_width,
        checked_at=clock(),
        detail="no pinned upstream: cannot be the reference" if unpinned else "the reference: defines the space",
    )


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _usable(rows: np.ndarray, norms: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(rows)) and np.all(norms > 0) and np.all(np.isfinite(norms)))


def _shape_problem(vectors: np.ndarray, expected_width: int) -> str | None:
    if vectors.ndim != 2 or vectors.shape != (len(PROBE_TEXTS), expected_width):
        return f"shape {vectors.shape}, wanted ({len(PROBE_TEXTS)}, {expected_width})"
    if not _usable(vectors, np.linalg.norm(vectors.astype(np.float64), axis=1)):
        return "non-finite or zero rows"
    return None


_SECRET_LIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{6,}|Bearer\s+\S+)")


def describe_fault(exc: BaseException) -> str:
    """Our own errors carry vetted messages; anything else is named by type only (it may echo input)."""
    if isinstance(exc, SamespaceError):
        return f"{type(exc).__name__}: {exc}"
    return type(exc).__name__


def _clip(text: str) -> str:
    """One line, bounded, with no probe text and nothing that looks like a key."""
    for probe_text in PROBE_TEXTS:
        text = text.replace(probe_text, "<probe text>")
    text = _SECRET_LIKE.sub("<redacted>", text)
    text = " ".join(text.split())
    if len(text) > _DETAIL_MAX_CHARS:
        text = text[: _DETAIL_MAX_CHARS - 1] + "…"
    return text
