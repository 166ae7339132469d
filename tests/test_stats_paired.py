"""Every p-value and interval of the comparison against scipy / statsmodels or brute force (stats.analysis)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
import statsmodels.api as sm
from _stats_helpers import clustered_wilson, outcomes_from_counts, write_records
from scipy import stats as sps
from statsmodels.stats.power import TTestPower
from statsmodels.stats.weightstats import ttest_ind as sm_ttest_ind

from stats import paired
from stats.analysis import compare_models
from stats.records import load_records, pair_questions

# name: (baseline correct, tuned correct, samples per question; an int, or a list per question)
DESIGNS = {
    # The reference run's shape: 20 questions x 5 samples, 73 vs 92 correct.
    "reference_20x5": (
        [5, 5, 5, 5, 5, 4, 4, 4, 4, 4, 3, 3, 3, 3, 3, 2, 2, 2, 3, 4],
        [5] * 12 + [4] * 8,
        5,
    ),
    # Gains and losses, many ties, 3 samples.
    "mixed_12x3": ([0, 1, 2, 3, 3, 2, 1, 0, 2, 2, 1, 3], [2, 1, 3, 2, 3, 3, 3, 1, 0, 2, 2, 3], 3),
    # Unequal samples per question (same in both files).
    "uneven": ([1, 2, 0, 4, 3, 1, 2, 5], [3, 2, 2, 4, 4, 3, 1, 5], [3, 4, 2, 5, 4, 3, 4, 6]),
}


def _compare(tmp_path, base_counts, tuned_counts, samples, **kwargs):
    base = load_records(write_records(tmp_path / "b.jsonl", outcomes_from_counts(base_counts, samples)))
    tuned = load_records(write_records(tmp_path / "t.jsonl", outcomes_from_counts(tuned_counts, samples)))
    return compare_models(base, tuned, pair_questions(base, tuned), **kwargs)


def _accuracies(counts, samples):
    sizes = samples if isinstance(samples, list) else [samples] * len(counts)
    return np.array(counts, dtype=float) / np.array(sizes, dtype=float)


def _t_interval(values):
    values = np.asarray(values, dtype=float)
    half = sps.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return values.mean() - half, values.mean() + half


def _cluster_wilson(accuracies, samples):
    """Wilson at Kish's effective sample size p(1-p) / (variance of per-question accuracies / questions)."""
    p, n = accuracies.mean(), len(accuracies)
    total = sum(samples) if isinstance(samples, list) else samples * n
    n_eff = min(total, p * (1 - p) / (accuracies.var(ddof=1) / n))
    return clustered_wilson(p * n_eff, n_eff, questions=n)


def _brute_force_sign_flip(values, observed=None):
    """P(|sum of +-values| >= |observed|) by listing every sign assignment (observed: the plain sum)."""
    observed = abs(sum(values) if observed is None else observed)
    sums = [
        abs(sum(s * v for s, v in zip(signs, values)))
        for signs in itertools.product((1, -1), repeat=len(values))
    ]
    return sum(total >= observed for total in sums) / len(sums)


@pytest.mark.parametrize("name", DESIGNS)
def test_estimates_intervals_and_paired_t_match_references(tmp_path, name):
    base_counts, tuned_counts, samples = DESIGNS[name]
    c = _compare(tmp_path, base_counts, tuned_counts, samples)
    base, tuned = _accuracies(base_counts, samples), _accuracies(tuned_counts, samples)
    d = tuned - base
    assert c.baseline.accuracy == pytest.approx(base.mean()) and c.tuned.accuracy == pytest.approx(
        tuned.mean()
    )
    assert c.baseline.ci95 == pytest.approx(_cluster_wilson(base, samples))
    assert c.difference == pytest.approx(d.mean())
    assert c.difference_ci95 == pytest.approx(_t_interval(d))
    ref = sps.ttest_rel(tuned, base)
    assert c.tests["paired_t"].statistic == pytest.approx(ref.statistic)
    assert c.tests["paired_t"].p_value == pytest.approx(ref.pvalue)
    assert (c.improved, c.regressed, c.unchanged) == (
        int((d > 1e-12).sum()),
        int((d < -1e-12).sum()),
        int((abs(d) < 1e-12).sum()),
    )


def test_accuracy_interval_is_wilson_at_the_cluster_robust_effective_size(tmp_path):
    base_counts, tuned_counts, samples = DESIGNS["reference_20x5"]
    c = _compare(tmp_path, base_counts, tuned_counts, samples)
    y = np.array([k < n for n in base_counts for k in range(samples)], dtype=float)
    groups = np.repeat(np.arange(len(base_counts)), samples)
    fit = sm.OLS(y, np.ones_like(y)).fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)
    # The design effect from statsmodels' CR1 variance: the 100 samples are worth 91 independent ones.
    n_eff = 0.73 * 0.27 / fit.bse[0] ** 2
    assert 90 < n_eff < 92
    assert c.baseline.ci95 == pytest.approx(clustered_wilson(0.73 * n_eff, n_eff, questions=20))
    assert (c.baseline.correct, c.baseline.samples, c.tuned.correct, c.tuned.samples) == (73, 100, 92, 100)


@pytest.mark.parametrize("name", DESIGNS)
def test_sign_flip_is_exact_against_brute_force_and_scipy(tmp_path, name):
    base_counts, tuned_counts, samples = DESIGNS[name]
    c = _compare(tmp_path, base_counts, tuned_counts, samples)
    nonzero = [d for d in c.diffs if d != 0]
    result = c.tests["sign_flip"]
    assert result.p_value == pytest.approx(_brute_force_sign_flip(nonzero))
    assert result.statistic == pytest.approx(float(sum(c.diffs) / len(c.diffs)))
    assert f"exact over all 2^{len(nonzero)} sign assignments" in result.method
    # zeros cannot change sign, so scipy enumerates the nonzero differences only (2^20 takes seconds)
    ref = sps.permutation_test(
        (np.array(nonzero, dtype=float),), np.mean, permutation_type="samples", n_resamples=np.inf
    )
    assert result.p_value == pytest.approx(ref.pvalue)


@pytest.mark.parametrize("name", DESIGNS)
def test_wilcoxon_matches_scipy_exact_permutation_with_ties(tmp_path, name):
    base_counts, tuned_counts, samples = DESIGNS[name]
    c = _compare(tmp_path, base_counts, tuned_counts, samples)
    nonzero = [d for d in c.diffs if d != 0]
    exact = np.array([float(d * 3600) for d in nonzero])  # common denominator: exact ties as floats
    ref = sps.wilcoxon(exact, method=sps.PermutationMethod(n_resamples=np.inf))
    result = c.tests["wilcoxon"]
    assert result.statistic == pytest.approx(ref.statistic)
    assert result.p_value == pytest.approx(ref.pvalue)
    assert (
        f"{len(c.diffs) - len(nonzero)} of {len(c.diffs)} zero differences dropped (zero_method='wilcox')"
        in result.method
    )
    assert "exact over all" in result.method and "with ties (average ranks)" in result.method


def test_wilcoxon_without_ties_matches_scipy_exact():
    diffs = [Fraction(k, 7) for k in (1, -2, 3, 4, 5, -6, 7)]
    result = paired.wilcoxon(diffs)
    ref = sps.wilcoxon([float(d) for d in diffs], method="exact")
    assert (result.statistic, result.p_value) == pytest.approx((ref.statistic, ref.pvalue))
    assert "no ties" in result.method


def test_differences_are_exact_so_float_near_ties_stay_ties():
    # 4/5 - 3/5 and 2/5 - 1/5 are both 1/5, but as floats 0.8 - 0.6 != 0.4 - 0.2.
    diffs = [
        Fraction(4, 5) - Fraction(3, 5),
        Fraction(2, 5) - Fraction(1, 5),
        Fraction(-1, 5),
        Fraction(3, 5),
    ]
    floats = [0.8 - 0.6, 0.4 - 0.2, 0.4 - 0.6, 1.0 - 0.4]
    assert sps.rankdata(np.abs(floats)).tolist() != [2.0, 2.0, 2.0, 4.0]  # the trap is real for this fixture
    result = paired.wilcoxon(diffs)
    ref = sps.wilcoxon([1, 1, -1, 3], method=sps.PermutationMethod(n_resamples=np.inf))
    assert (result.statistic, result.p_value) == pytest.approx((ref.statistic, ref.pvalue))
    assert result.statistic == 2.0  # W- = average rank 2 of the three tied |1/5|


def test_exact_sign_flip_pvalue_equals_enumeration():
    rng = np.random.default_rng(0)
    for _ in range(20):
        weights = rng.integers(0, 9, size=rng.integers(1, 9)).tolist()
        signs = rng.choice([-1, 1], size=len(weights))
        observed = int(np.dot(signs, weights))
        assert paired.exact_sign_flip_pvalue(weights, observed) == pytest.approx(
            _brute_force_sign_flip(weights, observed)
        )


def test_monte_carlo_and_normal_fallbacks_beyond_the_enumeration_budget(monkeypatch):
    diffs = [Fraction(k, 5) for k in (1, 2, 1, 3, -1, 2, 1, 1, 0, 2, -2, 1, 4, 1)]
    exact_flip, exact_w = paired.sign_flip(diffs), paired.wilcoxon(diffs)
    monkeypatch.setattr(paired, "_EXACT_MAX_CELLS", 0)
    mc = paired.sign_flip(diffs, seed=7, resamples=20_000)
    assert "Monte Carlo over 20000 random sign assignments (seed 7)" in mc.method
    assert mc.p_value == pytest.approx(exact_flip.p_value, abs=0.01)
    assert paired.sign_flip(diffs, seed=7, resamples=20_000).p_value == mc.p_value
    normal = paired.wilcoxon(diffs)
    ref = sps.wilcoxon([float(d) for d in diffs if d], method="asymptotic", correction=True)
    assert normal.p_value == pytest.approx(ref.pvalue)
    assert "normal approximation with tie and continuity corrections" in normal.method
    assert normal.p_value != pytest.approx(exact_w.p_value, rel=1e-6)


@pytest.mark.parametrize("name", DESIGNS)
def test_independence_tests_match_references(tmp_path, name):
    base_counts, tuned_counts, samples = DESIGNS[name]
    c = _compare(tmp_path, base_counts, tuned_counts, samples)
    n_b, n_t = c.baseline.samples, c.tuned.samples
    p1, p2, pooled = (
        sum(tuned_counts) / n_t,
        sum(base_counts) / n_b,
        (sum(tuned_counts) + sum(base_counts)) / (n_t + n_b),
    )
    z = (p1 - p2) / np.sqrt(pooled * (1 - pooled) * (1 / n_t + 1 / n_b))
    assert c.tests["two_proportion_z"].statistic == pytest.approx(z)
    assert c.tests["two_proportion_z"].p_value == pytest.approx(2 * sps.norm.sf(abs(z)))
    t, p, _ = sm_ttest_ind(
        _accuracies(tuned_counts, samples), _accuracies(base_counts, samples), usevar="unequal"
    )
    assert (c.tests["welch_t"].statistic, c.tests["welch_t"].p_value) == pytest.approx((t, p))
    assert (
        "ASSUME" in c.tests["two_proportion_z"].method and "ASSUMES INDEPENDENCE" in c.tests["welch_t"].method
    )


def test_reference_run_headline_two_proportion_z(tmp_path):
    c = _compare(tmp_path, *DESIGNS["reference_20x5"])
    assert round(c.tests["two_proportion_z"].p_value, 4) == 0.0004
    assert (c.baseline.accuracy, c.tuned.accuracy) == pytest.approx((0.73, 0.92))


def test_mcnemar_exact_with_one_sample_per_question(tmp_path):
    base = [1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1]
    tuned = [1, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1]
    c = _compare(tmp_path, base, tuned, 1)
    only_tuned = sum(t and not b for b, t in zip(base, tuned))
    only_base = sum(b and not t for b, t in zip(base, tuned))
    assert (only_tuned, only_base) == (7, 1)
    result = c.tests["mcnemar"]
    assert result.statistic == 1
    assert result.p_value == pytest.approx(sps.binomtest(1, 8, 0.5).pvalue)
    # with one sample, the sign-flip test is the same exact binomial test on the discordant questions
    assert c.tests["sign_flip"].p_value == pytest.approx(result.p_value)


def test_mcnemar_not_applicable_with_several_samples(tmp_path):
    assert _compare(tmp_path, *DESIGNS["mixed_12x3"]).tests["mcnemar"] is None


def test_power_line_matches_noncentral_t(tmp_path):
    c = _compare(tmp_path, *DESIGNS["mixed_12x3"])
    d = np.array(c.diffs, dtype=float)
    n, sd = len(d), d.std(ddof=1)
    assert c.power.cohens_dz == pytest.approx(d.mean() / sd)

    def power(effect, nobs):
        crit = sps.t.ppf(0.975, nobs - 1)
        dist = sps.nct(nobs - 1, effect * np.sqrt(nobs))
        return dist.sf(crit) + dist.cdf(-crit)

    assert power(c.power.detectable_difference / sd, n) == pytest.approx(0.8, abs=1e-4)
    needed = c.power.questions_needed
    assert power(abs(c.power.cohens_dz), needed) >= 0.8 > power(abs(c.power.cohens_dz), needed - 1)
    assert TTestPower().power(abs(c.power.cohens_dz), needed, 0.05) >= 0.8


def test_no_difference_reports_undefined(tmp_path):
    counts = [0, 1, 2, 3, 3, 1]
    c = _compare(tmp_path, counts, counts, 3)
    for name in ("paired_t", "wilcoxon", "sign_flip"):
        assert c.tests[name].p_value is None and c.tests[name].statistic is None
    assert "all per-question differences are zero" in c.tests["sign_flip"].reason
    assert c.difference == 0 and c.difference_ci95 is None
    assert c.power.cohens_dz is None and "no spread" in c.power.reason
    assert (c.improved, c.regressed, c.unchanged) == (0, 0, 6)
    assert c.tests["two_proportion_z"].p_value == pytest.approx(1.0)


def test_all_correct_reports_undefined(tmp_path):
    c = _compare(tmp_path, [4] * 5, [4] * 5, 4)
    # All right: nothing says how alike a question's samples are, so each of the 5 questions counts once.
    assert c.baseline.ci95 == pytest.approx(clustered_wilson(5, 5, questions=5)) and c.baseline.ci95[1] == 1
    assert c.difference_ci95 is None
    assert c.tests["two_proportion_z"].p_value is None
    assert "every sample of both models is right" in c.tests["two_proportion_z"].reason
    assert c.tests["welch_t"].p_value is None and c.tests["paired_t"].p_value is None


def test_constant_nonzero_difference_leaves_t_undefined_but_sign_flip_exact(tmp_path):
    c = _compare(tmp_path, [1] * 6, [2] * 6, 2)
    assert c.tests["paired_t"].p_value is None and "no spread" in c.tests["paired_t"].reason
    assert c.tests["sign_flip"].p_value == pytest.approx(2 / 2**6)
