"""--plan's card table and the launch-time check read a card's memory the same way: as torch does on that card.

The run checks its plan against ``torch.cuda.get_device_properties(i).total_memory`` (recipes/planner/on_card.py),
which is a few hundred MiB under what nvidia-smi prints as the card's total: a plan --plan said fits a T4 was warned
of as too large when the run started on one.
"""

from __future__ import annotations

import pytest

from recipes.planner.memory import GIB
from recipes.planner.render import CARDS, plan_memory, render_plan
from recipes.recipe import load_recipe

# torch's total_memory on each card (cudaGetDeviceProperties' totalGlobalMem), as reported on real machines; the
# RTX 4090 reserves nothing. nvidia-smi prints 15360, 23034, 24564, 40960, 81559 and 143771 MiB for them.
TORCH_TOTAL_MIB = {
    "T4": 15095,
    "L4": 22488,
    "RTX-4090": 24563,
    "A100-40GB": 40536,
    "H100-80GB": 81082,
    "H200": 143156,
}


@pytest.mark.parametrize(("name", "card"), CARDS)
def test_a_card_holds_no_more_than_torch_gives_a_run_on_it(name, card):
    assert card <= TORCH_TOTAL_MIB[name] * 2**20


def test_a_plan_that_fits_a_t4_under_plan_is_not_warned_of_on_a_t4(caplog):
    """14.74 GiB planned: --plan said 'yes' for a T4 (15 GiB by nvidia-smi), the run on the T4 (14.74 GiB by torch)
    warned of CUDA out of memory."""
    from recipes.planner.on_card import warn_if_over_card
    from recipes.planner.shapes import config_for

    overrides = ["trainer.per_device_train_batch_size=18", "trainer.max_completion_length=389"]
    recipe = load_recipe("gsm8k_llama_qlora", overrides)
    text = render_plan(recipe)
    [row] = [line.split() for line in text.splitlines() if line.split()[:1] == ["T4"]]
    on_t4 = TORCH_TOTAL_MIB["T4"] * 2**20
    with caplog.at_level("WARNING", logger="recipes.planner.on_card"):
        warn_if_over_card(recipe, config_for(recipe.config["model"]["name_or_path"]), on_t4, "Tesla T4")
    assert (row[4] == "yes") == (caplog.text == "")
    assert plan_memory(recipe.config).peak(on_t4) / GIB > 14.7  # the case at the edge, whichever way it falls


def test_a_plan_beyond_the_card_is_warned_of_once_per_machine(caplog, monkeypatch):
    """Every process of a launch checks its card: on an 8-GPU machine the same warning came 8 times."""
    from recipes.planner.on_card import warn_if_over_card
    from recipes.planner.shapes import config_for

    recipe = load_recipe("gsm8k_llama")
    model_config = config_for(recipe.config["model"]["name_or_path"])
    t4 = TORCH_TOTAL_MIB["T4"] * 2**20
    with caplog.at_level("WARNING", logger="recipes.planner.on_card"):
        for rank in range(4):
            monkeypatch.setenv("LOCAL_RANK", str(rank))
            warn_if_over_card(recipe, model_config, t4, "Tesla T4")
    assert caplog.text.count("expect CUDA out of memory") == 1
