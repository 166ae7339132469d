"""benchmarks/grpo_step.py: the floor arithmetic, the phase split, and a 2-step smoke run on the tiny model."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from conftest import REPO

from recipes.memory_plan import plan_memory, trainer_settings
from recipes.recipe import load_recipe
from recipes.shapes import config_for


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("grpo_step", REPO / "benchmarks" / "grpo_step.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _llama_plan(overrides=()):
    recipe = load_recipe("gsm8k_llama", list(overrides))
    plan = plan_memory(recipe.config, model_config=config_for("meta-llama/Llama-3.1-8B-Instruct"))
    return plan, trainer_settings(recipe.config)


def test_llama_8b_floor_on_h200_matches_the_documented_arithmetic(bench):
    generation, training = bench.floor_seconds(*_llama_plan(), "h200")
    # 16.06 GB of bf16 weights / 4.3 TB/s = 3.73 ms per decode step, x 512 steps, one generation round
    assert generation == pytest.approx(16_060_522_496 / 4.3e12 * 512)
    assert generation == pytest.approx(1.91, abs=0.01)
    # 6 x 8.03e9 params x 24 completions x (256 + 512) tokens / 989 TFLOP/s
    assert training == pytest.approx(6 * 8_030_261_248 * 24 * 768 / 989e12)
    assert training == pytest.approx(0.90, abs=0.01)


def test_floor_counts_one_generation_round_per_steps_per_generation(bench):
    one_round, _ = bench.floor_seconds(*_llama_plan(), "a100")
    four_rounds, training = bench.floor_seconds(*_llama_plan(["trainer.steps_per_generation=1"]), "a100")
    assert four_rounds == pytest.approx(4 * one_round)  # 4 accumulation steps, a generation before each
    assert training == pytest.approx(6 * 8_030_261_248 * 24 * 768 / 312e12)


def test_step_split_attributes_trl_profiling_blocks_to_phases(bench):
    timer = bench.StepTimer(completions_per_step=8, total_steps=1)
    timer.on_step_begin(None, None, None)
    for name, seconds in [
        ("GRPOTrainer.transformers.generate", 2.0),
        ("GRPOTrainer.sync_weights", 0.5),
        ("GRPOTrainer.correctness", 0.2),  # one reward inside _calculate_rewards: not counted twice
        ("GRPOTrainer._calculate_rewards", 0.3),
        ("GRPOTrainer._prepare_inputs", 3.0),
    ]:
        timer.record_profile(name, seconds)
    timer.on_log(None, None, None, logs={"completions/mean_length": 100.0})
    timer.bar.close()
    step = timer.steps[0]
    step.total, step.optimizer = 5.0, 0.25
    assert (step.generate, step.reward, step.tokens) == (2.5, 0.3, 800.0)
    assert step.score == pytest.approx(0.2)
    assert step.forward_backward == pytest.approx(1.75)


@pytest.mark.slow
def test_two_steps_on_the_tiny_model_print_the_table():
    result = subprocess.run(
        [sys.executable, "benchmarks/grpo_step.py", "gsm8k_tiny", "--steps", "2"],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("step"))
    for column in (
        "total s",
        "generate s",
        "reward s",
        "score s",
        "fwd+bwd s",
        "optim s",
        "gen tok/s",
        "peak GB",
    ):
        assert column in header
    rows = [line.split() for line in lines if line.split() and line.split()[0] in ("1", "2", "mean")]
    assert [r[0] for r in rows] == ["1", "2", "mean"]
    assert all(len(r) == 10 and r[-1] == "n/a" for r in rows)  # 9 columns + the floor ratio, n/a on a CPU
    assert "floor: n/a (no GPU)" in result.stdout
    assert "(process peak RSS), planner" in result.stdout
    assert "GRPO steps" in result.stderr  # the tqdm progress bar


@pytest.mark.slow
def test_unknown_recipe_key_is_a_message_not_a_traceback():
    result = subprocess.run(
        [sys.executable, "benchmarks/grpo_step.py", "gsm8k_tiny", "trainer.learnin_rate=1"],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert "learning_rate" in result.stderr and "Traceback" not in result.stderr
