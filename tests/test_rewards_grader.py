r"""The answer grader (rewards.answers) on realistic completions: Llama 3.1 and Qwen 2.5 styles, markdown,
LaTeX, tags, `####`, units, money, negatives, thousands separators, several candidates, trailing notes.

    python -m pytest tests/test_rewards_grader.py -q
"""

import pytest

from rewards._precedence import find_answer
from rewards.answers import (
    extract_answer,
    format_ok,
    gold_answer,
    grade,
    is_correct,
    lenient_correct,
    strict_correct,
)

LLAMA_STEPS = (
    "## Step 1: Eggs left to sell\nJanet's ducks lay 16 eggs; she uses 3 + 4 = 7 of them, so 16 - 7 = 9 remain.\n\n"
    "## Step 2: Daily earnings\nShe sells 9 eggs at $2 each: 9 * 2 = 18.\n\n"
)
QWEN_STEPS = (
    "To determine how much Janet makes, we follow these steps:\n\n"
    "1. **Eggs left:**\n   \\[\n   16 - 3 - 4 = 9\n   \\]\n\n"
    "2. **Earnings:**\n   \\[\n   9 \\times 2 = 18\n   \\]\n\n"
)
REASONING = "<reasoning>\nShe has 16 - 3 - 4 = 9 eggs and sells them for $2: 9 * 2 = 18.\n</reasoning>\n"

# (id, completion, gold, extracted answer, correct)
CASES = [
    # Llama 3.1 8B Instruct
    ("llama-boxed", LLAMA_STEPS + "The final answer is: $\\boxed{18}$", "18", "18", True),
    ("llama-boxed-wrong", LLAMA_STEPS + "The final answer is: $\\boxed{20}$", "18", "20", False),
    ("llama-bold-answer", LLAMA_STEPS + "**Answer:** Janet makes $18 per day.", "18", "18", True),
    ("llama-answer-is", "9 eggs are left. 9 x 2 = 18.\nThe answer is 18.", "18", "18", True),
    ("llama-hash", LLAMA_STEPS + "#### 18", "18", "18", True),
    ("llama-hash-thousands", "The total is 12 * 90 = $1,080.\n#### 1,080", "1080", "1080", True),
    (
        "llama-md-headings",
        "#### Step 1: Cost\n20 - 15 = 5\n#### Step 2: Result\nShe needs 5 more dollars.",
        "5",
        "5",
        True,
    ),
    ("llama-dollar-latex", "Therefore, the total cost is $\\$1,080$.", "1080", "1080", True),
    ("llama-steps-last-number", LLAMA_STEPS + "So Janet makes 18 dollars every day.", "18", "18", True),
    # Qwen 2.5 Instruct
    (
        "qwen-prose-boxed",
        QWEN_STEPS + "Therefore, Janet makes \\(\\boxed{18}\\) dollars every day.",
        "18",
        "18",
        True,
    ),
    ("qwen-final-answer", QWEN_STEPS + "**Final Answer**\n\\[\n\\boxed{1080}\n\\]", "1080", "1080", True),
    ("qwen-latex-thousands", QWEN_STEPS + "\\[\n\\boxed{1{,}080}\n\\]", "1080", "1080", True),
    ("qwen-thin-space-thousands", "\\[\\boxed{1\\,080}\\]", "1080", "1080", True),
    ("qwen-boxed-dollar", "She makes \\(\\boxed{\\$18}\\) a day.", "18", "18", True),
    ("qwen-boxed-text-unit", "\\[\\boxed{18 \\text{ dollars}}\\]", "18", "18", True),
    ("qwen-boxed-text-only", "\\[\\boxed{\\text{18 dollars}}\\]", "18", "18", True),
    ("qwen-boxed-text-money", "\\boxed{\\text{\\$1,080}}", "1080", "1080", True),
    ("qwen-boxed-percent", "The discount is \\(\\boxed{50\\%}\\).", "50", "50", True),
    ("qwen-boxed-negative", "The change is \\(\\boxed{-7}\\).", "-7", "-7", True),
    ("qwen-boxed-unicode-minus", "The change is \\(\\boxed{\u22127}\\).", "-7", "-7", True),
    ("qwen-display-boxed", "\\[ \\boxed{18} \\]", "18", "18", True),
    ("qwen-boxed-space", "So \\boxed {18}.", "18", "18", True),
    ("fbox", "So \\fbox{18}.", "18", "18", True),
    # LaTeX and symbolic answers (math-verify)
    ("frac-half", "\\boxed{\\frac{1}{2}}", "0.5", "\\frac{1}{2}", True),
    ("dfrac-short", "\\boxed{\\dfrac12}", "0.5", "\\dfrac12", True),
    ("frac-integer", "\\boxed{\\frac{36}{2}}", "18", "\\frac{36}{2}", True),
    ("slash-fraction", "\\boxed{3/4}", "0.75", "3/4", True),
    ("nested-braces", "\\boxed{\\frac{\\sqrt{4}}{2}}", "1", "\\frac{\\sqrt{4}}{2}", True),
    ("qwen-dfrac-prose", "So the answer is \\(\\boxed{\\dfrac{3}{4}}\\).", "0.75", "\\dfrac{3}{4}", True),
    ("frac-wrong", "\\boxed{\\frac{1}{3}}", "0.5", "\\frac{1}{3}", False),
    ("boxed-equation", "\\boxed{x = 5}", "5", "5", True),
    ("boxed-decimal-zero", "\\boxed{18.0}", "18", "18", True),
    ("boxed-trailing-zeros", "\\boxed{18.00}", "18", "18", True),
    ("boxed-half-decimal", "\\boxed{0.50}", "0.5", "0.5", True),
    # several candidates, trailing notes, truncation
    ("two-boxed-last-wins", "First I got \\boxed{20}, but rechecking: \\boxed{18}", "18", "18", True),
    (
        "boxed-then-note",
        "\\boxed{18}\n\nNote: this assumes she sells all 9 eggs, 7 days a week.",
        "18",
        "18",
        True,
    ),
    ("boxed-beats-later-hash", "\\boxed{18}\n#### 20", "18", "18", True),
    ("hash-beats-later-tag", "#### 20\n<answer>18</answer>", "18", "20", False),
    ("tag-beats-later-phrase", "<answer>18</answer> The answer is 20", "18", "18", True),
    ("unclosed-boxed-phrase", "9 * 2 = 18, so the answer is \\boxed{18", "18", "18", True),
    # braces left open or closed twice before the box do not change how its own braces pair up
    (
        "stray-braces-before-boxed",
        "} {\\frac{9}{2 = 18 \\boxed{\\frac{36}{2}} }",
        "18",
        "\\frac{36}{2}",
        True,
    ),
    ("boxed-inside-open-brace", "{ so \\boxed{18} and {\\boxed{17}", "18", "17", False),
    (
        "phrase-later-mention",
        "The answer is 18.\nI double-checked and this answer is correct.",
        "18",
        "18",
        True,
    ),
    ("phrase-first-number", "So the answer is 18, not 20.", "18", "18", True),
    ("hash-then-note", "9 * 2 = 18\n#### 18\n\nNote: I assumed no eggs break.", "18", "18", True),
    # tags
    ("tags", REASONING + "<answer>\n18\n</answer>", "18", "18", True),
    ("tags-dollar", REASONING + "<answer>$18</answer>", "18", "18", True),
    ("tags-sentence", REASONING + "<answer>Janet makes $18 every day.</answer>", "18", "18", True),
    ("tags-equation", REASONING + "<answer>9 * 2 = 18</answer>", "18", "18", True),
    ("tags-wrong", REASONING + "<answer>17</answer>", "18", "17", False),
    ("tags-unclosed", REASONING + "<answer>\n18", "18", "18", True),
    ("tags-empty-answer", "<reasoning>9 * 2 = 18</reasoning><answer></answer>", "18", "18", True),
    ("tags-thousands", REASONING + "<answer>1,080</answer>", "1080", "1080", True),
    ("tags-boxed-inside", REASONING + "<answer>\\boxed{18}</answer>", "18", "18", True),
    ("tags-bold", REASONING + "<answer>**18**</answer>", "18", "18", True),
    ("tags-uppercase", "<REASONING>9*2</REASONING><ANSWER>18</ANSWER>", "18", "18", True),
    # GSM8K's "#### n"
    ("hash-alone", "#### 18", "18", "18", True),
    ("hash-money", "#### $18.00", "18", "18", True),
    ("hash-unit", "#### 18 dollars", "18", "18", True),
    ("hash-period", "#### 18.", "18", "18", True),
    ("hash-negative", "#### -12", "-12", "-12", True),
    ("hash-unicode-minus", "It fell by 3 degrees.\n#### \u22123", "-3", "-3", True),
    ("hash-decimal", "#### 2.5", "2.5", "2.5", True),
    ("hash-cents", "#### $0.75", "0.75", "0.75", True),
    ("hash-trailing-zero", "#### 3.50", "3.5", "3.5", True),
    ("hash-near-miss", "#### 180", "18", "180", False),
    # phrases
    ("answer-colon", "Answer: 42", "42", "42", True),
    ("answer-next-line", "The answer is:\n\n**42**", "42", "42", True),
    ("answer-unit", "The final answer is 3 hours.", "3", "3", True),
    ("answer-decimal-point", "The answer is .5", "0.5", "0.5", True),
    ("answer-in-words", "The answer is eighteen.", "18", None, False),
    # last number
    ("last-number", "She makes 9 * 2 = 18 dollars.", "18", "18", True),
    ("last-number-big", "In total she pays $1,234,567.89 for the house.", "1234567.89", "1234567.89", True),
    ("last-number-percent", "The discount is 25%.", "25", "25", True),
    ("last-number-negative", "Solving gives x = \u22125.", "-5", "-5", True),
    # working after the answer: the answer, not the working's last number
    ("hash-with-working", LLAMA_STEPS + "#### 18 (20-2)", "18", "18", True),
    ("tag-with-working", "<answer>18 (20 - 2)</answer>", "18", "18", True),
    ("phrase-with-working", "The answer is 18 (because 20 - 2 = 18).", "18", "18", True),
    ("phrase-then-more", "The answer is 18. Then 4 + 5 = 9.", "18", "18", True),
    ("hedge-in-parentheses", "#### 17 (or 18)", "18", None, False),
    ("hash-then-symbol", "9 * 2 = 18\n#### 18!", "18", "18", True),
    ("hash-then-currency", "#### 18 \u20ac", "18", "18", True),
    ("phrase-title-then-number", "The answer is Mr. Smith with 5 apples.", "5", "5", True),
    ("phrase-step-heading", "Answer: Step 1. Compute 3*4 = 12", "12", "12", True),
    ("product-is-no-aside", "So $\\boxed{2(3)}$.", "2", "2(3)", False),
    ("bare-number-aside-is-a-product", "Answer: 6 (3)", "6", "6 (3)", False),
    ("minus-plus-aside-is-a-hedge", "Answer: 18 (\\mp 1)", "18", None, False),
    ("product-before-working", "So $\\boxed{2 (3 + 4)}$.", "14", "2 (3 + 4)", True),
    ("range-in-parentheses", "#### 18 (17-19)", "18", "19", False),
    ("dollar-first-sentence", "The answer is $18$. Then 4 + 5 = 9.", "18", "18", True),
    ("choice-label-first-sentence", "The answer is (C) 18. Because 9*2 = 18.", "18", "18", True),
    # an unreadable answer line leaves the answer to the rules after it
    ("hash-unreadable-then-phrase", "#### 9:00 AM\nShe leaves home. The answer is 18.", "18", "18", True),
    ("hash-numbered-heading", "#### 1. Setup\nShe has 18 left.", "18", "18", True),
    # nothing to grade
    ("no-number", "I'm not sure how to solve this problem.", "18", None, False),
    ("empty", "", "18", None, False),
    ("cut-off", "Let's think step by step. First, Janet", "18", None, False),
]


def test_table_is_large_enough():
    assert len(CASES) >= 60
    assert len({case[0] for case in CASES}) == len(CASES)


@pytest.mark.parametrize(
    ("text", "gold", "answer", "correct"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_grades(text, gold, answer, correct):
    assert extract_answer(text) == answer
    assert is_correct(text, gold) is correct


@pytest.mark.parametrize(
    ("text", "gold", "answer"),
    [
        ("#### paris", "Paris", "paris"),  # a text gold: the answer is found, and graded correct
        (r"\boxed{\text{(C)}}", "C", r"\text{(C)}"),
        (r"So $x = \boxed{1 \pm \sqrt{19}}$", r"1 \pm \sqrt{19}", r"1 \pm \sqrt{19}"),
        (r"\boxed{18 \pm 1}", "18", None),  # hedged against a plain gold: no answer
        (r"\boxed{1 \pm \sqrt{2}}", r"\frac{1}{2}", None),  # a hedge the LaTeX gold lacks: no answer
        ("I don't know.", r"\frac{1}{2}", None),  # no answer against a LaTeX gold either
        ("#### 1,080", "1080", "1080"),
    ],
)
def test_extract_answer_given_the_gold_finds_what_grade_grades(text, gold, answer):
    assert extract_answer(text, gold=gold) == answer
    graded = grade(text, gold)
    assert (graded.found.answer if graded.found else None) == answer


@pytest.mark.parametrize(
    "gold", ["1080", "1,080", "#### 1,080", "12 * 90 = <<12*90=1080>>1080\n#### 1080", 1080, "1080.0"]
)
def test_gold_forms(gold):
    assert gold_answer(gold) == "1080"
    assert is_correct("So she pays \\boxed{1{,}080}.", gold)
    assert not is_correct("So she pays \\boxed{1{,}081}.", gold)


# A sentence was read as its first number: gold 3 for "... so 7.", and training rewarded the wrong answer.
@pytest.mark.parametrize(
    "gold",
    ["", "n/a", "#### ", "She has 3 apples and buys 4 more, so 7.", "2 hours 30 minutes", "Paris, France"],
)
def test_gold_without_one_answer_raises_with_the_expected_form(gold):
    with pytest.raises(
        ValueError, match=r"is not one number or expression; expected a plain answer such as '42'.*#### 42"
    ):
        is_correct("#### 18", gold)
    assert gold_answer(r"\text{Paris, France}") == r"\text{Paris, France}" and gold_answer("7 apples") == "7"
    assert gold_answer("The answer is 42") == "42"  # a sentence with one number answers with it


@pytest.mark.parametrize("gold", [None, True, [18]])
def test_gold_of_the_wrong_type_raises(gold):
    with pytest.raises(TypeError, match="gold answer must be a string or a number"):
        is_correct("#### 18", gold)


def test_precedence_is_configurable():
    text = "\\boxed{18}\n#### 20\n<answer>22</answer>\nThe answer is 24. Then 26"
    assert [find_answer(text).rule, find_answer(text).answer] == ["boxed", "18"]
    assert extract_answer(text, precedence=["hash", "boxed"]) == "20"
    assert extract_answer(text, precedence=["answer_tag"]) == "22"
    assert extract_answer(text, precedence=["phrase"]) == "24"
    assert extract_answer(text, precedence=["last_number"]) == "26"
    assert extract_answer("no marker 7", precedence=["boxed", "hash"]) is None
    with pytest.raises(ValueError, match="Did you mean 'boxed'"):
        extract_answer(text, precedence=["boxd"])
    with pytest.raises(ValueError, match="twice"):
        extract_answer(text, precedence=["hash", "hash"])


def test_answer_start_points_at_the_final_marker():
    text = "Reasoning here.\n#### 18"
    assert find_answer(text).start == text.index("####")
    long = "x" * 50_000 + " The answer is 7."
    assert find_answer(long) == ("7", long.index("answer"), "phrase")


def test_huge_text_reads_only_the_tail():
    assert extract_answer("\\boxed{1}" + "y" * 20_000 + "#### 2") == "2"


@pytest.mark.parametrize(
    ("text", "style", "ok"),
    [
        (REASONING + "<answer>18</answer>", None, True),
        (REASONING + "<answer>18</answer>", "tags", True),
        (REASONING + "<answer>18</answer>", "hash", False),
        ("9 * 2 = 18\n#### 18", None, True),
        ("9 * 2 = 18\n#### 18", "tags", False),
        ("<answer>eighteen</answer>", None, False),
        ("#### Step 1: add\nso 18", None, False),
        ("Therefore \\boxed{18}", None, True),  # boxed is a shipped style (MATH)
        ("Therefore \\boxed{18}", "hash", False),
        ("", None, False),
    ],
)
def test_format_ok(text, style, ok):
    assert format_ok(text, style=style) is ok


def test_format_ok_rejects_unknown_style():
    with pytest.raises(ValueError, match="Did you mean 'tags'"):
        format_ok("#### 1", style="tag")


@pytest.mark.parametrize(
    "completion",
    [r"\boxed{18 \pm 1}", r"$\boxed{18 ± 1}$", "The answer is 17 or 18.", "#### 17-19", "<answer>18 to 19</answer>",
     r"\boxed{17 \text{ or } 18}", "#### 18 or 17",
     # These scored on their last value: the "x =" was cut off before the hedge was looked for.
     "<answer>x=17 or x=18</answer>", r"\boxed{x = 18 \text{ or } x = 17}", r"\boxed{x=17, x=18}",
     r"\boxed{17 \text{ and } 18}", "The answer is 18 and 17."],
)  # fmt: skip
def test_a_hedged_answer_scores_on_none_of_its_values(completion):
    for gold in ("17", "18", "19"):
        assert not is_correct(completion, gold), (completion, gold)
    assert extract_answer(completion) is None


@pytest.mark.parametrize(
    ("completion", "gold"),
    [(r"\boxed{x = 2 \text{ or } x = -3}", "-3, 2"), (r"\boxed{x = 2 \text{ and } x = -3}", "-3, 2"),
     (r"\boxed{1 \text{ and } 2}", "1, 2"), ("<answer>x = 12 - 4, x = 8</answer>", "8"),
     ("<answer>a = 3, b = 4, a + b = 7</answer>", "7"), ("<answer>a = 3, so a = 3</answer>", "3")],
)  # fmt: skip
def test_every_solution_of_a_latex_gold_and_working_are_no_hedge(completion, gold):
    """A first version of the "x = 6 or x = 5" hedge graded these wrong: a LaTeX gold may list every solution."""
    assert is_correct(completion, gold)


def test_scientific_notation_reads_its_value_and_foreign_digits_never_score_falsely():
    assert extract_answer(r"\boxed{1.8e1}") == "18" and is_correct("#### 1.8E+1", "18")
    assert not is_correct("3 - 1 = 2 apples, not 20.\n#### 2e1", "2")
    for digits in ("١٨", "１８", "۱۸"):  # Arabic-Indic, full-width, Persian 18: misses, never a wrong credit
        assert not is_correct(f"#### {digits}", "1") and not is_correct(f"#### {digits}", "8")


@pytest.mark.parametrize(
    ("completion", "style", "strict", "lenient"),
    [
        ("3 + 4 = 7\n#### 7", "hash", True, True),
        ("3 + 4 = 7. The answer is 7.", "hash", False, True),  # right, but not in the asked-for format
        ("<answer>7</answer> and 8 more", "tags", True, False),  # flexible-extract reads the last number: 8
        (r"so \boxed{7}", "tags", False, True),
        ("#### 7", None, True, True),
    ],
)
def test_strict_and_lenient_grading_match_lm_eval_gsm8k(completion, style, strict, lenient):
    assert strict_correct(completion, "7", style) is strict
    assert lenient_correct(completion, "7") is lenient


def test_an_expression_with_a_single_letter_tail_is_a_value_not_a_range():
    assert is_correct(r"so $z = \boxed{6 - 5i}$.", "6 - 5i") and is_correct(r"\boxed{1 - 12i}", "1 - 12i")
    assert not is_correct("#### 17-19 apples", "17") and not is_correct("#### 17-19 apples", "19")
