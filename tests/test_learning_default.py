"""The offline default really learns: build, warm start, GRPO (the recipe at half its steps), evaluate both, compare; a
gain the paired test calls significant. This is the test that fails if a change to rewards, generation, LoRA or the
trainer stops learning."""

from __future__ import annotations

import json

import pytest
from _in_process import run_recipe

from recipes.evaluate import evaluate
from recipes.recipe import load_recipe
from stats.analysis import PRIMARY_TEST
from stats.compare import compare

pytestmark = pytest.mark.slow
# Half the recipe's 400 steps: about 50 s less. At 200 steps and 8 samples, GRPO seeds 42, 1 and 2 gained 8.2, 5.8 and
# 6.5 points, p <= 4e-10 (at 400: 9.6, 8.7 and 5.7; docs/PERFORMANCE.md, "The learning default"); room for noise.
STEPS = 200
MIN_GAIN_POINTS = 4.0
# All 500 test questions as the README's commands, at half their 16 samples: about 20 s less, and the gain still shows.
# 128 completions a generate call, not evaluate's 32: 37 s for both, not 48 (one thread); 13.5% -> 19.5% at 200 steps.
EVAL = {"samples": 8, "seed": 0, "batch_size": 128}


def test_arith_tiny_gets_significantly_better(tmp_path):
    out = tmp_path / "run"
    overrides = [f"trainer.output_dir={out}", f"trainer.max_steps={STEPS}"]
    # In this process: 15 s of imports less. tests/test_recipes_train.py covers `accelerate launch` of run.py.
    run = run_recipe("arith_tiny", *overrides)
    assert run.returncode == 0, run.stderr[-4000:]
    rewards = [
        log["reward"]
        for log in json.loads((out / "trainer_state.json").read_text())["log_history"]
        if "reward" in log
    ]
    assert sum(rewards[-4:]) / 4 > sum(rewards[:4]) / 4, f"the training reward did not rise: {rewards}"
    recipe = load_recipe("arith_tiny", overrides)
    base = evaluate(recipe, tmp_path / "base.jsonl", **EVAL)
    tuned = evaluate(recipe, tmp_path / "tuned.jsonl", adapter=out, **EVAL)
    assert 0.05 < base.accuracy < 0.6, "the warm start must leave the base able but imperfect"
    comparison = compare(tmp_path / "base.jsonl", tmp_path / "tuned.jsonl", plot=tmp_path / "comparison.png")
    gain = 100 * (tuned.accuracy - base.accuracy)
    assert gain >= MIN_GAIN_POINTS, f"base {base.accuracy:.3f} -> tuned {tuned.accuracy:.3f}"
    assert comparison.tests[PRIMARY_TEST].p_value < 0.01
    assert (tmp_path / "comparison.png").stat().st_size > 10_000
