"""One model's accuracy interval (stats.intervals): inside [0, 1], Wilson's, and as wide as the questions allow."""

from __future__ import annotations

import pytest
from _stats_helpers import clustered_wilson, outcomes_from_counts, run_compare, write_records
from statsmodels.stats.proportion import proportion_confint

from stats.intervals import accuracy_interval, effective_samples, wilson


def test_a_low_accuracy_interval_stays_above_zero_and_says_it_is_wilson(capsys, tmp_path):
    """The user trial: 2 of 40 questions right read 'baseline 5.0%  95% CI [-2.1%, 12.1%]'."""
    base = write_records(tmp_path / "b.jsonl", outcomes_from_counts([1, 1] + [0] * 38, 1))
    tuned = write_records(tmp_path / "t.jsonl", outcomes_from_counts([1] * 10 + [0] * 30, 1))
    code, out, _ = run_compare(capsys, base, tuned)
    assert code == 0
    low, high = proportion_confint(2, 40, method="wilson")  # one sample each: Wilson on the questions
    assert f"5.0%  95% CI [{100 * low:.1f}%, {100 * high:.1f}%]" in out == out.replace("[-", "")
    assert "95% CI: Wilson score interval over questions" in out
    code, out, _ = run_compare(capsys, base, tuned, "--json")
    assert "Wilson score interval" in out


@pytest.mark.parametrize(
    ("counts", "within"),
    [
        ([(1, 5)] + [(0, 5)] * 19, (0.0, 0.25)),  # 1 of 100 samples, one question: not [0.2%, 5%] of samples
        ([(0, 5)] * 20, (0.0, 0.19)),  # nothing right: each question counts once (t, 19 df: 18.0%)
        ([(5, 5)] * 19 + [(4, 5)], (0.8, 1.0)),
        ([(3, 4)], (0.0, 1.0)),  # one question: no spread to measure, so it counts once
    ],
)
def test_clustered_intervals_stay_in_range_and_contain_the_accuracy(counts, within):
    accuracy = sum(c / n for c, n in counts) / len(counts)
    low, high = accuracy_interval(counts)
    assert within[0] <= low <= accuracy <= high <= within[1]


def test_samples_of_one_question_are_worth_less_than_independent_ones():
    """20 questions x 5 samples, each question all right or all wrong: 20 answers, not 100."""
    clustered = accuracy_interval([(5, 5)] * 5 + [(0, 5)] * 15)
    assert clustered == pytest.approx(clustered_wilson(5, 20, questions=20), rel=0.05)
    mixed = accuracy_interval([(1, 5)] * 5 + [(2, 5)] * 5 + [(0, 5)] * 10)  # samples of a question disagree
    assert mixed[1] - mixed[0] < clustered[1] - clustered[0]


@pytest.mark.parametrize(
    ("counts", "n_eff", "right"),
    [
        ([(1, 4), (3, 4)], 4, 2),  # two questions: p(1-p) / V = 0.25 / 0.0625 samples' worth
        ([(2, 4)] * 3, 12, 6),  # every question alike but not 0% or 100%: the samples count
        ([(2, 4), (3, 4)] * 2, 16, 10),  # less spread than independent samples: capped at the 16 samples
        ([(3, 3)] * 4, 4, 4),  # all right: nothing says how alike samples are, so each question counts once
        ([(0, 3)] * 4, 4, 0),
    ],
)
def test_the_effective_sample_size_at_its_edges(counts, n_eff, right):
    """Several samples per question: Wilson at the effective size, at t's critical value (the size is estimated)."""
    assert effective_samples(counts) == pytest.approx(n_eff)
    assert accuracy_interval(counts) == pytest.approx(clustered_wilson(right, n_eff, questions=len(counts)))


def test_one_sample_per_question_is_plain_wilson_on_the_questions():
    counts = [(1, 1), (0, 1), (1, 1)]
    assert effective_samples(counts) == 3
    assert accuracy_interval(counts) == pytest.approx(proportion_confint(2, 3, method="wilson"))


def test_few_questions_of_many_samples_widen_by_students_t():
    """3 questions x 16 samples covered 82-85% of the time at the normal's 1.96 (simulated): t with 2 df is 4.30."""
    counts = [(4, 16), (10, 16), (13, 16)]
    n_eff = effective_samples(counts)
    normal = proportion_confint(27 / 48 * n_eff, n_eff, method="wilson")
    low, high = accuracy_interval(counts)
    assert low < normal[0] - 0.1 and high > normal[1] + 0.1


def test_confidence_is_passed_through_and_no_questions_have_no_interval():
    counts = [(3, 5), (1, 5), (4, 5), (2, 5)]
    n_eff = effective_samples(counts)
    assert 0 < n_eff < 20
    assert accuracy_interval(counts, confidence=0.9) == pytest.approx(
        clustered_wilson(0.5 * n_eff, n_eff, questions=4, confidence=0.9)
    )
    assert wilson(0.0, 10) == pytest.approx(proportion_confint(0, 10, method="wilson"))
    assert wilson(1.0, 10) == pytest.approx(proportion_confint(10, 10, method="wilson"))
    assert accuracy_interval([]) is None
