"""Length-gated correctness: the gate table, the reasoning gate, metrics through TRL's log_metric, errors.

python -m pytest tests/test_rewards_correctness.py -q
"""

import pytest
from _rewards_helpers import chat

from rewards.correctness import Correctness, length_gate


def _run(reward, texts, lengths, gold="18", **kwargs):
    return reward(
        completions=texts, completion_ids=[[11] * n for n in lengths], gold=[gold] * len(texts), **kwargs
    )


@pytest.mark.parametrize(
    ("n_tokens", "expected"),
    [(0, 0.0), (49, 0.0), (50, 0.0), (75, 2.5), (99, 4.9), (100, 5.0), (500, 5.0)],
)
def test_length_gate_table(n_tokens, expected):
    assert _run(Correctness(), ["Reasoning...\n#### 18"], [n_tokens]) == [pytest.approx(expected)]


@pytest.mark.parametrize("n_tokens", [0, 49, 50, 75, 99, 100, 500])
def test_wrong_or_missing_answers_earn_nothing_at_any_length(n_tokens):
    assert _run(Correctness(), ["#### 17", "no idea"], [n_tokens, n_tokens]) == [0.0, 0.0]


def test_a_short_correct_answer_zeroes_only_itself():
    rewards = _run(Correctness(), ["#### 18", "#### 18", "#### 18"], [3, 100, 80])
    assert rewards == [0.0, 5.0, pytest.approx(3.0)]
    assert all(type(r) is float for r in rewards)


def test_parameters_move_the_gate():
    reward = Correctness(reward=2.0, min_tokens=10, full_credit_tokens=20)
    assert _run(reward, ["#### 18"] * 4, [10, 15, 20, 9]) == [0.0, 1.0, 2.0, 0.0]
    step = Correctness(min_tokens=30, full_credit_tokens=30)
    assert _run(step, ["#### 18"] * 3, [29, 30, 31]) == [0.0, 5.0, 5.0]
    assert [length_gate(n, min_tokens=0, full_credit_tokens=4) for n in (0, 1, 4)] == [0.0, 0.25, 1.0]


def test_reasoning_gate_counts_only_the_text_before_the_final_answer():
    early = "r" * 299 + "\n#### 18\nNote: " + "x" * 286  # the answer marker at character 300 of 600
    late = "r" * 600 + "\n#### 18"  # the marker at 601 of 608
    assert len(early) == 600 and early.index("####") == 300
    gated = Correctness(gate_on="reasoning")
    assert _run(gated, [early, late], [100, 100]) == [0.0, pytest.approx(4.9)]  # 50 and 99 reasoning tokens
    assert _run(gated, [early], [200]) == [5.0]  # 100 reasoning tokens
    assert _run(Correctness(), [early, late], [100, 100]) == [5.0, 5.0]


@pytest.mark.parametrize("recipe", ["gsm8k_llama", "gsm8k_qwen", "math_qwen", "math_qwen_math"])
def test_the_shipped_gpu_recipes_gate_on_reasoning_not_the_whole_completion(recipe):
    """Their comments promised a gate on reasoning tokens, but the gate counted the answer block and EOS too."""
    from recipes.recipe import load_recipe, reward_defaults
    from rewards import build_rewards

    config = load_recipe(recipe).config
    funcs, _ = build_rewards(config["rewards"], defaults=reward_defaults(config))
    (correctness,) = [f for f in funcs if getattr(f, "is_correctness", False)]
    early = "r" * 299 + "\n#### 18\nNote: " + "x" * 286  # 50 of 100 tokens before the answer
    assert correctness.gate_on == "reasoning" and _run(correctness, [early], [100]) == [0.0]


def test_conversational_completions_and_gold_forms():
    reward = Correctness(min_tokens=0, full_credit_tokens=1)
    texts = [chat("So \\boxed{1{,}080}."), chat("<answer>1,080</answer>"), "#### 1080", chat("#### 1081")]
    golds = ["1080", "#### 1,080", 1080, "1080"]
    assert reward(completions=texts, completion_ids=[[1]] * 4, gold=golds) == [5.0, 5.0, 5.0, 0.0]


def test_logs_metrics_and_answers_through_trl_hooks():
    metrics, extra = {}, {}
    reward = Correctness(max_completion_length=120)
    texts = ["#### 18", "The answer is 18", "#### 17", "I ran out of tok"]
    rewards = _run(
        reward, texts, [120, 60, 40, 32], log_metric=metrics.__setitem__, log_extra=extra.__setitem__
    )
    assert rewards == [5.0, pytest.approx(1.0), 0.0, 0.0]
    assert metrics == {
        "answers/correct": 0.5,  # before the length gate: "The answer is 18" is right, though paid less
        "answers/unparseable": 0.25,
        "answers/truncated": 0.25,
        "answers/correct_tokens": 90.0,
    }
    assert extra == {"answer": ["18", "18", "17", None]}


def test_metrics_it_cannot_compute_are_not_logged():
    metrics = {}
    _run(Correctness(), ["#### 17", "nothing"], [200, 200], log_metric=metrics.__setitem__)
    assert metrics == {"answers/correct": 0.0, "answers/unparseable": 0.5}  # no max_completion_length given


def test_missing_or_mismatched_arguments_are_clear_errors():
    reward = Correctness()
    with pytest.raises(ValueError, match="needs the `completion_ids` argument"):
        reward(completions=["#### 18"], gold=["18"])
    with pytest.raises(ValueError, match=r"needs the `gold` argument.*\['answer', 'question'\]"):
        reward(completions=["#### 18"], completion_ids=[[1]], question=["q"], answer=["a"])
    with pytest.raises(ValueError, match="got 2 `gold` values for 1 completions"):
        reward(completions=["#### 18"], completion_ids=[[1]], gold=["18", "18"])
    with pytest.raises(ValueError, match="gold answer 'n/a' is not one number"):
        reward(completions=["#### 18"], completion_ids=[[1]], gold=["n/a"])


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"min_tokens": 101}, r"min_tokens \(101\) must be <= full_credit_tokens \(100\)"),
        ({"reward": -1}, "reward must be a number > 0, got -1"),
        ({"reward": float("nan")}, "reward must be a number > 0"),
        ({"full_credit_tokens": 99.5}, "full_credit_tokens must be an integer >= 0, got 99.5"),
        ({"min_tokens": True}, "min_tokens must be an integer >= 0, got True"),
        ({"gate_on": "reasonning"}, "gate_on must be one of completion, reasoning"),
        ({"max_completion_length": 0}, "max_completion_length must be an integer >= 1"),
        ({"precedence": []}, "precedence must be a non-empty list"),
        ({"max_completion_length": 50}, "can never pay: completions stop at max_completion_length=50 tokens"),
    ],
)
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        Correctness(**params)


def test_a_limit_just_above_min_tokens_can_pay():
    reward = Correctness(min_tokens=50, full_credit_tokens=51, max_completion_length=51)
    assert _run(reward, ["#### 18"], [51]) == [5.0]
