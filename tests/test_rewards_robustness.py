r"""No reward raises or hangs on any model output, on the main thread or off it.

    python -m pytest tests/test_rewards_robustness.py -q

The bound: grading one completion through every reward and the grader takes at most
MAX_SECONDS_PER_COMPLETION, whatever the text (1 MB, deep brackets, \boxed{9^{9^{9^9}}}, ...). The
worst measured case is ~0.2 s (a symbolic answer math-verify must parse); the rest take milliseconds.
"""

import math
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from _rewards_helpers import chat
from hypothesis import given, settings
from hypothesis import strategies as st

from rewards import build_rewards, reward_name
from rewards.answers import extract_answer, format_ok, is_correct
from rewards.format import Format

MAX_SECONDS_PER_COMPLETION = 1.0

ADVERSARIAL = {
    "empty": "",
    "1 MB of letters": "x" * 1_000_000,
    "1 MB of digits": "7" * 1_000_000,
    "deep braces": "{" * 200_000,
    "many boxed": "\\boxed{" * 50_000,
    "deep boxed": "\\boxed{" + "{" * 100_000 + "18" + "}" * 100_000 + "}",
    "control characters": "".join(chr(i) for i in range(32)) * 5_000 + "\x00#### 18\x7f",
    "5,000 digits": "#### " + "9" * 5_000,
    "5,000 digits boxed": "\\boxed{" + "9" * 5_000 + "}",
    "5,000 digits symbolic": "\\boxed{\\frac{" + "9" * 5_000 + "}{2}}",
    "power tower": "\\boxed{9^{9^{9^9}}}",
    "huge power": "\\boxed{9^{99999}}",
    "factorial": "\\boxed{100000!}",
    "symbolic expansion": "\\boxed{(x+y+z+w+v+u+t)^9}",
    "radical expansion": "\\boxed{(\\sqrt{2}+\\sqrt{3}+\\sqrt{5}+\\sqrt{7})^9}",
    "deep parentheses": "\\boxed{" + "(" * 16 + "18" + ")" * 16 + "}",
    "deep latex groups": "\\boxed{" + "{" * 16 + "18" + "}" * 16 + "}",
    "two-deep groups": "\\boxed{((1))((2))((3))((4))((5))((6))((7))((8))}",
    "nested fractions": "\\boxed{" + "\\frac{" * 5_000 + "}",
    "nested text": "\\boxed{" + "\\text{" * 3_000 + "18" + "}" * 3_000 + "}",
    "unicode digits": "The answer is \u0663\u0664, or \uff11\uff18, or \U0001d7d9.",
    "lone surrogate": "\ud800 \\boxed{18}",
    "answer tags": "<answer>" * 100_000,
    "reasoning tags": "<reasoning>" * 100_000,
    "hashes": "####" * 200_000,
    "heading lines": "#### Step\n" * 50_000,
    "answer phrases": "the answer is " * 70_000,
    "commas": "1," * 300_000,
    "minus signs": "\u2212" * 300_000 + "1",
    "dots": "1." * 300_000,
    "every marker": "\\boxed{1}#### 2<answer>3</answer> answer is 4 " * 20_000,
}


def _rewards():
    specs = [
        {"name": "correctness", "max_completion_length": 64},
        {"name": "format", "style": "tags"},
        {"name": "soft_overlong", "max_completion_length": 64, "soft_punish_cache": 16},
        {"name": "repetition"},
    ]
    rewards = {reward_name(f): f for f in build_rewards(specs)[0]}
    rewards["format-hash"] = Format(style="hash")
    return rewards


REWARDS = _rewards()


def _grade(text, n_ids=70):
    """Every reward on one completion (plain and conversational), and the grader's three functions."""
    outputs = {}
    for completion in (text, chat(text)):
        for name, reward in REWARDS.items():
            result = reward(
                prompts=["q"], completions=[completion], completion_ids=[[5] * n_ids], gold=["18"]
            )
            outputs.setdefault(name, []).append(result)
    answer, correct, formatted = extract_answer(text), is_correct(text, "18"), format_ok(text)
    assert answer is None or isinstance(answer, str)
    assert isinstance(correct, bool) and isinstance(formatted, bool)
    return outputs, correct


def _assert_valid(outputs):
    for name, results in outputs.items():
        for result in results:
            assert isinstance(result, list) and len(result) == 1, name
            assert result[0] is None or (isinstance(result[0], float) and math.isfinite(result[0])), name
    for result in outputs["correctness"]:
        assert 0.0 <= result[0] <= 5.0
    for result in outputs["format"] + outputs["format-hash"]:
        assert 0.0 <= result[0] <= 1.5


@pytest.fixture(scope="module", autouse=True)
def _warm_up():
    _grade("\\boxed{\\frac{36}{2}}")  # import math-verify and sympy before timing anything


@pytest.mark.parametrize("text", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_adversarial_input_is_graded_in_bounded_time(text):
    start = time.perf_counter()
    outputs, _ = _grade(text)
    per_completion = (time.perf_counter() - start) / 2  # plain and conversational
    _assert_valid(outputs)
    assert per_completion < MAX_SECONDS_PER_COMPLETION


def test_adversarial_inputs_are_bounded_off_the_main_thread():
    """Off the main thread math-verify has no timeout at all: only our own limits bound the work."""
    symbolic = [ADVERSARIAL[k] for k in ADVERSARIAL if "power" in k or "expansion" in k or "deep" in k]
    symbolic += [ADVERSARIAL["two-deep groups"], ADVERSARIAL["5,000 digits symbolic"]]

    def timed(text):
        start = time.perf_counter()
        _assert_valid(_grade(text)[0])
        return (time.perf_counter() - start) / 2

    with ThreadPoolExecutor(max_workers=2) as pool:
        seconds = list(pool.map(timed, symbolic))
    assert max(seconds) < MAX_SECONDS_PER_COMPLETION


def test_rewards_work_from_a_thread_pool_and_agree_with_the_main_thread():
    texts = [
        "\\boxed{\\frac{36}{2}}",
        "\\boxed{\\dfrac12}",
        "<reasoning>9*2</reasoning><answer>18</answer>",
        "#### 17",
    ]
    golds = ["18", "0.5", "18", "18"]

    def run(pair):
        text, gold = pair
        return [r(completions=[text], completion_ids=[[5] * 120], gold=[gold]) for r in REWARDS.values()]

    on_main = [run(pair) for pair in zip(texts, golds)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        off_main = list(pool.map(run, zip(texts, golds)))
    assert off_main == on_main
    assert [result[0] for result in on_main] == [
        [5.0],
        [5.0],
        [5.0],
        [0.0],
    ]  # correctness, math-verify included


MARKERS = ["\\boxed{", "{", "}", "####", "#", " ", "\n", "<answer>", "</answer>", "<reasoning>", "</reasoning>",
           "answer is", "Answer:", "1", "18", ",", "9", ".", "-", "\u2212", "$", "\\frac", "\\sqrt", "^", "(", ")",
           "=", "%", "dollars", "\\text{", "**", "x"]  # fmt: skip
structured_text = st.lists(st.sampled_from(MARKERS), max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=300), structured_text))
def test_no_reward_raises_on_any_string(text):
    outputs, correct = _grade(text)
    _assert_valid(outputs)
    assert (outputs["correctness"][0][0] > 0) <= correct  # paid only when the grader says correct


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(["assistant", "user", "tool"]),
                "content": st.one_of(
                    st.none(), st.text(max_size=50), st.just([{"type": "text", "text": "#### 18"}])
                ),
            }
        ),
        max_size=3,
    )
)
def test_no_reward_raises_on_any_chat_completion(messages):
    for reward in REWARDS.values():
        result = reward(completions=[messages], completion_ids=[[1] * 3], gold=["18"])
        assert len(result) == 1 and math.isfinite(result[0])
