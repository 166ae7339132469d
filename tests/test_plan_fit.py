"""A plan over a card gets overrides that fit it and keep the effective batch: applied, they plan as fitting, the
recipe loads, and TRL's GRPOConfig takes them with the same generation batch."""

from __future__ import annotations

import re

import pytest

from recipes.checks import generation_schedule
from recipes.planner.fit import same_batch_overrides
from recipes.planner.memory import plan_memory
from recipes.planner.on_card import warn_if_over_card
from recipes.planner.render import CARDS, render_plan
from recipes.planner.shapes import config_for
from recipes.recipe import load_recipe
from recipes.run import grpo_config

NO_CHECKPOINTING = "trainer.activation_checkpointing=false"  # a training phase the trade can shrink
SUGGESTED = re.compile(r"((?:trainer\.\w+=\d+ ?)+) fits and keeps the effective batch")


def warning_for(caplog, name, overrides, card):
    """The launch-time warning of recipe ``name`` with ``overrides`` on the card of CARDS named ``card``."""
    recipe = load_recipe(name, overrides)
    caplog.clear()
    with caplog.at_level("WARNING", logger="recipes.planner.on_card"):
        warn_if_over_card(recipe, config_for(recipe.config["model"]["name_or_path"]), dict(CARDS)[card], card)
    return caplog.text


def trl_batches(recipe) -> tuple[int, int]:
    """(effective batch per device, generation batch) as GRPOConfig derives them from the recipe."""
    args = grpo_config(recipe)
    return args.per_device_train_batch_size * args.gradient_accumulation_steps, args.generation_batch_size


@pytest.mark.parametrize(
    "name, overrides, card, pinned",
    [
        ("gsm8k_llama_qlora", [NO_CHECKPOINTING], "L4", False),
        ("gsm8k_qwen", [NO_CHECKPOINTING], "A100-40GB", False),
        # a recipe that pins steps_per_generation (2 of 4 micro-steps per generation) gets it pinned again
        ("gsm8k_qwen", [NO_CHECKPOINTING, "trainer.steps_per_generation=2"], "A100-40GB", True),
        # a recipe that sets the generation batch keeps it, and a per-device batch that divides it
        ("gsm8k_qwen", [NO_CHECKPOINTING, "trainer.generation_batch_size=48"], "A100-40GB", False),
    ],
)
def test_the_warning_names_overrides_that_fit_and_keep_the_batches(caplog, name, overrides, card, pinned):
    recipe = load_recipe(name, overrides)
    assert not plan_memory(recipe.config).fits(dict(CARDS)[card])
    found = SUGGESTED.search(warning_for(caplog, name, overrides, card))
    assert found, caplog.text
    suggested = found.group(1).split()
    assert suggested[0].startswith("trainer.per_device_train_batch_size=")
    assert suggested[1].startswith("trainer.gradient_accumulation_steps=")
    assert any(s.startswith("trainer.steps_per_generation=") for s in suggested) == pinned
    refit = load_recipe(name, [*overrides, *suggested])  # the load-time checks pass
    assert plan_memory(refit.config).fits(dict(CARDS)[card])
    t, new = recipe.config["trainer"], refit.config["trainer"]
    assert new["per_device_train_batch_size"] < t["per_device_train_batch_size"]
    assert generation_schedule(new, processes=1)[0] == generation_schedule(t, processes=1)[0]
    assert trl_batches(refit) == trl_batches(recipe)  # TRL's own derivation and divisibility checks agree


def test_the_largest_batch_that_keeps_the_effective_batch_is_chosen():
    config = load_recipe("gsm8k_qwen", [NO_CHECKPOINTING]).config  # 12 x 4 = 48 completions
    card = dict(CARDS)["A100-40GB"]
    suggested = same_batch_overrides(config, card)
    assert suggested == ["trainer.per_device_train_batch_size=4", "trainer.gradient_accumulation_steps=12"]
    # the next divisor of 48 up does not fit
    bigger = {**config, "trainer": {**config["trainer"], "per_device_train_batch_size": 6}}
    bigger["trainer"]["gradient_accumulation_steps"] = 8
    assert not plan_memory(bigger).fits(card)


@pytest.mark.parametrize(
    "name, overrides, fix",
    [
        # 96 completions generated at once: the generation phase alone overflows an L4
        (
            "gsm8k_llama",
            ["trainer.per_device_train_batch_size=24"],
            "use a 4-bit recipe (model.quantization=4bit)",
        ),
        (
            "gsm8k_llama_qlora",
            ["trainer.per_device_train_batch_size=36"],
            "use a larger GPU",
        ),  # 4-bit already
    ],
)
def test_a_card_no_trade_fits_gets_the_clear_message(caplog, name, overrides, fix):
    text = warning_for(caplog, name, overrides, "L4")
    effective = 4 * int(overrides[0].split("=")[1])
    assert (
        f"No smaller per-device batch fits with the same effective batch ({effective} completions per optimizer "
        f"step per device): the generation batch of {effective} sequences is generated at once whatever the "
        f"per-device batch, so {fix}" in text
    )
    assert "fits and keeps" not in text


def test_plan_lists_the_overrides_for_each_card_it_does_not_fit():
    recipe = load_recipe("gsm8k_llama_qlora", [NO_CHECKPOINTING])
    text = render_plan(recipe)
    assert (
        "Cards it does not fit, at the same effective batch (24 completions per optimizer step per device) and "
        "generation batch (24):" in text
    )
    lines = {
        line.split(":")[0].strip(): line.split(":", 1)[1].split()
        for line in text.splitlines()[-8:]
        if ":" in line
    }
    for name, card in CARDS:
        if plan_memory(recipe.config).fits(card):
            assert name not in lines
        else:
            assert lines[name] == same_batch_overrides(recipe.config, card)
            assert plan_memory(load_recipe(recipe.name, [NO_CHECKPOINTING, *lines[name]]).config).fits(card)


def test_a_launch_of_several_processes_gets_a_batch_trl_takes_with_its_generation_batch(monkeypatch):
    # TRL 1.16: generation_batch_size must be divisible by per_device_train_batch_size x processes. 24 over 2
    # processes: a batch of 8 divides 24 but 8 x 2 = 16 does not, so GRPOConfig would refuse it at launch.
    monkeypatch.setenv("WORLD_SIZE", "2")
    config = load_recipe("gsm8k_qwen", [NO_CHECKPOINTING, "trainer.generation_batch_size=24"]).config
    at_8 = {**config["trainer"], "per_device_train_batch_size": 8, "gradient_accumulation_steps": 6}
    plan = plan_memory({**config, "trainer": at_8})
    card = next(gib * 2**30 for gib in range(1, 200) if plan.fits(gib * 2**30))  # a batch of 8 fits it
    suggested = same_batch_overrides(config, card)
    assert suggested
    batch = int(suggested[0].split("=")[1])
    assert 24 % (batch * 2) == 0, suggested


def test_a_card_the_resident_part_alone_overflows_is_not_blamed_on_the_generation_batch():
    # Llama 8B in bfloat16 on a T4: the weights alone (16 GiB) pass the card, whatever the generation batch.
    from recipes.planner.fit import batch_advice

    config = load_recipe("gsm8k_llama").config
    card = dict(CARDS)["T4"]
    plan = plan_memory(config)
    assert plan.resident > card
    advice = batch_advice(config, card)
    assert "generated at once whatever the per-device batch" not in advice
    assert "resident" in advice and "use a 4-bit recipe (model.quantization=4bit)" in advice


VLLM = "trainer.use_vllm=true"  # colocated, at the recipe's share of 0.3


def test_a_colocated_vllm_share_that_cannot_hold_vllm_gets_the_share_that_fits(caplog):
    """gsm8k_llama with vLLM on an A100 40GB fits at a share of 0.44 (--plan's share table says so); the lines of
    the cards it does not fit, and the launch-time warning, said to use a 4-bit recipe or a larger GPU."""
    recipe = load_recipe("gsm8k_llama", [VLLM])
    card = dict(CARDS)["A100-40GB"]
    assert not plan_memory(recipe.config).fits(card)
    assert "  A100-40GB: trainer.vllm_gpu_memory_utilization=0.44\n" in render_plan(recipe)
    assert plan_memory(
        load_recipe("gsm8k_llama", [VLLM, "trainer.vllm_gpu_memory_utilization=0.44"]).config
    ).fits(card)
    assert "trainer.vllm_gpu_memory_utilization=0.44 fits and keeps the effective batch" in warning_for(
        caplog, "gsm8k_llama", [VLLM], "A100-40GB"
    )


def test_a_share_and_a_smaller_batch_together_when_neither_fits_alone():
    from recipes.planner.fit import fitting_overrides

    overrides = [VLLM, NO_CHECKPOINTING]
    recipe = load_recipe("gsm8k_llama", overrides)
    card = dict(CARDS)["A100-40GB"]
    fix = fitting_overrides(recipe.config, card)
    assert fix[0] == "trainer.vllm_gpu_memory_utilization=0.44" and len(fix) == 3
    assert not plan_memory(load_recipe("gsm8k_llama", [*overrides, fix[0]]).config).fits(
        card
    )  # the share alone
    fitted = load_recipe("gsm8k_llama", [*overrides, *fix])
    assert plan_memory(fitted.config).fits(card)
    assert trl_batches(fitted) == trl_batches(recipe)
    # At the smallest share already, it is not named again: only the batch changes.
    at_smallest = load_recipe("gsm8k_llama", [*overrides, "trainer.vllm_gpu_memory_utilization=0.44"])
    assert fitting_overrides(at_smallest.config, card) == fix[1:]


def test_4bit_is_advised_only_where_a_4bit_plan_fits_and_a_smaller_batch_is_named():
    """math_qwen_math on a T4 was told to use 4-bit weights, whose plan peaks past the card too: its 128 sequences
    generated at once overflow it, whatever the weights. The table's own smaller batch went unsaid."""
    recipe = load_recipe("math_qwen_math")
    card = dict(CARDS)["T4"]
    four_bit = load_recipe("math_qwen_math", ["model.quantization=4bit"]).config
    assert not plan_memory(four_bit).fits(card)
    line = next(x for x in render_plan(recipe).splitlines() if x.startswith("  T4:"))
    batch = int(re.search(r"none fits: a per-device batch of (\d+) fits \(fewer completions per step and per "
                          r"generation\), or use a larger GPU$", line).group(1))  # fmt: skip
    assert "4-bit" not in line
    assert plan_memory(recipe.config, batch=batch).fits(card) and not plan_memory(
        recipe.config, batch=batch + 1
    ).fits(card)
    llama = next(x for x in render_plan(load_recipe("gsm8k_llama")).splitlines() if x.startswith("  T4:"))
    assert llama.endswith(
        "use a 4-bit recipe (model.quantization=4bit) or a larger GPU"
    )  # its 4-bit plan fits
