"""Effect size and power of the paired design, from the per-question differences.

Power uses the paired t test on per-question differences (statsmodels ``TTestPower``), with the observed
standard deviation of the differences standing in for the true one: an approximation of the primary sign-flip
test, which agrees with the t test but for few questions, where its floor (p >= 2 / 2^n) is taken into account.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from statsmodels.stats.power import TTestPower

from stats.paired import p_floor

ALPHA = 0.05
POWER = 0.80
MIN_QUESTIONS = 6  # the fewest with which the sign-flip test can reach p < 0.05 (2 / 2^6 = 0.031)


@dataclass(frozen=True)
class PowerSummary:
    """Effect size and what the design could detect.

    Attributes:
        cohens_dz: Mean / standard deviation of the per-question differences, or None.
        detectable_difference: Smallest true mean difference (accuracy, 0-1) the paired t test detects with
            80% power at alpha 0.05 with this many questions, or None.
        questions_needed: Questions needed to detect the observed difference with 80% power, or None.
        reason: Why some values are None.
    """

    cohens_dz: float | None
    detectable_difference: float | None
    questions_needed: int | None
    reason: str | None = None


def _solve(**kwargs: float | None) -> float | None:
    """statsmodels' root finder; None where it gives no finite answer (it warns rather than raising)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        solved = TTestPower().solve_power(alpha=ALPHA, power=POWER, alternative="two-sided", **kwargs)
    value = float(np.asarray(solved).item())  # a float or, from its fallback solver, a 1-element array
    return value if math.isfinite(value) else None


def paired_power(diffs: list[Fraction]) -> PowerSummary:
    """Effect size (Cohen's d_z) and 80%-power figures for the paired per-question design.

    Args:
        diffs: Exact per-question differences (tuned - baseline).

    Returns:
        The summary; fields are None (with a reason) when the differences have no spread.
    """
    if len(diffs) < 2:
        return PowerSummary(None, None, None, "needs at least 2 questions")
    if len(set(diffs)) == 1:
        return PowerSummary(None, None, None, "the per-question differences have no spread")
    values = np.array(diffs, dtype=float)
    sd = float(values.std(ddof=1))
    dz = float(values.mean()) / sd
    # The primary sign-flip test's p cannot go below 2 / 2^n with n questions: no design under 6 detects anything.
    floor = p_floor(len(diffs))
    min_es = _solve(effect_size=None, nobs=len(diffs)) if floor <= ALPHA else None
    detectable = min_es * sd if min_es is not None else None
    reason = (
        None
        if floor <= ALPHA
        else f"with {len(diffs)} questions the sign-flip test cannot go below p = {floor:.4g}"
    )
    if dz == 0:
        return PowerSummary(dz, detectable, None, "the observed mean difference is zero")
    needed = _solve(effect_size=abs(dz), nobs=None)
    return PowerSummary(
        dz, detectable, max(math.ceil(needed), MIN_QUESTIONS) if needed is not None else None, reason
    )
