"""Every shipped recipe gets a memory plan, through the runner's ``--plan`` flag."""

from __future__ import annotations

import pytest

from recipes.planner.memory import GIB
from recipes.planner.render import CARDS_GB, offloads_optimizer, plan_memory, render_plan
from recipes.recipe import RecipeError, available, load_recipe
from recipes.run import main


@pytest.mark.parametrize("name", sorted(available()))
def test_every_recipe_has_a_plan(name):
    recipe = load_recipe(name)
    text = render_plan(recipe)
    plan = plan_memory(recipe.config)
    assert plan.batch == recipe.config["trainer"]["per_device_train_batch_size"]
    assert plan.prompt_tokens == recipe.config["data"]["max_prompt_tokens"]
    assert [line.split()[0] for line in text.splitlines() if line.split()[1:2] == ["GB"]][-5:] == [
        str(gb) for gb in CARDS_GB
    ]


def test_run_plan_prints_the_plan(capsys):
    assert main(["gsm8k_qwen", "--plan"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Memory plan for gsm8k_qwen (Qwen/Qwen2.5-7B-Instruct)")
    assert "141 GB" in out


def test_run_plan_reports_a_missing_prompt_budget_without_a_traceback(capsys):
    assert main(["gsm8k_qwen", "data.max_prompt_tokens=null", "--plan"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: data.max_prompt_tokens is not set") and "Traceback" not in err


def test_zero2_offload_plans_the_optimizer_in_host_ram(capsys):
    config = load_recipe("gsm8k_qwen").config  # adamw_torch on fp32 adapters: 8 bytes of state per parameter
    on_gpu, offloaded = plan_memory(config), plan_memory(config, offload_optimizer=True)
    assert on_gpu.optimizer_states == 8 * on_gpu.trainable_params and on_gpu.host_optimizer == 0
    assert offloaded.optimizer_states == 0
    assert offloaded.host_optimizer == 16 * offloaded.trainable_params  # fp32 master, 2 moments, gradient
    assert on_gpu.peak(80 * GIB) - offloaded.peak(80 * GIB) == on_gpu.optimizer_states
    zero2 = "recipes/accelerate/deepspeed_zero2_offload.yaml"
    assert main(["gsm8k_qwen", "--plan", "--config_file", zero2]) == 0
    out = capsys.readouterr().out
    assert "optimizer states (in host RAM: ZeRO-2 offload)" in out
    assert f"Host RAM for the offloaded optimizer: {offloaded.host_optimizer / GIB:.2f} GB" in out
    assert main(["gsm8k_qwen", "--plan", "--config_file", "recipes/accelerate/multi_gpu.yaml"]) == 0
    assert "Host RAM" not in capsys.readouterr().out


def test_the_plan_reads_the_offload_from_accelerate_launch(monkeypatch):
    assert not offloads_optimizer()
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "cpu")
    assert offloads_optimizer()
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "nvme")
    with pytest.raises(RecipeError, match="nvme is not modelled"):
        offloads_optimizer()


def test_an_unreadable_accelerate_config_is_named(capsys):
    assert main(["gsm8k_qwen", "--plan", "--config_file", "missing.yaml"]) == 2
    assert capsys.readouterr().err.startswith(
        "error: --config_file missing.yaml: not a readable accelerate config"
    )


def test_an_accelerate_config_without_plan_points_to_the_launcher(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["gsm8k_tiny", "--config_file", "recipes/accelerate/multi_gpu.yaml"])
    assert exit_.value.code == 2
    assert "accelerate launch --config_file recipes/accelerate/multi_gpu.yaml recipes/run.py gsm8k_tiny" in (
        capsys.readouterr().err
    )
