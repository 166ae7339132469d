"""Typeset numbers (rewards._typography): digit groups split by spaces, vulgar fractions, a unicode minus, and the
imaginary unit set apart from its coefficient, read alike by the grade, extract_answer and the format reward, while
lm-eval's grades keep reading them as lm-eval's regexes do."""

from __future__ import annotations

import pytest

from rewards._gold import read_gold
from rewards._layout import format_parts
from rewards.answers import extract_answer, grade, lm_eval_grades

NNBSP, THIN, NBSP, MINUS = "\u202f", "\u2009", "\u00a0", "\u2212"


def _reads(text: str, gold: str, answer: str) -> None:
    """``text`` graded correct against ``gold``, with ``answer`` found by the grade and by extract_answer alike."""
    graded = grade(text, gold)
    assert graded.correct and graded.found.answer == answer
    assert extract_answer(text, gold=gold) == answer


@pytest.mark.parametrize(
    ("text", "gold", "answer"),
    [
        ("So she earns 1,000.\n#### 1 000", "1000", "1000"),
        (f"#### 1{NNBSP}000", "1000", "1000"),
        (f"#### 1{THIN}000", "1000", "1000"),
        (f"#### 1{NBSP}000", "1000", "1000"),
        ("The answer is 1 000.", "1000", "1000"),
        ("The answer is 1 000 dollars.", "1000", "1000"),
        (f"<answer>${NNBSP}1{NNBSP}000</answer>", "1000", "1000"),
        (r"\boxed{1 000}", "1000", "1000"),  # LaTeX ignores the space; math-verify reads 1 * 000 = 0
        ("#### 3 000 000", "3000000", "3000000"),
        ("#### -12 345.5", "-12345.5", "-12345.5"),
    ],
)
def test_a_whole_answer_in_space_split_groups_of_three_is_one_number(text, gold, answer):
    _reads(text, gold, answer)
    if "####" in text:  # the format reward reads the #### line as the grader does: a plain number
        assert format_parts(text, "hash")[1:] == (True, True, True)  # an answer, a plain number, a clean end


@pytest.mark.parametrize(
    ("text", "not_gold"),
    [
        ("#### 12 15", "1215"),  # two numbers: a group of two digits is no thousands group
        ("#### 1 0000", "10000"),
        ("#### 1000 000", "1000000"),  # a first group of four digits
        (f"#### 1 000{THIN}000", "1000000"),  # two kinds of space: not one number's grouping
        ("#### 1  000", "1000"),  # two spaces
        ("On day 3 000 people came.", "3000"),  # running text: no whole answer, not merged
    ],
)
def test_separate_numbers_are_never_merged(text, not_gold):
    assert extract_answer(text) != not_gold and not grade(text, not_gold).correct


def test_lm_eval_grades_read_space_split_groups_as_lm_eval_does():
    """lm-eval's strict regex reads "#### 1 000" as 1 and its flexible one as 000: wrong for 1000, as these say."""
    strict, lenient = lm_eval_grades("#### 1 000", "1000", "hash")
    assert (strict.correct, strict.found, lenient.correct, lenient.found.answer) == (False, None, False, "0")
    assert grade("#### 1 000", "1000").correct


@pytest.mark.parametrize(
    ("text", "gold", "answer"),
    [
        ("#### ½", "0.5", r"\frac{1}{2}"),
        ("#### 3¼", "3.25", r"\frac{13}{4}"),
        ("The answer is 3 ½.", "3.5", r"\frac{7}{2}"),
        ("<answer>-2 ½</answer>", "-2.5", r"-\frac{5}{2}"),
        (r"\boxed{⅔}", r"\frac{2}{3}", r"\frac{2}{3}"),  # a LaTeX gold: math-verify could not read ⅔
        ("She ate 3¼ pies.", "3.25", r"\frac{13}{4}"),  # the last number is the whole mixed number
    ],
)
def test_vulgar_fractions_and_mixed_numbers_read_their_value(text, gold, answer):
    _reads(text, gold, answer)


@pytest.mark.parametrize(
    ("text", "not_gold"),
    [("#### 3¼", "3"), ("#### 3¼", "4"), ("She ate 3¼ pies.", "3"), ("#### ⅔", "0.67"), ("#### ½", "2")],
)
def test_a_vulgar_fraction_is_never_read_as_its_whole_part_or_its_digits(text, not_gold):
    assert not grade(text, not_gold).correct


def test_lm_eval_grades_read_a_mixed_number_as_lm_eval_does():
    """lm-eval's regexes read the 3 of "3¼" and nothing of "½"."""
    assert [g.correct for g in lm_eval_grades("#### 3¼", "3.25", "hash")] == [False, False]
    assert lm_eval_grades("She ate 3¼ pies.", "3")[1].correct
    assert lm_eval_grades("#### ½", "0.5", "hash")[0].found is None


@pytest.mark.parametrize(
    ("text", "gold", "answer"),
    [(f"#### {MINUS}3", "-3", "-3"), (f"The answer is {MINUS}5.", "-5", "-5"), (f"#### {MINUS}1 000", "-1000", "-1000"),
     (rf"\boxed{{6 {MINUS} 5i}}", "6 - 5i", "6 - 5i"), (f"#### {MINUS}½", "-0.5", r"-\frac{1}{2}")],
)  # fmt: skip
def test_a_unicode_minus_is_a_minus(text, gold, answer):
    _reads(text, gold, answer)


@pytest.mark.parametrize(
    ("completion", "answer"),
    [(r"\boxed{6 - 5 i}", "6 - 5i"), (r"\boxed{6-5i}", "6-5i"), (r"\boxed{6 - 5\,i}", "6 - 5i"),
     (r"\boxed{6 - 5 \cdot i}", "6 - 5i"), (r"\boxed{6-5\mathrm{i}}", "6-5i"), (r"\boxed{-5i + 6}", "-5i + 6"),
     ("The answer is $6 - 5 i$.", "6 - 5i")],
)  # fmt: skip
@pytest.mark.parametrize("gold", ["6-5i", "6 - 5i"])  # MATH-500 writes "6 - 5i"
def test_a_complex_number_with_its_unit_set_apart_equals_the_gold(completion, answer, gold):
    _reads(completion, gold, answer)


@pytest.mark.parametrize(
    ("completion", "gold"),
    [(r"\boxed{6 + 5i}", "6-5i"), (r"\boxed{6 - 4 i}", "6-5i"), (r"\boxed{6-5j}", "6-5i"), (r"\boxed{6-5}", "6-5i"),
     (r"\boxed{5 i}", "5"), (r"\boxed{6 - 5 i}", "1"), (r"\boxed{6-5\mathrm{i}}", "1"), (r"\boxed{6-5\text{i}}", "1")],
)  # fmt: skip
def test_a_complex_number_never_equals_another_value_nor_its_real_part(completion, gold):
    """math-verify dropped ``\\mathrm{i}`` (6-5 = 1), and the number reader cut "5 i" as a unit word ("5 m")."""
    assert not grade(completion, gold).correct


@pytest.mark.parametrize(
    "text",
    ["#### 293 293", "The answer is 293 293", r"\boxed{293 293}", "<answer>293 293</answer>", "#### 293 293 293",
     f"#### 293{NNBSP}293"],
)  # fmt: skip
def test_a_final_number_written_again_is_that_number_not_one_in_digit_groups(text):
    """A model that says its answer twice ("#### 293 293") answers 293: it is no SI-grouped 293,293."""
    _reads(text, "293", "293")
    assert not grade(text, "293293").correct


@pytest.mark.parametrize(
    ("text", "gold"),
    [("#### 293 294", "293294"), ("#### -293 293", "-293293"), ("#### 293 293.5", "293293.5"), ("#### 100 100 000", "100100000")],
)  # fmt: skip
def test_groups_that_are_not_all_the_first_group_stay_one_number(text, gold):
    _reads(text, gold, gold)


def test_a_gold_and_the_format_reward_read_a_number_written_again_as_the_grader_does():
    assert read_gold("She has 293 apples.\n#### 293 293") == read_gold("293 293") == ("293", False)
    # An answer the grader reads (so the format reward pays for one), but the number twice is no plain number.
    assert format_parts("3 + 290 = 293\n#### 293 293", "hash") == (True, True, False, True)
    # boxed pays any answer that parses: MATH's are LaTeX
    assert format_parts(r"3 + 290 = 293, so $\boxed{293 293}$.", "boxed") == (True, True, True, True)
    tags = "<reasoning>3 + 290</reasoning><answer>293 293</answer>"
    assert format_parts(tags, "tags") == (True, True, False, True)
