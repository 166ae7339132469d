"""Boundaries of the paired and independence tests (stats.paired, stats.independent): two questions, one
constant group, mixed sample counts, and the Monte Carlo fallback's batching, each against scipy /
statsmodels or a count that holds by construction."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from _stats_helpers import run_compare, write_records
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

from stats import independent, paired

F = Fraction


def test_two_questions_are_enough_for_the_t_test_and_interval():
    diffs = [F(1, 2), F(1)]
    ref = sps.ttest_1samp([0.5, 1.0], 0.0)
    result = paired.paired_t(diffs)
    assert (result.statistic, result.p_value) == pytest.approx((3.0, ref.pvalue))
    ci = ref.confidence_interval(0.95)
    # mean 3/4, standard error 1/4, t(1) quantile 12.706: 0.75 -+ 3.1765, past what a difference can reach
    assert (ci.low, ci.high) == pytest.approx((0.75 - 3.17655, 0.75 + 3.17655), abs=1e-4)
    assert paired.t_interval(diffs) == (-1.0, 1.0)
    five = [F(1)] * 5 + [F(1, 2)]
    low, high = sps.ttest_1samp([1.0] * 5 + [0.5], 0.0).confidence_interval(0.95)
    assert high > 1 and paired.t_interval(five) == (pytest.approx(low), 1.0)
    assert paired.t_interval([F(1, 2)]) is None
    assert paired.paired_t([F(1, 2)]).reason == "needs at least 2 questions"


def test_welch_t_with_two_questions_and_with_one_constant_group():
    ref = sps.ttest_ind([0.5, 1.0], [0.0, 0.5], equal_var=False)
    result = independent.welch_t([F(1, 2), F(1)], [F(0), F(1, 2)])
    assert (result.statistic, result.p_value) == pytest.approx((ref.statistic, ref.pvalue))
    # One model constant, the other varying: still defined (only both constant leaves no variance).
    result = independent.welch_t([F(1)] * 3, [F(0), F(1, 2), F(1)])
    # t = (1 - 1/2) / sqrt(1/4 / 3), df = 2
    assert result.statistic == pytest.approx(3**0.5)
    assert result.p_value == pytest.approx(2 * sps.t.sf(3**0.5, 2))
    result = independent.welch_t([F(0), F(1, 2), F(1)], [F(1, 2)] * 3)
    assert result.statistic == pytest.approx(0.0) and result.p_value == pytest.approx(1.0)
    assert independent.welch_t([F(1)] * 3, [F(0)] * 3).p_value is None
    assert independent.welch_t([F(1)], [F(0), F(1)]).reason == "needs at least 2 questions"


def test_two_proportion_z_by_hand_and_its_undefined_cases():
    # 6/10 vs 2/10: pooled 2/5, z = 0.4 / sqrt(0.24 * 0.2) = 1.8257
    result = independent.two_proportion_z(6, 10, 2, 10)
    assert result.statistic == pytest.approx(0.4 / (0.24 * 0.2) ** 0.5)
    assert result.p_value == pytest.approx(2 * sps.norm.sf(0.4 / (0.24 * 0.2) ** 0.5))
    assert independent.two_proportion_z(2, 10, 6, 10).statistic == pytest.approx(-result.statistic)
    assert independent.two_proportion_z(0, 4, 0, 6).p_value is None
    assert "right" in independent.two_proportion_z(4, 4, 6, 6).reason
    assert "wrong" in independent.two_proportion_z(0, 4, 0, 6).reason


def test_mcnemar_needs_one_sample_in_both_models_and_a_discordant_question():
    one = {"a": (1, 1), "b": (0, 1), "c": (1, 1)}
    assert paired.mcnemar(one, {"a": (1, 1), "b": (1, 2), "c": (0, 1)}, ["a", "b", "c"]) is None
    assert paired.mcnemar({"a": (1, 2), "b": (0, 1), "c": (1, 1)}, one, ["a", "b", "c"]) is None
    undefined = paired.mcnemar(one, one, ["a", "b", "c"])
    assert undefined.p_value is None and undefined.reason == "no discordant question"
    # One discordant question each way: exact binomial p = 1; two the same way: p = 2 * (1/2)^2 = 1/2.
    tuned = {"a": (0, 1), "b": (1, 1), "c": (1, 1)}
    result = paired.mcnemar(one, tuned, ["a", "b", "c"])
    ref = sm_mcnemar([[1, 1], [1, 0]], exact=True)
    assert (result.statistic, result.p_value) == (ref.statistic, ref.pvalue) == (1.0, 1.0)
    tuned = {"a": (1, 1), "b": (1, 1), "c": (1, 1)}
    base = {"a": (0, 1), "b": (0, 1), "c": (1, 1)}
    result = paired.mcnemar(base, tuned, ["a", "b", "c"])
    assert (result.statistic, result.p_value) == (0.0, 0.5)


def test_monte_carlo_never_reports_zero_and_counts_each_assignment_once(monkeypatch):
    # All 30 differences positive: only the all-plus / all-minus assignments (2 of 2^30) reach the observed
    # sum, so no random assignment hits and the p-value is its floor 1 / (resamples + 1), never 0.
    ones = [1] * 30
    assert paired.monte_carlo_sign_flip_pvalue(ones, 30, resamples=999, seed=0) == 1 / 1000
    # Observed 0: every assignment hits, so p = 1 exactly, whatever the batch size.
    monkeypatch.setattr(paired, "_MC_BATCH_CELLS", 6)  # batches of 3 rows of 2: 3 + 3 + 1 rows
    assert paired.monte_carlo_sign_flip_pvalue([1, 1], 0, resamples=7, seed=0) == 1.0
    monkeypatch.setattr(paired, "_MC_BATCH_CELLS", 1)  # one row per batch even when a row exceeds it
    assert paired.monte_carlo_sign_flip_pvalue([1, 1], 0, resamples=5, seed=0) == 1.0
    # |T| >= 2 for [1, 1] on half the assignments.
    p = paired.monte_carlo_sign_flip_pvalue([1, 1], 2, resamples=4000, seed=1)
    assert p == pytest.approx(0.5, abs=0.03)


def test_exact_enumeration_is_used_up_to_the_budget_inclusive(monkeypatch):
    diffs = [F(1, 3), F(2, 3), F(-1, 3)]  # weights 1, 2, 1: 3 * (4 + 1) = 15 cells
    monkeypatch.setattr(paired, "_EXACT_MAX_CELLS", 15)
    result = paired.sign_flip(diffs, resamples=10)
    assert "exact over all 2^3" in result.method
    assert result.p_value == pytest.approx(6 / 8)  # |+-1 +-2 +-1| >= 2 on 6 of the 8 assignments
    monkeypatch.setattr(paired, "_EXACT_MAX_CELLS", 14)
    listed = paired.sign_flip(diffs, resamples=10)  # 3 differences: listed one by one, still exact
    assert "exact over all 2^3 sign assignments of the nonzero differences, listed" in listed.method
    assert listed.p_value == 6 / 8
    monkeypatch.setattr(paired, "_LISTED_MAX", 2)
    assert "Monte Carlo over 10 " in paired.sign_flip(diffs, resamples=10).method
    result = paired.sign_flip(diffs)  # the defaults: 100,000 assignments from seed 0
    assert "Monte Carlo over 100000 random sign assignments (seed 0)" in result.method
    assert result.p_value == pytest.approx(6 / 8, abs=0.01)


def test_wilcoxon_with_half_ranks_matches_scipy_exact():
    # |d| ties give average ranks 2.5 and 5.5: the exact enumeration runs on doubled ranks, which stay integers.
    diffs = [F(k, 4) for k in (2, 2, -1, 3, -4, 4)]
    ref = sps.wilcoxon([2, 2, -1, 3, -4, 4], method=sps.PermutationMethod(n_resamples=np.inf))
    result = paired.wilcoxon(diffs)
    assert (result.statistic, result.p_value) == pytest.approx((ref.statistic, ref.pvalue)) == (6.5, 0.5)


@pytest.mark.parametrize(
    ("changed", "said"),
    [
        (0, "p_holm: no group has a p-value, so there is nothing to adjust."),
        (1, "p_holm: one group has a p-value; adjusted over one test, it stays as it is."),
    ],
)
def test_the_holm_line_says_what_it_adjusts_when_few_groups_have_a_p_value(tmp_path, capsys, changed, said):
    """Groups of one question, or without a difference, have no p-value: it said "over the 0 per-group p-values"."""
    base = {"a": [False, False], "b": [False, False], "c": [False, True]}
    tuned = {**base, "a": [True, True]} if changed else base  # Algebra: two questions, one changed or none
    meta = {"a": "Algebra", "b": "Algebra", "c": "Geometry"}
    for name, outcomes in (("base", base), ("tuned", tuned)):
        lines = [
            json.loads(line)
            for line in write_records(tmp_path / f"{name}.jsonl", outcomes).read_text().splitlines()
        ]
        (tmp_path / f"{name}.jsonl").write_text(
            "".join(json.dumps({**r, "subject": meta[r["id"]]}) + "\n" for r in lines)
        )
    code, out, _ = run_compare(capsys, tmp_path / "base.jsonl", tmp_path / "tuned.jsonl")
    assert code == 0 and said in out and "over the 0 per-group" not in out
