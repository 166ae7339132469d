"""One model's accuracy interval (stats.intervals): inside [0, 1], Wilson's, and as wide as the questions allow."""

from __future__ import annotations

import pytest
from _stats_helpers import outcomes_from_counts, run_compare, write_records
from statsmodels.stats.proportion import proportion_confint

from stats.intervals import accuracy_interval


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
        ([(0, 5)] * 20, (0.0, 0.17)),  # nothing right: each question counts once
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
    assert clustered == pytest.approx(proportion_confint(5, 20, method="wilson"), rel=0.05)
    mixed = accuracy_interval([(1, 5)] * 5 + [(2, 5)] * 5 + [(0, 5)] * 10)  # samples of a question disagree
    assert mixed[1] - mixed[0] < clustered[1] - clustered[0]
