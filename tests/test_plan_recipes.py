"""Every shipped recipe gets a memory plan, through the runner's ``--plan`` flag."""

from __future__ import annotations

import pytest

from recipes.planner.render import CARDS_GB, plan_memory, render_plan
from recipes.recipe import available, load_recipe
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
