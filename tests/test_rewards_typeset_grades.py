"""Where the typeset reading reaches: an answer followed by a sentence, the last number's position, find_answer's default,
the lm-eval grades' style and patience, and GSM8K golds (see test_rewards_typeset.py for the readings)."""

from __future__ import annotations

import pytest

from rewards import answers
from rewards._gold import read_gold
from rewards._precedence import Found, find_answer
from rewards.answers import grade, lenient_correct, lm_eval_grades, strict_correct


@pytest.mark.parametrize(
    "text",
    [
        "The answer is 1 000. So 5 more.",
        "<answer>1 000. So 5 more.</answer>",
        "The answer is 1 000. That is all.",
    ],
)
def test_an_answer_in_digit_groups_followed_by_a_sentence_is_its_first_sentence_s_number(text):
    graded = grade(text, "1000")
    assert graded.correct and graded.found.answer == "1000"


def test_a_mixed_number_found_as_the_last_number_starts_at_its_whole_part():
    assert grade("She ate 3¼ pies.", "3.25").found == Found(r"\frac{13}{4}", 8, "last_number")


def test_find_answer_reads_typeset_numbers_unless_told_to_read_as_lm_eval_does():
    assert find_answer("#### 1 000") == Found("1000", 0, "hash")
    assert find_answer("She ate 3¼ pies.").answer == r"\frac{13}{4}"
    assert find_answer("She ate 3¼ pies.", typeset=False).answer == "3"


def test_lm_eval_strict_grade_reads_only_the_style_s_marker():
    strict, lenient = lm_eval_grades("So 7.\n<answer>7</answer>", "7", "hash")
    assert (strict.correct, lenient.correct) == (False, True)
    assert lm_eval_grades("So 7.\n<answer>7</answer>", "7", "tags")[0].correct


def test_patience_reaches_the_comparison_of_every_grade(monkeypatch):
    """``patient=True`` (evaluation) gives math-verify its longer bounds in the lm-eval grades too."""
    asked = []
    real = answers._match

    def spy(found, gold, latex, patient):
        asked.append(patient)
        return real(found, gold, latex, patient)

    monkeypatch.setattr(answers, "_match", spy)
    for patient in (True, False):
        asked.clear()
        grade(r"\boxed{\frac{2}{4}}", r"\frac{1}{2}", patient=patient)
        lm_eval_grades(r"<answer>\frac{2}{4}</answer>", r"\frac{1}{2}", "tags", patient=patient)
        strict_correct(r"<answer>\frac{2}{4}</answer>", r"\frac{1}{2}", "tags", patient=patient)
        lenient_correct(r"\boxed{\frac{2}{4}}", r"\frac{1}{2}", patient=patient)
        assert asked == [patient] * 5


def test_a_gsm8k_gold_is_the_number_after_the_last_marker():
    assert read_gold("She has #### 5 marbles left.\n#### 1,080") == ("1080", False)
    assert read_gold("She pays 9 * 2 = 18.\n#### 18. She is done.") == ("18", False)  # the first sentence's


def test_lm_eval_s_strict_and_lenient_checks_read_numbers_as_lm_eval_does():
    """strict_correct and lenient_correct, like lm_eval_grades: "#### 1 000" is no 1000, "3¼" is 3."""
    assert not strict_correct("#### 1 000", "1000", "hash")
    assert lenient_correct("She ate 3¼ pies.", "3") and not lenient_correct("She ate 3¼ pies.", "3.25")


def test_an_unreadable_gold_s_error_quotes_its_end():
    """A long solution whose end holds no answer: the error shows the end, where the answer should be."""
    with pytest.raises(ValueError, match="no answer at the end'"):
        read_gold("Some working. " * 30 + "There is no answer at the end")
