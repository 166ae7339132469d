"""callbacks.heldout_pairs.paired_change: the per-question test behind the held-out alarms, over the questions both
evaluations graded (a question whose every sample went unsettled is no share of 0), Bonferroni-corrected."""

from __future__ import annotations

import pytest

from callbacks.heldout_pairs import CORRECT, UNPARSEABLE, paired_change


def _evaluation(rows: dict[str, list[int]]) -> dict:
    return {"per_question": rows}


def test_a_question_the_grader_settled_nothing_of_is_left_out_of_the_correct_share():
    """q9's two samples timed out at the latest step: no share of 0 of 0 (a division by zero), no fall to 0."""
    earlier = _evaluation({f"q{i}": [2, 2, 0, 0] for i in range(10)})
    latest = _evaluation({f"q{i}": [0, 2, 0, 0] for i in range(9)} | {"q9": [0, 2, 0, 2]})
    mean, p, questions = paired_change(earlier, latest, CORRECT, references=1)
    assert (mean, questions) == (-1.0, 9)
    assert p == pytest.approx(2 / 2**9)


def test_an_unsettled_sample_still_counts_in_the_unparseable_share():
    """An unsettled sample has an answer: the unparseable share stays over all samples, so q0 is paired too."""
    earlier = _evaluation({"q0": [0, 2, 0, 2], "q1": [0, 2, 0, 0]})
    latest = _evaluation({"q0": [0, 2, 1, 1], "q1": [0, 2, 1, 0]})
    assert paired_change(earlier, latest, UNPARSEABLE, references=1) == (0.5, 0.5, 2)


def test_a_history_written_before_unsettled_samples_were_counted_pairs_its_three_columns():
    earlier = _evaluation({"q0": [2, 2, 0], "q1": [2, 2, 0]})
    latest = _evaluation({"q0": [0, 2, 0, 0], "q1": [1, 2, 0, 1]})
    # q0 fell from 2/2 to 0/2; q1 holds at 1/1 graded (its other sample unsettled): one difference of two.
    assert paired_change(earlier, latest, CORRECT, references=1) == (-0.5, 1.0, 2)
    assert paired_change(latest, earlier, CORRECT, references=1) == (0.5, 1.0, 2)


def test_only_questions_both_evaluated_are_paired_and_counted():
    earlier = _evaluation({"q0": [2, 2, 0, 0], "q1": [2, 2, 0, 0], "gone": [0, 2, 0, 0]})
    latest = _evaluation({"q0": [0, 2, 0, 0], "q1": [0, 2, 0, 0], "new": [2, 2, 0, 0]})
    assert paired_change(earlier, latest, CORRECT, references=1) == (-1.0, 0.5, 2)
    assert paired_change(earlier, _evaluation({"new": [0, 2, 0, 0]}), CORRECT, references=1) is None


def test_the_bonferroni_correction_multiplies_the_p_value_and_caps_it_at_one():
    earlier = _evaluation({f"q{i}": [2, 2, 0, 0] for i in range(4)})
    latest = _evaluation({f"q{i}": [0, 2, 0, 0] for i in range(4)})
    assert paired_change(earlier, latest, CORRECT, references=3) == (-1.0, 3 * 2 / 2**4, 4)
    assert paired_change(earlier, latest, CORRECT, references=10)[1] == 1.0  # not 1.25


def test_no_change_on_any_question_is_no_test():
    same = _evaluation({"q0": [1, 2, 0, 0], "q1": [0, 2, 0, 1]})
    assert paired_change(same, same, CORRECT, references=1) is None
