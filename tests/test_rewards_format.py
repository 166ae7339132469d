"""The format reward: its four parts in the three shipped styles, its cap, and that it pays less than a correct answer.

python -m pytest tests/test_rewards_format.py -q
"""

import pytest
from _rewards_helpers import chat

from rewards._layout import format_parts
from rewards.correctness import Correctness
from rewards.format import Format

R = "<reasoning>\n9 eggs at $2 each: 9 * 2 = 18.\n</reasoning>\n"

# (id, completion, (reasoning, answer, number, clean_end), reward at the default cap 1.5)
TAGS = [
    ("complete", R + "<answer>\n18\n</answer>\n", (True, True, True, True), 1.5),
    ("money-is-a-number", R + "<answer>$1,080.</answer>", (True, True, True, True), 1.5),
    ("adjacent-tags", "<reasoning>9 * 2 = 18</reasoning><answer>18</answer>", (True, True, True, True), 1.5),
    ("no-reasoning", "<answer>18</answer>", (False, True, True, True), 1.0),
    ("empty-reasoning", "<reasoning>  \n</reasoning><answer>18</answer>", (False, True, True, True), 1.0),
    ("answer-with-words", R + "<answer>18 dollars</answer>", (True, True, False, True), 1.25),
    ("answer-latex", R + "<answer>\\boxed{18}</answer>", (True, True, False, True), 1.25),
    ("trailing-text", R + "<answer>18</answer>\nHope this helps!", (True, True, True, False), 1.25),
    ("two-answers", R + "<answer>18</answer><answer>20</answer>", (True, False, False, False), 0.5),
    (
        "reasoning-after-answer",
        "<answer>18</answer><reasoning>9 * 2</reasoning>",
        (False, True, True, False),
        0.75,
    ),
    ("unparseable-answer", R + "<answer>eighteen</answer>", (True, False, False, False), 0.5),
    (
        "hedged-answer",
        R + "<answer>17 or 18</answer>",
        (True, False, False, False),
        0.5,
    ),  # the grader reads none
    ("unclosed-answer", R + "<answer>18", (True, False, False, False), 0.5),
    ("no-tags", "9 * 2 = 18. The answer is 18.", (False, False, False, False), 0.0),
    ("empty", "", (False, False, False, False), 0.0),
]
HASH = [
    ("complete", "9 * 2 = 18 dollars.\n#### 18", (True, True, True, True), 1.5),
    ("complete-trailing-newline", "9 * 2 = 18.\n#### 1,080\n\n", (True, True, True, True), 1.5),
    ("no-reasoning", "#### 18", (False, True, True, True), 1.0),
    ("unit-words", "9 * 2 = 18\n#### 18 dollars", (True, True, False, True), 1.25),
    ("trailing-note", "9 * 2 = 18\n#### 18\nNote: assumes no eggs break.", (True, True, True, False), 1.25),
    ("heading-only", "#### Step 1: eggs\n9 * 2 = 18", (False, False, False, False), 0.0),
    ("heading-then-answer", "#### Step 1: eggs\n9 * 2 = 18\n#### 18", (True, True, True, True), 1.5),
    ("no-marker", "The answer is 18.", (False, False, False, False), 0.0),
    ("hedged-answer", "9 * 2 = 18\n#### 17 or 18", (True, False, False, False), 0.5),
    ("tags-under-hash", R + "<answer>18</answer>", (False, False, False, False), 0.0),
]

M = "The legs are 3 and 4, so the hypotenuse is $\\sqrt{3^2 + 4^2} = 5$.\n"
BOXED = [
    ("complete", M + "The answer is $\\boxed{5}$.", (True, True, True, True), 1.5),
    ("display-math", M + "\\[\\boxed{5}\\]", (True, True, True, True), 1.5),
    ("inline-paren", M + "So \\(\\boxed{5}\\).\n", (True, True, True, True), 1.5),
    # MATH's answers are LaTeX: paying them less than a number would teach decimals (0.5 over \frac{1}{2})
    ("latex-answer", M + "$\\boxed{\\frac{\\pi}{2}}$", (True, True, True, True), 1.5),
    ("nested-braces", M + "$\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$", (True, True, True, True), 1.5),
    ("no-reasoning", "$\\boxed{5}$", (False, True, True, True), 1.0),
    ("trailing-text", M + "$\\boxed{5}$. Let me double-check.", (True, True, True, False), 1.25),
    ("two-boxes", M + "$\\boxed{4}$ no wait, $\\boxed{5}$", (False, False, False, False), 0.0),
    ("empty-box", M + "$\\boxed{}$", (False, False, False, False), 0.0),
    ("unclosed-box", M + "$\\boxed{5", (False, False, False, False), 0.0),
    ("blank-box", M + "\\boxed{ }", (False, False, False, False), 0.0),
    ("hash-under-boxed", "3 + 4 = 7\n#### 7", (False, False, False, False), 0.0),
]


@pytest.mark.parametrize(("text", "parts", "reward"), [c[1:] for c in BOXED], ids=[c[0] for c in BOXED])
def test_boxed_parts(text, parts, reward):
    assert tuple(format_parts(text, "boxed")) == parts
    assert Format(style="boxed")(completions=[chat(text)]) == [reward]


def test_boxed_style_reads_the_box_for_strict_grading_and_format_ok():
    from rewards.answers import format_ok, strict_correct

    text = M + "$\\boxed{5}$"
    assert format_ok(text, "boxed") and not format_ok("<answer>5</answer>", "boxed")
    assert strict_correct(text, "5", "boxed") and not strict_correct(M + "#### 5", "5", "boxed")
    assert strict_correct(text, "5") and not strict_correct(text, "5", "hash")  # None: any shipped style


def test_a_boxed_format_reward_needs_a_prompt_that_asks_for_a_box():
    from recipes.recipe import RecipeError, load_recipe

    with pytest.raises(RecipeError, match=r"pays for the boxed layout, .* never mentions '\\\\boxed'"):
        load_recipe("math_tiny", ["data.system_prompt='Answer with a number.'"])


@pytest.mark.parametrize(("text", "parts", "reward"), [c[1:] for c in TAGS], ids=[c[0] for c in TAGS])
def test_tags_parts(text, parts, reward):
    assert tuple(format_parts(text, "tags")) == parts
    assert Format(style="tags")(completions=[text]) == [reward]
    assert Format(style="tags")(completions=[chat(text)]) == [reward]


@pytest.mark.parametrize(("text", "parts", "reward"), [c[1:] for c in HASH], ids=[c[0] for c in HASH])
def test_hash_parts(text, parts, reward):
    assert tuple(format_parts(text, "hash")) == parts
    assert Format(style="hash")(completions=[text]) == [reward]


def test_max_reward_scales_every_part():
    texts = [R + "<answer>18</answer>", "<answer>18</answer>", R + "<answer>18 dollars</answer>"]
    assert Format(max_reward=3.0)(completions=texts) == [3.0, 2.0, 2.5]
    assert Format(max_reward=1.0)(completions=texts) == [1.0, pytest.approx(2 / 3), pytest.approx(5 / 6)]


def test_format_alone_pays_less_than_a_correct_answer():
    perfect_format_wrong_answer = R + "<answer>17</answer>"
    short_reasoning_correct = R + "<answer>18</answer>"
    paid_format = Format()(completions=[perfect_format_wrong_answer])[0]
    paid_correct = Correctness()(
        completions=[short_reasoning_correct], completion_ids=[[1] * 100], gold=["18"]
    )[0]
    wrong_correctness = Correctness()(
        completions=[perfect_format_wrong_answer], completion_ids=[[1] * 100], gold=["18"]
    )
    assert paid_format + wrong_correctness[0] == 1.5 < paid_correct == 5.0


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"style": "hashes"}, "Unknown format style 'hashes'. Did you mean 'hash'"),
        ({"max_reward": 0}, "max_reward must be a number > 0"),
        ({"max_reward": "1.5"}, "max_reward must be a number > 0, got '1.5'"),
    ],
)
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        Format(**params)
