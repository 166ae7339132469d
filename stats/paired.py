"""Paired, question-clustered statistics for two models answering the same questions.

The question is the independent unit: each question contributes one accuracy per model (correct / samples)
and one difference ``d_i = tuned_i - baseline_i``. Differences are exact ``Fraction`` values so that equal
differences stay equal (as floats, ``0.8 - 0.6 != 0.2``), which matters for zeros, ties and ranks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

# Largest exact sign-flip enumeration, in (number of weights) x (sum of weights) array cells: about a second.
_EXACT_MAX_CELLS = 50_000_000
# Most nonzero differences whose sign assignments are listed one by one when the table does not fit: 2^12 sums.
_LISTED_MAX = 12
# Monte Carlo sign assignments are drawn in batches of at most this many array cells (bounds memory).
_MC_BATCH_CELLS = 2_000_000


@dataclass(frozen=True)
class TestResult:
    """One hypothesis test.

    Attributes:
        statistic: The test statistic, or None when the test is undefined for these data.
        p_value: Two-sided p-value, or None when undefined.
        method: How the value was computed (stated in the report so the numbers can be reproduced).
        reason: Why the test is undefined, when it is.
    """

    __test__ = False  # not a pytest test class despite the name

    statistic: float | None
    p_value: float | None
    method: str
    reason: str | None = None


def question_accuracies(counts: dict[str, tuple[int, int]], ids: list[str]) -> list[Fraction]:
    """Exact per-question accuracy (correct / samples) for the given question ids, in order."""
    return [Fraction(counts[qid][0], counts[qid][1]) for qid in ids]


def t_interval(values: list[Fraction], confidence: float = 0.95) -> tuple[float, float] | None:
    """Student t interval for the mean of per-question values (questions are the clusters).

    With equal samples per question this equals the cluster-robust (CR1) interval of a pooled mean, i.e.
    statsmodels ``OLS(y, 1).fit(cov_type="cluster")`` with ``use_t=True``. Used for differences of accuracies,
    which may be negative; a single model's accuracy gets `stats.intervals.accuracy_interval`, which stays in [0, 1].

    Args:
        values: One value per question (a difference of accuracies).
        confidence: Coverage of the interval.

    Returns:
        ``(low, high)`` clipped to [-1, 1], the range of a difference of accuracies (a handful of questions in a
        subject can stretch the t interval past +-100 points, which no difference can reach); None when fewer than
        two questions or no spread make the interval undefined.
    """
    if len(values) < 2 or len(set(values)) == 1:
        return None
    ci = stats.ttest_1samp(np.array(values, dtype=float), 0.0).confidence_interval(confidence)
    return max(-1.0, float(ci.low)), min(1.0, float(ci.high))


def _as_integers(values: list[Fraction]) -> list[int]:
    """Scale exact fractions to integers with a common denominator (tests below are scale-free)."""
    scale = math.lcm(*(v.denominator for v in values))
    return [int(v * scale) for v in values]


def exact_sign_flip_pvalue(weights: list[int], observed: int) -> float:
    """Two-sided p-value ``P(|T| >= |observed|)`` for ``T = sum(s_i * w_i)`` with independent fair signs.

    Enumerates all ``2**n`` sign assignments in ``O(n * sum(w))`` by building the distribution of the sum of
    the positive weights one weight at a time, instead of listing the assignments (scipy's exact
    permutation test does that and takes seconds from n = 18).

    Args:
        weights: Non-negative integer weights (|differences|, or doubled ranks).
        observed: The observed signed sum, an integer.

    Returns:
        The exact two-sided p-value.
    """
    total = sum(weights)
    dist = np.zeros(total + 1)
    dist[0] = 1.0
    for w in weights:
        shifted = np.zeros_like(dist)
        shifted[w:] = dist[: total + 1 - w]
        dist = 0.5 * (dist + shifted)
    signed_sums = 2 * np.arange(total + 1) - total
    return min(1.0, float(dist[np.abs(signed_sums) >= abs(observed)].sum()))


def monte_carlo_sign_flip_pvalue(values: list[int], observed: int, *, resamples: int, seed: int) -> float:
    """Monte Carlo two-sided p-value of ``T = sum(s_i * v_i)`` with random fair signs ``s_i``.

    ``(1 + hits) / (1 + resamples)``, which never reports 0 (Phipson & Smyth 2010). Written out rather than
    using scipy's ``permutation_test``, which takes seconds for 1,000 questions; this is one matrix product per
    batch. Float64 sums of these integers stay exact below 2**53.

    Args:
        values: Integer values (scaled per-question differences).
        observed: The observed sum.
        resamples: Number of random sign assignments.
        seed: Seed of the numpy generator.

    Returns:
        The Monte Carlo p-value.
    """
    rng = np.random.default_rng(seed)
    weights = np.array(values, dtype=float)
    batch = max(1, _MC_BATCH_CELLS // len(values))
    hits = 0
    for start in range(0, resamples, batch):
        signs = rng.integers(0, 2, size=(min(batch, resamples - start), len(values)), dtype=np.int8) * 2 - 1
        hits += int((np.abs(signs @ weights) >= abs(observed)).sum())
    return (hits + 1) / (resamples + 1)


def p_floor(changed: int) -> float:
    """The smallest p-value an exact sign-flip test can give with ``changed`` nonzero differences: the two
    assignments with every sign alike always count."""
    return 2.0 ** (1 - changed)


def listed_sign_flip_pvalue(values: list[int], observed: int) -> float:
    """The exact two-sided p-value of ``T = sum(s_i * v_i)`` from the ``2**n`` sign assignments listed one by one,
    for few values whose sum is too large for `exact_sign_flip_pvalue`'s table (coprime sample counts of an
    interrupted evaluation scale the differences to large integers). Python integers: no overflow."""
    hits = sum(
        abs(sum(v if mask >> i & 1 else -v for i, v in enumerate(values))) >= abs(observed)
        for mask in range(2 ** len(values))
    )
    return hits / 2 ** len(values)


def _fits_exact(weights: list[int]) -> bool:
    return len(weights) * (sum(weights) + 1) <= _EXACT_MAX_CELLS


def _undefined(method: str, reason: str) -> TestResult:
    return TestResult(statistic=None, p_value=None, method=method, reason=reason)


def paired_t(diffs: list[Fraction]) -> TestResult:
    """Paired t test: one-sample t test of the per-question differences against zero."""
    method = f"one-sample t test on {len(diffs)} per-question differences (df = {len(diffs) - 1})"
    if len(diffs) < 2:
        return _undefined(method, "needs at least 2 questions")
    if len(set(diffs)) == 1:
        return _undefined(method, f"every per-question difference equals {float(diffs[0]):+.4g}: no spread")
    res = stats.ttest_1samp(np.array(diffs, dtype=float), 0.0)
    return TestResult(float(res.statistic), float(res.pvalue), method)


def wilcoxon(diffs: list[Fraction]) -> TestResult:
    """Wilcoxon signed-rank test on the per-question differences.

    Zero differences are dropped (Wilcoxon's method, scipy ``zero_method="wilcox"``); tied |differences| get
    average ranks. The p-value is exact, from all sign assignments of the (average) ranks, which stays exact
    with ties; beyond the enumeration budget it is scipy's normal approximation with tie and continuity
    corrections. The statistic is ``min(W+, W-)``, as scipy reports it.
    """
    nonzero = [d for d in diffs if d != 0]
    dropped = f"{len(diffs) - len(nonzero)} of {len(diffs)} zero differences dropped (zero_method='wilcox')"
    if not nonzero:
        return _undefined(dropped, "all per-question differences are zero")
    ints = _as_integers(nonzero)
    ranks = stats.rankdata(np.abs(ints))  # average ranks: multiples of 0.5
    doubled = [round(2 * r) for r in ranks]
    w_plus = float(sum(r for r, v in zip(ranks, ints) if v > 0))
    statistic = min(w_plus, float(ranks.sum()) - w_plus)
    ties = "with ties (average ranks)" if len(set(map(abs, ints))) < len(ints) else "no ties"
    if _fits_exact(doubled):
        observed = sum(r if v > 0 else -r for r, v in zip(doubled, ints))
        p = exact_sign_flip_pvalue(doubled, observed)
        how = f"exact over all 2^{len(ints)} sign assignments, {ties}"
    else:
        res = stats.wilcoxon(np.array(nonzero, dtype=float), method="asymptotic", correction=True)
        p = float(res.pvalue)
        how = f"normal approximation with tie and continuity corrections, {ties}"
    return TestResult(statistic, p, f"{dropped}; {how}; statistic = min(W+, W-)")


def not_symmetric() -> TestResult:
    """Wilcoxon, left out: with other sample counts in the two files, the differences are not symmetric under "no
    difference" (see `stats.samples.mismatched_samples_note`)."""
    return _undefined(
        "Wilcoxon signed-rank",
        "the files hold different samples per question, so the differences are not symmetric under no difference",
    )


def sign_flip(diffs: list[Fraction], *, seed: int = 0, resamples: int = 100_000) -> TestResult:
    """Paired permutation test on questions: flip the sign of each question's difference.

    Under the null hypothesis the two models are exchangeable on every question, so each difference is as
    likely to be positive as negative (strictly so when both models have the same number of samples on each
    question). The statistic is the mean per-question difference. The p-value is
    exact (all ``2**n`` assignments of the ``n`` nonzero differences) when that fits the enumeration budget,
    otherwise Monte Carlo with ``resamples`` random assignments drawn with ``seed``.

    Args:
        diffs: Exact per-question differences.
        seed: Seed for the Monte Carlo fallback.
        resamples: Number of random sign assignments for the Monte Carlo fallback.

    Returns:
        The test result; undefined when every difference is zero.
    """
    nonzero = [d for d in diffs if d != 0]
    statistic = float(sum(diffs) / len(diffs))
    if not nonzero:
        return _undefined("sign-flip permutation", "all per-question differences are zero")
    ints = _as_integers(nonzero)
    if _fits_exact([abs(v) for v in ints]):
        p = exact_sign_flip_pvalue([abs(v) for v in ints], sum(ints))
        how = f"exact over all 2^{len(ints)} sign assignments of the nonzero differences"
    elif len(ints) <= _LISTED_MAX:  # Monte Carlo could report a p below the exact test's floor of 2 / 2^n
        p = listed_sign_flip_pvalue(ints, sum(ints))
        how = f"exact over all 2^{len(ints)} sign assignments of the nonzero differences, listed"
    else:
        p = monte_carlo_sign_flip_pvalue(ints, sum(ints), resamples=resamples, seed=seed)
        how = f"Monte Carlo over {resamples} random sign assignments (seed {seed})"
    return TestResult(
        statistic, p, f"sign-flip permutation of {len(diffs)} questions, {how}; statistic = mean"
    )


def mcnemar(
    baseline: dict[str, tuple[int, int]], tuned: dict[str, tuple[int, int]], ids: list[str]
) -> TestResult | None:
    """Exact McNemar test, defined only when both models have exactly one sample per question.

    Returns:
        The result (statistic = the smaller discordant count, as statsmodels reports it), undefined when no
        question is discordant, or None when some question has more than one sample.
    """
    if any(baseline[q][1] != 1 or tuned[q][1] != 1 for q in ids):
        return None
    both = sum(baseline[q][0] and tuned[q][0] for q in ids)
    only_base = sum(baseline[q][0] and not tuned[q][0] for q in ids)
    only_tuned = sum(tuned[q][0] and not baseline[q][0] for q in ids)
    neither = len(ids) - both - only_base - only_tuned
    method = f"exact binomial on discordant questions ({only_tuned} only tuned right, {only_base} only baseline right)"
    if only_base + only_tuned == 0:
        return _undefined(method, "no discordant question")
    res = sm_mcnemar([[both, only_base], [only_tuned, neither]], exact=True)
    return TestResult(float(res.statistic), float(res.pvalue), method)
