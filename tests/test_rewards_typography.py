"""rewards._typography piece by piece: every vulgar fraction's value, every typeset space in a digit group, what
makes a mixed number, and the spellings of the imaginary unit set apart (see test_rewards_typeset.py for the
grader as a whole)."""

from __future__ import annotations

import pytest

from rewards._typography import imaginary_unit, vulgar_fractions
from rewards.answers import grade

FIGURE_SPACE = "\u2007"


@pytest.mark.parametrize(
    ("char", "value"),
    [("½", "1/2"), ("⅓", "1/3"), ("⅔", "2/3"), ("¼", "1/4"), ("¾", "3/4"), ("⅕", "1/5"), ("⅖", "2/5"),
     ("⅗", "3/5"), ("⅘", "4/5"), ("⅙", "1/6"), ("⅚", "5/6"), ("⅐", "1/7"), ("⅛", "1/8"), ("⅜", "3/8"),
     ("⅝", "5/8"), ("⅞", "7/8"), ("⅑", "1/9"), ("⅒", "1/10"), ("↉", "0/1")],
)  # fmt: skip
def test_every_vulgar_fraction_reads_its_exact_value(char, value):
    numerator, denominator = value.split("/")
    assert vulgar_fractions(char) == rf"\frac{{{numerator}}}{{{denominator}}}"


def test_a_tenth_and_zero_thirds_grade_as_their_values():
    """⅒ is 1/10 (not 1/9, the nearest fraction of a smaller denominator), ↉ is 0 (not no answer)."""
    assert grade("#### 2⅒", "2.1").correct and not grade("#### 2⅒", "2.111").correct
    assert grade("#### ↉", "0").correct


def test_a_figure_space_groups_digits_as_the_other_typeset_spaces_do():
    graded = grade(f"#### 1{FIGURE_SPACE}000{FIGURE_SPACE}000", "1000000")
    assert graded.correct and graded.found.answer == "1000000"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2.5½", r"2.5\frac{1}{2}"),  # a decimal's digits are no whole part: not 2.(11/2)
        ("1,5½", r"1,5\frac{1}{2}"),  # nor a grouped number's
        ("1234567890123½", r"1234567890123\frac{1}{2}"),  # 13 digits: no whole part of its last 12
        ("3 ½", r"\frac{7}{2}"),  # one space sets the parts of a mixed number apart
        ("3  ½", r"3  \frac{1}{2}"),  # two do not, as "1  000" is no one number
    ],
)
def test_only_a_whole_number_before_a_fraction_makes_a_mixed_number(text, expected):
    assert vulgar_fractions(text) == expected


@pytest.mark.parametrize(
    ("latex", "expected"),
    [(r"(1+2) i", "(1+2)i"), (r"\sqrt{3} i", r"\sqrt{3}i"), ("5~i", "5i"), (r"5\:i", "5i"), (r"5\;i", "5i"),
     (r"5\!i", "5i"), (r"5\ i", "5i"), (r"5 \cdot i", "5i"), (r"5\mathit{i}", "5i"), (r"5\textrm{i}", "5i"),
     (r"5\textit{i}", "5i"), (r"5\operatorname{i}", "5i"), (r"5\mathrm{ i }", "5i"), (r"5 \mathrm {i}", "5i")],
)  # fmt: skip
def test_every_spelling_of_the_unit_set_apart_is_written_next_to_its_coefficient(latex, expected):
    assert imaginary_unit(latex) == expected


@pytest.mark.parametrize("latex", ["5 in", "5 is", "5 i.e. 6", "x i", r"5 \cdot j"])
def test_a_word_after_a_number_or_an_i_after_a_letter_is_no_imaginary_unit(latex):
    assert imaginary_unit(latex) == latex


@pytest.mark.parametrize(
    ("text", "gold", "answer"),
    [("#### 1 000.50", "1000.5", "1000.5"), ("#### +1 000", "1000", "1000"), ("The answer is 1 000.0.", "1000", "1000")],
)  # fmt: skip
def test_a_number_in_digit_groups_is_normalised_as_a_plain_one(text, gold, answer):
    """A trailing zero and a plus sign go, as they do from 1,000.50 and +1,000: the grade compares canonical strings."""
    graded = grade(text, gold)
    assert graded.correct and graded.found.answer == answer
