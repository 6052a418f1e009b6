"""The compatibility gate's probe (DESIGN §5): the probe texts and enums, the order of checks and the
verdicts, timeouts on virtual time, reports and their log lines.

Fake providers (tests/support/gate_probes.py) return crafted rows; one module fixture loads the
packaged MiniLM to show the real model against itself passes and a perturbed copy at the peer's
~0.976 is refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import numpy as np
import pytest
from pydantic import ValidationError

from cluster.errors import UpstreamUnavailable
from cluster.gate.ledger import PROBE_BACKOFF_BASE_S, PROBE_BACKOFF_MAX_S
from cluster.gate.probe import (
    MIN_COSINE,
    PROBE_TEXTS,
    PROBE_TIMEOUT_S,
    STORED_REFERENCE,
    Coverage,
    GateKey,
    GateReport,
    ProbeTarget,
    Regime,
    Verdict,
    compare,
    probe,
    reference_report,
)
from tests.support.fakes.virtual_time import VirtualClock, run_virtual
from tests.support.gate_probes import WIDTH, Fake, FakeClock, N, cloud, local, run_probe, unit_rows, with_one_row_at

# --- the probe texts and the enums ------------------------------------------------------------


def test_there_are_ten_distinct_short_probe_texts_covering_code_prose_shell_and_markdown() -> None:
    assert len(PROBE_TEXTS) == 10 and len(set(PROBE_TEXTS)) == 10
    assert all(0 < len(t) < 200 for t in PROBE_TEXTS)
    joined = "\n".join(PROBE_TEXTS)
    for marker in ("def ", "if err != nil", "export class", "pub fn", "SELECT", "public ", "git ", "## ", '{"'):
        assert marker in joined


def test_verdicts_and_regimes_are_spelled_as_in_the_spec_and_only_probe_failed_is_transient() -> None:
    assert [v.value for v in Verdict] == [
        "verified",
        "no-provider-pin",
        "dimension-mismatch",
        "vector-incompatible",
        "probe-failed",
    ]
    assert [r.value for r in Regime] == ["local-ref", "cloud-ref"]
    assert [v for v in Verdict if v.transient] == [Verdict.PROBE_FAILED]
    assert MIN_COSINE == 0.99 and PROBE_TIMEOUT_S == 15.0
    assert (PROBE_BACKOFF_BASE_S, PROBE_BACKOFF_MAX_S) == (30.0, 900.0)


def test_a_gate_key_prints_provider_model_pin_and_regime_with_a_dash_for_no_pin() -> None:
    assert str(GateKey(provider="p", model="m", upstream="nebius", regime=Regime.CLOUD_REF)) == "p|m|nebius|cloud-ref"
    assert str(GateKey(provider="p", model="m", upstream=None, regime=Regime.LOCAL_REF)) == "p|m|-|local-ref"


# --- probe: order of checks and verdicts --------------------------------------------------------


async def test_an_unpinned_cloud_provider_is_refused_before_anything_is_embedded() -> None:
    candidate, reference = cloud(upstream=None), local()
    report = await run_probe(candidate, reference)
    assert report.verdict is Verdict.NO_PROVIDER_PIN
    assert candidate.calls == [] and reference.calls == []
    assert report.coverage is None and report.min_cosine is None


async def test_a_local_provider_needs_no_pin() -> None:
    report = await run_probe(local("gpu-1"), local())
    assert report.verdict is Verdict.VERIFIED and report.key.upstream is None


async def test_a_failing_reference_is_a_failed_probe_and_the_candidate_is_never_called() -> None:
    candidate = cloud()
    reference = local(error=UpstreamUnavailable("gpu-0", "down", 503))
    report = await run_probe(candidate, reference)
    assert report.verdict is Verdict.PROBE_FAILED and report.verdict.transient
    assert candidate.calls == [] and len(reference.calls) == 1
    assert "reference gpu-0" in report.detail


async def test_both_sides_embed_exactly_the_probe_texts_reference_first() -> None:
    order: list[str] = []
    candidate, reference = cloud(), local()

    def tracing(fake: Fake) -> Callable[[list[str]], Awaitable[np.ndarray]]:
        async def embed(texts: list[str]) -> np.ndarray:
            order.append(fake.name)
            return await fake.embed(texts)

        return embed

    await probe(
        ProbeTarget("cloud-a", "minilm", "nebius", True, tracing(candidate)),
        ProbeTarget("gpu-0", "minilm", None, False, tracing(reference)),
        regime=Regime.LOCAL_REF,
        expected_width=WIDTH,
        clock=FakeClock(),
    )
    assert order == ["gpu-0", "cloud-a"]
    assert candidate.calls == [list(PROBE_TEXTS)] == reference.calls


async def test_a_candidate_that_raises_is_a_failed_probe_naming_only_the_error_type() -> None:
    candidate = cloud(error=RuntimeError("echo: " + PROBE_TEXTS[0]))
    report = await run_probe(candidate, local())
    assert report.verdict is Verdict.PROBE_FAILED
    assert report.detail == "candidate failed: RuntimeError"


async def test_a_wrong_width_is_a_dimension_mismatch_even_when_the_rows_are_otherwise_fine() -> None:
    report = await run_probe(cloud(rows=unit_rows(width=WIDTH * 2)), local())
    assert report.verdict is Verdict.DIMENSION_MISMATCH
    assert (report.width, report.expected_width) == (WIDTH * 2, WIDTH)
    assert report.min_cosine is None and report.coverage is None


async def test_width_is_checked_before_the_row_count() -> None:
    report = await run_probe(cloud(rows=unit_rows(n=3, width=WIDTH + 1)), local())
    assert report.verdict is Verdict.DIMENSION_MISMATCH


async def test_a_wrong_row_count_is_a_failed_probe() -> None:
    report = await run_probe(cloud(rows=unit_rows(n=N - 1)), local())
    assert report.verdict is Verdict.PROBE_FAILED and report.width == WIDTH
    assert "9 rows for 10" in report.detail


async def test_identical_vectors_verify_with_cosine_coverage() -> None:
    rows = unit_rows()
    report = await run_probe(cloud(rows=rows * 3.0), local(rows=rows))  # scale does not matter: normalised
    assert report.verdict is Verdict.VERIFIED and report.coverage is Coverage.COSINE
    assert report.min_cosine is not None and report.min_cosine >= 0.999
    assert report.mean_cosine is not None and report.mean_cosine >= 0.999
    assert report.reference == "gpu-0"


async def test_one_pair_at_the_peers_0_976_is_vector_incompatible_though_the_mean_looks_fine() -> None:
    base = unit_rows()
    report = await run_probe(cloud(rows=with_one_row_at(base, 0.976)), local(rows=base))
    assert report.verdict is Verdict.VECTOR_INCOMPATIBLE and report.coverage is None
    assert report.min_cosine == pytest.approx(0.976, abs=1e-5)
    assert report.mean_cosine is not None and report.mean_cosine > 0.997


async def test_a_min_cosine_exactly_at_the_threshold_passes() -> None:
    base = unit_rows()
    report = await run_probe(cloud(rows=with_one_row_at(base, 0.9901)), local(rows=base))
    assert report.verdict is Verdict.VERIFIED


async def test_a_single_cloud_provider_is_verified_on_width_and_pin_only_with_no_cosine() -> None:
    report = await run_probe(cloud(), None, regime=Regime.CLOUD_REF)
    assert report.verdict is Verdict.VERIFIED and report.coverage is Coverage.WIDTH_AND_PIN_ONLY
    assert report.min_cosine is None and report.mean_cosine is None and report.reference is None
    assert "min=- mean=-" in report.line()


async def test_a_single_cloud_provider_still_fails_on_width() -> None:
    report = await run_probe(cloud(rows=unit_rows(width=3)), None, regime=Regime.CLOUD_REF)
    assert report.verdict is Verdict.DIMENSION_MISMATCH


async def test_probing_against_stored_vectors_never_calls_the_reference() -> None:
    base = unit_rows()
    reference = local(rows=unit_rows(seed=5))
    same = await run_probe(cloud(rows=base), reference, reference_vectors=base)
    drifted = await run_probe(cloud(rows=with_one_row_at(base, 0.98)), None, reference_vectors=base)
    assert reference.calls == []
    assert same.verdict is Verdict.VERIFIED and same.reference == "gpu-0"
    assert drifted.verdict is Verdict.VECTOR_INCOMPATIBLE and drifted.reference == STORED_REFERENCE


async def test_stored_vectors_of_the_wrong_shape_are_a_failed_probe_not_a_crash() -> None:
    report = await run_probe(cloud(), None, reference_vectors=unit_rows(width=WIDTH + 1))
    assert report.verdict is Verdict.PROBE_FAILED and "unusable" in report.detail


async def test_non_finite_candidate_rows_are_a_failed_probe() -> None:
    rows = unit_rows()
    rows[2, 0] = np.nan
    report = await run_probe(cloud(rows=rows), local())
    assert report.verdict is Verdict.PROBE_FAILED


def test_a_hanging_candidate_times_out_into_a_failed_probe() -> None:
    async def main(clock: VirtualClock) -> GateReport:
        return await run_probe(cloud(hang_s=600.0), local(), clock=clock)

    report = run_virtual(main)
    assert report.verdict is Verdict.PROBE_FAILED and "timed out after 15s" in report.detail
    assert report.checked_at == pytest.approx(PROBE_TIMEOUT_S)


def test_a_hanging_reference_times_out_into_a_failed_probe_with_the_given_timeout() -> None:
    candidate = cloud()

    async def main(clock: VirtualClock) -> GateReport:
        return await run_probe(candidate, local(hang_s=600.0), clock=clock, timeout_s=2.0)

    report = run_virtual(main)
    assert report.verdict is Verdict.PROBE_FAILED and "reference gpu-0 timed out after 2s" in report.detail
    assert candidate.calls == []


def test_the_reference_report_says_it_defines_the_space() -> None:
    report = reference_report(local().target, regime=Regime.LOCAL_REF, expected_width=WIDTH, clock=FakeClock(5.0))
    assert report.verdict is Verdict.VERIFIED and report.coverage is Coverage.REFERENCE
    assert report.reference is None and report.min_cosine is None and report.checked_at == 5.0
    unpinned_target = cloud(upstream=None).target
    unpinned = reference_report(unpinned_target, regime=Regime.CLOUD_REF, expected_width=WIDTH, clock=FakeClock())
    assert unpinned.verdict is Verdict.NO_PROVIDER_PIN


def test_compare_reports_min_and_mean_and_refuses_mismatched_shapes() -> None:
    base = unit_rows()
    lo, mean = compare(with_one_row_at(base, 0.5), base)
    assert lo == pytest.approx(0.5, abs=1e-5) and mean == pytest.approx((9 + 0.5) / 10, abs=1e-5)
    with pytest.raises(ValueError, match="cannot compare shapes"):
        compare(base[:5], base)


def test_a_report_refuses_a_fake_cosine_or_coverage_on_a_refusal() -> None:
    key = GateKey(provider="p", model="m", upstream=None, regime=Regime.CLOUD_REF)
    common = {"key": key, "reference": None, "width": WIDTH, "expected_width": WIDTH, "checked_at": 0.0, "detail": "x"}
    fake_one = {"min_cosine": 1.0, "mean_cosine": 1.0}
    with pytest.raises(ValidationError):
        GateReport(verdict=Verdict.VERIFIED, coverage=Coverage.WIDTH_AND_PIN_ONLY, **fake_one, **common)  # type: ignore[arg-type]
    no_cosine = {"min_cosine": None, "mean_cosine": None}
    with pytest.raises(ValidationError):
        GateReport(verdict=Verdict.PROBE_FAILED, coverage=Coverage.COSINE, **no_cosine, **common)  # type: ignore[arg-type]


async def test_the_log_line_names_everything_measured_but_no_probe_text_or_key() -> None:
    base = unit_rows()
    report = await run_probe(cloud(rows=with_one_row_at(base, 0.976)), local(rows=base))
    line = report.line()
    assert line.startswith("gate cloud-a minilm@nebius [local-ref] vector-incompatible")
    for part in ("coverage=-", "min=0.976", "width=8/8", "reference=gpu-0"):
        assert part in line
    assert "\n" not in line
    for text in PROBE_TEXTS:
        assert text not in line and text.splitlines()[0] not in line


def test_a_detail_is_kept_to_one_line_without_probe_texts_or_key_like_strings() -> None:
    key = GateKey(provider="p", model="m", upstream=None, regime=Regime.LOCAL_REF)
    report = GateReport(
        key=key,
        verdict=Verdict.PROBE_FAILED,
        coverage=None,
        reference=None,
        min_cosine=None,
        mean_cosine=None,
        width=None,
        expected_width=WIDTH,
        checked_at=0.0,
        detail=f"boom\n{PROBE_TEXTS[4]} with sk-or-v1-abcdef0123456789",
    )
    assert "\n" not in report.line() and PROBE_TEXTS[4] not in report.line() and "sk-or" not in report.line()


# --- the probe on the real packaged model -------------------------------------------------------

SIGMA = 0.0105  # with seed 0, lands the min cosine near the peer's 0.976 (Q4 vs full precision)


@pytest.fixture(scope="module")
def minilm():  # type: ignore[no-untyped-def]
    from cluster.local.encoder import LocalEncoder
    from cluster.settings import EmbeddingSettings

    return LocalEncoder(EmbeddingSettings(cpu_threads=2))


async def test_the_real_model_against_itself_verifies_and_a_perturbed_copy_is_refused(  # type: ignore[no-untyped-def]
    minilm,
) -> None:
    width = minilm.identity.width

    async def real(texts: list[str]) -> np.ndarray:
        return minilm.encode(texts)  # type: ignore[no-any-return]

    async def perturbed(texts: list[str]) -> np.ndarray:
        clean = minilm.encode(texts)
        noisy = clean + np.random.default_rng(0).normal(0.0, SIGMA, clean.shape)
        return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)

    reference = ProbeTarget("gpu-0", "all-MiniLM-L6-v2", None, False, real)
    same = await probe(
        ProbeTarget("gpu-1", "all-MiniLM-L6-v2", None, False, real),
        reference,
        regime=Regime.LOCAL_REF,
        expected_width=width,
        clock=FakeClock(),
    )
    quantised = await probe(
        ProbeTarget("cloud-q4", "all-MiniLM-L6-v2", "nebius", True, perturbed),
        reference,
        regime=Regime.LOCAL_REF,
        expected_width=width,
        clock=FakeClock(),
    )
    assert same.verdict is Verdict.VERIFIED and same.min_cosine is not None and same.min_cosine >= 0.999
    assert quantised.verdict is Verdict.VECTOR_INCOMPATIBLE
    assert quantised.min_cosine is not None and 0.97 <= quantised.min_cosine <= 0.985
