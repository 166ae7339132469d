r"""Which candidate a precedence rule picks (rewards._precedence): the last one that reads as an answer, and a
boxed answer that is not a number is still final."""

import pytest

from rewards._precedence import find_answer


@pytest.mark.parametrize(
    ("text", "answer", "rule", "marker"),
    [
        ("First try: 2 + 2 = 4.\n#### 17\nNo, recount.\n#### 18", "18", "hash", "#### 18"),
        ("<answer>3</answer> wait, that is wrong: <answer>5</answer>", "5", "answer_tag", "<answer>5"),
        ("The answer is 3. No: the answer is 5.", "5", "phrase", "answer is 5"),
        # The last candidate is no answer, so the one before it counts (not the first of all).
        ("#### 1\n#### 17\n#### Step 3: check the sum", "17", "hash", "#### 17"),
        ("<answer>1</answer><answer>2</answer><answer>a cat</answer>", "2", "answer_tag", "<answer>2"),
        ("Answer: 4\nAnswer: 9\nAnswer: see above", "9", "phrase", "Answer: 9"),
    ],
)
def test_the_last_candidate_that_reads_as_an_answer_wins(text, answer, rule, marker):
    assert find_answer(text) == (answer, text.index(marker), rule)


def test_a_boxed_answer_that_is_not_a_number_never_falls_through():
    text = r"Facing north and turning right twice, she faces \boxed{\text{south}}, 2 turns later."
    assert find_answer(text) == (r"\text{south}", text.index(r"\boxed"), "boxed")
    text = r"So $\boxed{7}$, or rather $\boxed{\text{east}}$ after 3 moves."
    assert find_answer(text) == (r"\text{east}", text.rindex(r"\boxed"), "boxed")
