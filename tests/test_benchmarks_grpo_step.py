"""benchmarks/grpo_step.py: floor arithmetic, phase split, tiny-model smoke run, planner against live tensor bytes."""

from __future__ import annotations

import logging
import re
import subprocess

import pytest
import torch

from benchmarks.floor import floor_seconds
from recipes.planner.memory import plan_memory, trainer_settings
from recipes.planner.shapes import config_for
from recipes.recipe import load_recipe


@pytest.fixture(scope="module")
def bench():
    from benchmarks import step_timer  # torch and transformers: imported by the tests that need them

    return step_timer


def _llama_plan(overrides=()):
    recipe = load_recipe("gsm8k_llama", list(overrides))
    plan = plan_memory(recipe.config, model_config=config_for("meta-llama/Llama-3.1-8B-Instruct"))
    return plan, trainer_settings(recipe.config)


def test_llama_8b_floor_on_h200_matches_the_documented_arithmetic():
    generation, training = floor_seconds(*_llama_plan(), "h200")
    # 16.06 GB of bf16 weights / 4.3 TB/s = 3.73 ms per decode step, x 512 steps, one generation round
    assert generation == pytest.approx(16_060_522_496 / 4.3e12 * 512)
    assert generation == pytest.approx(1.91, abs=0.01)
    # 6 x 8.03e9 params x 24 completions x (256 + 512) tokens / 989 TFLOP/s
    assert training == pytest.approx(6 * 8_030_261_248 * 24 * 768 / 989e12)
    assert training == pytest.approx(0.90, abs=0.01)


def test_floor_counts_one_generation_round_per_steps_per_generation():
    one_round, _ = floor_seconds(*_llama_plan(), "a100")
    four_rounds, training = floor_seconds(*_llama_plan(["trainer.steps_per_generation=1"]), "a100")
    assert four_rounds == pytest.approx(4 * one_round)  # 4 accumulation steps, a generation before each
    assert training == pytest.approx(6 * 8_030_261_248 * 24 * 768 / 312e12)


def test_step_split_attributes_trl_profiling_blocks_to_phases(bench):
    timer = bench.StepTimer(completions_per_step=8, total_steps=1)
    timer.on_step_begin(None, None, None)
    timer.record_generation(2.5)  # the trainer's call: merging, vLLM's weight sync, generating
    for name, seconds in [
        ("GRPOTrainer.transformers.generate", 2.0),  # inside that call: not counted twice
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


def _run(capsys, *args: str) -> subprocess.CompletedProcess:
    """``python benchmarks/grpo_step.py ARGS``' exit code and output, run in this process: 15 s of imports less. It
    changes no process state (threads, environment, logging); the planner check counts live tensors, not the RSS."""
    from benchmarks.grpo_step import main

    capsys.readouterr()
    status = main(list(args))
    out = capsys.readouterr()
    return subprocess.CompletedProcess(["benchmarks/grpo_step.py", *args], status, out.out, out.err)


def _planner_check(stdout: str) -> dict[str, tuple[float, float]]:
    """phase -> (measured GB, planned as run / measured) from the planner check table."""
    rows = [line.split() for line in stdout.split("planner check", 1)[1].splitlines()[2:] if line.strip()]
    return {r[0]: (float(r[1]), float(r[4])) for r in rows}


@pytest.mark.slow
def test_two_steps_on_the_tiny_model_print_the_table_and_the_planner_check(capsys):
    result = _run(capsys, "gsm8k_tiny", "--steps", "2", "--count-tensors")
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
    assert all(len(r) == 10 for r in rows)  # 9 columns + the floor ratio
    if torch.cuda.is_available():
        assert "(CUDA max_memory_allocated), planner" in result.stdout
    else:
        assert all(r[-1] == "n/a" for r in rows) and "floor: n/a (no GPU)" in result.stdout
        assert "(process peak RSS), planner" in result.stdout
    assert "GRPO steps" in result.stderr  # the tqdm progress bar
    decode = re.search(
        r"^decode step \((\d+) sequences, adapter merged\): (\d+) aten ops, ([\d.]+) ms",
        result.stdout,
        re.MULTILINE,
    )
    # The trainer generates in train mode (250 operators for the tiny model); peft's branch adds 140 to that.
    assert decode and int(decode[1]) == 8 and 200 < int(decode[2]) < 250 + 140
    check = _planner_check(result.stdout)
    assert set(check) == {"generation", "training"}
    for phase, (measured, ratio) in check.items():
        assert measured > 0 and 0.85 <= ratio <= 1.15, phase


@pytest.mark.slow
def test_planner_matches_live_tensors_of_a_full_width_qwen_shape(tmp_path, capsys, caplog):
    # real Qwen2.5-1.5B width, vocabulary, biases and tied embeddings; two layers, and two short prompts for two
    # completions each: the 151,936-wide head costs a CPU ~1 TFLOP per 1,000 tokens trained (GSM8K prompts under the
    # recipe's system prompt, 4 x 192 tokens, took 340 s of the test's 450 in an otherwise idle suite; arithmetic word
    # problems, ~63 tokens, 110 s alone; these sums, 74 s in a new process). float32 weights, as a CPU run has them:
    # 37 s, not 74 (a CPU multiplies bf16 matrices without a fast kernel), and generation merges the adapter
    # (lora.merged_generation=auto), so the check covers the planner's 0.35 GB of merged copies too.
    (tmp_path / "sums.jsonl").write_text(
        '{"question": "2+3?", "answer": "5"}\n{"question": "4+4?", "answer": "8"}\n'
    )
    caplog.set_level(logging.INFO, logger="recipes.merged_lora")
    result = _run(
        capsys, "gsm8k_qwen", "--random-weights", "Qwen/Qwen2.5-1.5B-Instruct", "--layers", "2", "--steps", "1",
        "--count-tensors", "--decode-steps", "0", "model.dtype=float32", "trainer.bf16=false",
        "trainer.per_device_train_batch_size=2",
        "trainer.num_generations=2", "trainer.gradient_accumulation_steps=1", "trainer.max_completion_length=16",
        "data.task=jsonl", f"data.source={tmp_path / 'sums.jsonl'}", "data.system_prompt=Answer in <answer></answer>.",
        "data.max_prompt_tokens=96",
        # the base's length gate (50 tokens) could never pay at 16; memory does not depend on the gate
        "rewards=[{name: correctness, reward: 5.0, min_tokens: 4, full_credit_tokens: 12}, {name: format}]",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "0.327B params" in result.stdout  # 151,936 x 1,536 tied embedding + 2 layers
    assert "generating with the adapter merged" in caplog.text
    # no decode profile: its prefills through the 151,936-wide head cost more than the step
    assert "decode step" not in result.stdout
    check = _planner_check(result.stdout)
    for phase, (measured, ratio) in check.items():
        assert measured > 0.5 and 0.85 <= ratio <= 1.15, phase


def test_layers_needs_random_weights(capsys):
    from benchmarks.grpo_step import main

    with pytest.raises(SystemExit) as exit_info:
        main(["gsm8k_tiny", "--layers", "2"])
    assert exit_info.value.code == 2
    assert "--layers takes a positive number and needs --random-weights" in capsys.readouterr().err


def test_a_negative_decode_step_count_is_refused(capsys):
    from benchmarks.grpo_step import main

    with pytest.raises(SystemExit) as exit_info:
        main(["gsm8k_tiny", "--decode-steps", "-1"])
    assert (
        exit_info.value.code == 2
        and "--decode-steps must be 0 (no profile) or more" in capsys.readouterr().err
    )


def test_unknown_recipe_key_is_a_message_not_a_traceback(capsys):
    from benchmarks.grpo_step import main

    assert main(["gsm8k_tiny", "trainer.learnin_rate=1"]) == 2
    error = capsys.readouterr().err
    assert "Did you mean trainer.learning_rate?" in error and "Traceback" not in error


def test_on_a_gpu_the_peak_is_checked_as_tensors_against_the_plan_without_its_cuda_constant():
    from benchmarks.grpo_step import report
    from benchmarks.step_timer import Step
    from recipes.planner.memory import GIB

    recipe = load_recipe("gsm8k_llama")
    plan = plan_memory(recipe.config, model_config=config_for("meta-llama/Llama-3.1-8B-Instruct"))
    card = 80 * GIB
    tensors = plan.peak(card) - plan.overhead
    steps = [Step(total=10.0, generate=8.0, tokens=1000, peak_bytes=int(tensors / 1.05))] * 2
    text = report(recipe, steps, plan, trainer_settings(recipe.config), "h100", card, "cuda")
    line = text.splitlines()[-1]
    assert line.startswith(
        f"peak memory: measured {tensors / 1.05 / GIB:.2f} GB of tensors (CUDA max_memory_allocated)"
    )
    assert f"planner {tensors / GIB:.2f} GB of tensors (+5.0%)" in line
    assert f"{plan.peak(card) / GIB:.2f} GB on the card with its 1.00 GB CUDA constant" in line
