"""Tests that treat the two models as independent samples, kept only for comparison with reports that used them.

Both models answered the same questions, so their results are paired, and samples of one question are not
independent of each other. These tests ignore both facts; the report labels them as assuming independence.
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
from scipy import stats
from statsmodels.stats.proportion import proportions_ztest

from stats.paired import TestResult


def two_proportion_z(
    tuned_correct: int, tuned_samples: int, base_correct: int, base_samples: int
) -> TestResult:
    """Pooled two-proportion z test (two-sided) on sample counts, tuned minus baseline.

    Args:
        tuned_correct: Correct samples of the tuned model.
        tuned_samples: All samples of the tuned model.
        base_correct: Correct samples of the baseline.
        base_samples: All samples of the baseline.

    Returns:
        The result; undefined when every sample of both models is correct (or every one wrong).
    """
    method = (
        f"pooled two-proportion z test, two-sided, on {tuned_samples} vs {base_samples} samples; "
        "ASSUMES INDEPENDENT SAMPLES"
    )
    pooled = Fraction(tuned_correct + base_correct, tuned_samples + base_samples)
    if pooled in (0, 1):
        return TestResult(
            None, None, method, f"every sample of both models is {'right' if pooled else 'wrong'}"
        )
    z, p = proportions_ztest([tuned_correct, base_correct], [tuned_samples, base_samples])
    return TestResult(float(z), float(p), method)


def welch_t(tuned_acc: list[Fraction], base_acc: list[Fraction]) -> TestResult:
    """Welch's unequal-variance t test on per-question accuracies as two independent groups.

    Returns:
        The result; undefined with fewer than two questions or when neither group varies.
    """
    method = "Welch t test on per-question accuracies as two independent groups; ASSUMES INDEPENDENCE"
    if min(len(tuned_acc), len(base_acc)) < 2:
        return TestResult(None, None, method, "needs at least 2 questions")
    if len(set(tuned_acc)) == 1 and len(set(base_acc)) == 1:
        return TestResult(None, None, method, "neither model's per-question accuracy varies")
    with warnings.catch_warnings():
        # scipy warns of "catastrophic cancellation" when one group is constant; its variance is exactly 0.
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.ttest_ind(
            np.array(tuned_acc, dtype=float), np.array(base_acc, dtype=float), equal_var=False
        )
    return TestResult(float(res.statistic), float(res.pvalue), method)
