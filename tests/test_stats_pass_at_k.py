"""pass@k in the comparison: the unbiased estimator against brute-force enumeration of k-subsets, the k it covers,
and a gain at k = 1 that a gain at the largest k does not match, said in the report."""

from __future__ import annotations

import json
from fractions import Fraction
from itertools import combinations

import pytest
from _stats_helpers import outcomes_from_counts, run_compare, write_records

from stats.pass_at_k import pass_at_k, pass_at_k_curve


@pytest.mark.parametrize("samples", [1, 2, 5, 8])
def test_the_estimator_is_the_share_of_k_subsets_holding_a_right_sample(samples):
    for correct in range(samples + 1):
        outcome = [True] * correct + [False] * (samples - correct)
        for k in range(1, samples + 1):
            subsets = list(combinations(outcome, k))
            assert pass_at_k(samples, correct, k) == Fraction(sum(map(any, subsets)), len(subsets))


def test_the_curve_runs_over_powers_of_two_then_the_fewest_samples_and_averages_per_question():
    base = {"a": (1, 12), "b": (0, 12)}
    tuned = {"a": (6, 12), "b": (0, 16)}
    rows = pass_at_k_curve(base, tuned, ["a", "b"])
    assert [r.k for r in rows] == [1, 2, 4, 8, 12]
    assert rows[0].baseline == pytest.approx((1 / 12 + 0) / 2) and rows[0].tuned == pytest.approx(0.25)
    assert rows[-1].baseline == pytest.approx(0.5) and rows[-1].tuned == pytest.approx(
        0.5
    )  # a solved, b never
    assert rows[-1].difference == 0 and rows[-1].ci95 is None  # no spread: undefined
    assert pass_at_k_curve({"a": (1, 1)}, {"a": (0, 4)}, ["a"]) == []  # one sample: pass@1 is the accuracy


def test_a_gain_that_does_not_hold_at_large_k_is_said(capsys, tmp_path):
    """Tuned right more often on the questions the baseline could already solve, and on no new one: accuracy up,
    pass@8 the same."""
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([1, 2, 1, 3, 0, 0] * 3, 8))
    tuned = write_records(tmp_path / "t.jsonl", outcomes_from_counts([7, 8, 6, 8, 0, 0] * 3, 8))
    code, out, _ = run_compare(capsys, base, tuned)
    assert code == 0 and "pass@k (the chance that at least one of k samples is right" in out
    table = out[out.index("pass@k") :].splitlines()
    assert [line.split()[0] for line in table[2:6]] == ["1", "2", "4", "8"]
    assert table[5].split()[1:4] == ["66.7%", "66.7%", "+0.0"]
    assert "With 18 questions (under 100) the intervals at large k may run narrow" in table[6]
    assert "The gain at k = 1 (+45.8 points) shrinks to +0.0 at k = 8 (the drop's 95% CI [+" in out

    result = json.loads(run_compare(capsys, base, tuned, "--json")[1])
    assert [row["k"] for row in result["pass_at_k"]] == [1, 2, 4, 8]
    assert result["pass_at_k"][0]["difference"] == pytest.approx(result["difference"]["estimate"])
    assert result["pass_at_k"][0]["drop_ci95"] is None and result["pass_at_k"][-1]["drop_ci95"][0] > 0


def test_a_shrinking_gain_is_not_read_when_the_gain_itself_is_not_significant(capsys, tmp_path):
    """With no evidence of a gain at k = 1 a "shrinks" sentence read noise: it fired in 10-36% of simulated
    comparisons of two equal models. 6 questions, 4 changed: the sign-flip test cannot go below p = 0.125."""
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([1, 2, 1, 3, 0, 0], 8))
    tuned = write_records(tmp_path / "t.jsonl", outcomes_from_counts([7, 8, 6, 8, 0, 0], 8))
    out = run_compare(capsys, base, tuned)[1]
    assert "pass@k (the chance" in out and "shrinks" not in out
    assert "Verdict: undecided: the accuracy changed on only 4 of the 6 questions" in out


def test_pass_at_k_needs_k_within_the_samples():
    with pytest.raises(ValueError, match="pass@k needs 1 <= k <= samples; got k = 5 with 4 samples"):
        pass_at_k(4, 1, 5)


def test_a_gain_on_new_questions_is_not_called_a_sharpening(capsys, tmp_path):
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([0, 0, 0, 4, 4, 4], 4))
    tuned = write_records(tmp_path / "t.jsonl", outcomes_from_counts([4, 4, 4, 4, 4, 4], 4))
    out = run_compare(capsys, base, tuned)[1]
    assert "pass@k" in out and "shrinks" not in out


def test_the_figure_draws_both_curves_with_several_samples_and_no_panel_with_one(tmp_path):
    from stats.analysis import compare_models
    from stats.plots import draw_comparison
    from stats.records import load_records, pair_questions

    def figure(samples, base_counts, tuned_counts):
        base = load_records(write_records(tmp_path / "b.jsonl", outcomes_from_counts(base_counts, samples)))
        tuned = load_records(write_records(tmp_path / "t.jsonl", outcomes_from_counts(tuned_counts, samples)))
        return draw_comparison(compare_models(base, tuned, pair_questions(base, tuned)))

    *_, curve = figure(4, [1, 0, 2], [4, 0, 4]).axes
    assert curve.get_title().startswith("pass@k")
    baseline, tuned = ([round(y, 1) for y in line.get_ydata()] for line in curve.lines)
    assert baseline == [25.0, 44.4, 66.7] and tuned == [66.7, 66.7, 66.7]  # k = 1, 2, 4
    assert len(figure(1, [1, 0, 1], [1, 1, 1]).axes) == 2


def test_a_gain_that_turns_into_a_loss_at_large_k_says_the_baseline_solves_more(capsys, tmp_path):
    """The arith_tiny story: +6.8 points at k = 1, -9.2 at k = 16; "less on new ones" undersold a loss."""
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([2] * 30, 8))
    tuned = write_records(tmp_path / "t.jsonl", outcomes_from_counts([7] * 10 + [8] * 10 + [0] * 10, 8))
    out = run_compare(capsys, base, tuned)[1]
    assert "Verdict: the tuned model is better" in out
    assert "less on new ones; with 8 samples the baseline solves more questions" in out
