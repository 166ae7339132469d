r"""Gold answers and the number-vs-expression rule of rewards.answers: what a gold is read as, what it refuses.

python -m pytest tests/test_rewards_gold.py -q
"""

import pytest

from rewards.answers import Gold, answers_match, grade, read_gold


def test_a_hedged_gsm8k_final_line_is_a_data_error_not_a_gold_nothing_can_match():
    with pytest.raises(ValueError, match="is not one number or expression"):
        read_gold("Half of 34 is 17.\n#### 17 or 18")
    # Without "####" it is a LaTeX answer naming two values, as MATH's 1 \pm \sqrt{19} is.
    assert read_gold("17 or 18") == Gold("17 or 18", latex=True)


def test_the_answer_after_a_gsm8k_marker_is_never_a_latex_gold():
    assert read_gold(r"She eats 3 of 4 slices.\n#### \frac{3}{4}") == Gold(r"\frac{3}{4}", latex=False)
    assert grade(r"so \boxed{\frac{6}{8}}", r"#### \frac{3}{4}").correct


def test_a_number_equals_a_short_expression_of_it_either_way_round():
    assert answers_match("18", r"\frac{36}{2}") and answers_match(r"\frac{36}{2}", "18")
    assert not answers_match("17", r"\frac{36}{2}")
    # Against a number, an expression sympy cannot settle cheaply is wrong (latex=True would ask math-verify).
    assert not answers_match("(((2)))", "2")
