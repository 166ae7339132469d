"""Snippet reading (rewards._parsing): a number followed by its working in parentheses, and when that aside is
a hedge or no working at all."""

import pytest

from rewards._layout import format_parts
from rewards._parsing import HEDGED, _is_working, answer_from_snippet, latex_from_snippet
from rewards._precedence import find_answer
from rewards.answers import is_correct


@pytest.mark.parametrize("aside", ["20 - 2", "36 / 2", "because 20 - 2 = 18", "9 eggs at 2 each"])
def test_working_in_parentheses_is_the_number_it_explains(aside):
    assert _is_working("18", aside)
    assert answer_from_snippet(f"18 ({aside})", strict=True) == "18"


@pytest.mark.parametrize(
    "aside",
    [
        "20 - ",  # does not parse
        "1/0",  # divides by zero
        "20 - 3",  # comes to another number
        "give or take",  # a hedge in words
        "about 17 to 19",
        "20 +/- 2 dollars",
        r"\pm 2 dollars",
        "2 + 3",  # no words: only arithmetic that comes to the number counts
        "2, 16",  # neither arithmetic nor words
        "2**4 + 2",  # powers are never evaluated (9**9**9 would not finish)
    ],
)
def test_an_aside_that_is_a_hedge_or_not_the_working_is_not_working(aside):
    assert not _is_working("18", aside)


def test_a_final_line_with_a_hedged_aside_is_no_answer():
    # The hash rule reads nothing there, so the grade falls to the last number and the format pays no answer.
    text = "So 9 * 2 = 18.\n#### 18 (about 17 to 19)"
    assert answer_from_snippet("18 (about 17 to 19)", strict=True) is None
    assert find_answer(text).rule == "last_number" and not is_correct(text, "18")
    assert not format_parts(text, "hash").answer
    text = "So 9 * 2 = 18.\n#### 18 (give or take)"
    assert find_answer(text).rule == "last_number" and not format_parts(text, "hash").answer
    text = "So 9 * 2 = 18.\n#### 18 (because 9 * 2)"
    assert find_answer(text) == ("18", text.index("####"), "hash") and format_parts(text, "hash").answer


@pytest.mark.parametrize(
    ("snippet", "answer"),
    [
        ("x = 18", "18"),
        ("a + b = 7", "7"),  # working on the left of the last "=": the value is on its right
        ("y = 2x + 3", "2x + 3"),
        ("5x - 7y + 4 = 0", "5x - 7y + 4 = 0"),  # an equation is the answer as a whole
        ("x = 2y = 4", "x = 2y = 4"),
        ("x = 1, x = 2", HEDGED),  # one variable given two values
        ("x = 12 - 4, x = 8", "8"),
    ],
)
def test_the_value_after_the_last_equals_sign_unless_the_left_side_is_an_equation(snippet, answer):
    assert answer_from_snippet(snippet) == answer


def test_a_symbolic_answer_is_whole_only_without_prose():
    # strict: a "####" line, which must be an answer as a whole
    assert answer_from_snippet(r"\frac{1}{2}", strict=True) == r"\frac{1}{2}"
    assert answer_from_snippet(r"2^{10}", strict=True) == "2^{10}"
    assert answer_from_snippet(r"half is \frac{1}{2}", strict=True) is None


def test_a_latex_snippet_of_prose_yields_its_last_math_segment_or_first_number():
    assert latex_from_snippet("we get $x = 2$ first, so the answer is $x^2 + 1$") == "x^2 + 1"
    assert latex_from_snippet("the total is 42 apples, not 41") == "42"  # not strict by default
    assert latex_from_snippet("the total is 42 apples", strict=True) is None
    assert latex_from_snippet("there are many apples here") is None
