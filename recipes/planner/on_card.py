"""The recipe against the GPU a run starts on, before the weights load: minutes before an out-of-memory error.

bfloat16 on a GPU without it (a T4, a V100) is refused with the float16 overrides (``bf16_problem``). A colocated vLLM
share that cannot fit is refused (``check_vllm_share``): vLLM would take it whole and leave training short. A planned
peak beyond the card is warned of, with the overrides that fit it and keep the effective batch
(``warn_if_over_card``): the plan is an estimate (measured peaks came 1-8% under it, docs/PERFORMANCE.md), so a
user who knows better may go on.
"""

from __future__ import annotations

import logging
import os

from recipes.planner.memory import GIB, plan_memory
from recipes.recipe import Recipe, RecipeError

logger = logging.getLogger(__name__)


# What a recipe's header tells T4 users to pass: float16 weights and mixed precision instead of bfloat16.
FP16_OVERRIDES = ("model.dtype=float16", "trainer.bf16=false", "trainer.fp16=true")


def check_card(recipe: Recipe, model_config, card) -> None:
    """The three checks, for ``card``: torch's device properties (``name``, ``total_memory``, ``major``, ``minor``).

    Raises:
        RecipeError: bfloat16 on a GPU without it, or a vLLM share that cannot fit.
    """
    if problem := bf16_problem(recipe, card):
        raise RecipeError(
            f"{problem}. Run it with {' '.join(FP16_OVERRIDES)}, or on an Ampere or newer GPU (A100, L4, A10, "
            "RTX 30xx or 40xx)."
        )
    check_vllm_share(recipe, model_config, card.total_memory)
    warn_if_over_card(recipe, model_config, card.total_memory, card.name)


def bf16_problem(recipe: Recipe, card) -> str | None:
    """What asks for bfloat16 on a GPU older than compute capability 8.0 (Ampere), which lacks it: torch emulates
    it there, many times slower, where a kernel runs it at all. None when nothing does, or the GPU has it."""
    m, t = recipe.config["model"], recipe.config["trainer"]
    asks = [
        *(["model.dtype=bfloat16"] if m["dtype"] == "bfloat16" else []),
        *(["trainer.bf16=true"] * t["bf16"]),
    ]
    if not asks or (card.major, card.minor) >= (8, 0):
        return None
    return (
        f"{recipe.name}: {' and '.join(asks)} ask{'s' * (len(asks) == 1)} for bfloat16, which this {card.name} "
        f"(compute capability {card.major}.{card.minor}) does not have"
    )


def warn_if_over_card(recipe: Recipe, model_config, card_bytes: int, card_name: str = "GPU") -> None:
    """Warn when the recipe's planned peak exceeds the card, naming the overrides that fit it with the same effective
    batch (``recipes.planner.fit``); once per machine (its first process), as the machines of a launch may hold
    different cards."""
    from recipes.planner.fit import batch_advice

    if os.environ.get("LOCAL_RANK", "0") != "0":
        return
    try:
        plan = plan_memory(recipe.config, model_config=model_config)
    except RecipeError:  # what the planner cannot model it says under --plan; the run goes on
        return
    if plan.fits(card_bytes):
        return
    fix = batch_advice(recipe.config, card_bytes, model_config=model_config)
    logger.warning(
        "%s plans a peak of %.2f GB of GPU memory, more than this %s's %.2f GB: expect CUDA out of memory once "
        "training starts. %s (python recipes/run.py %s --plan shows the parts).",
        recipe.name, plan.peak(card_bytes) / GIB, card_name, card_bytes / GIB, fix, recipe.name,
    )  # fmt: skip


def check_vllm_share(recipe: Recipe, model_config, card_bytes: int) -> None:
    """Refuse a colocated vLLM share that cannot hold vLLM or leaves training less than its planned peak.

    Raises:
        RecipeError: The share is outside the planner's range for this card, naming the share that fits.
    """
    t = recipe.config["trainer"]
    if not (t["use_vllm"] and t["vllm_mode"] == "colocate"):
        return
    try:
        plan = plan_memory(recipe.config, model_config=model_config)
    except RecipeError as e:  # the planner's limits, not the run's: train, but say what went unchecked
        logger.warning("trainer.vllm_gpu_memory_utilization is not checked against this GPU: %s", e)
        return
    low, high = plan.vllm_share_range(card_bytes)
    share, card = t["vllm_gpu_memory_utilization"], f"this {card_bytes / GIB:.0f} GB GPU"
    if low > high:
        raise RecipeError(
            f"trainer.use_vllm=true (colocate) cannot fit {card}: vLLM needs a share of at least {low:g} for its "
            f"weights and KV cache, and training leaves at most {max(high, 0):g}. Use a smaller "
            "trainer.per_device_train_batch_size, trainer.vllm_enable_sleep_mode=true, or "
            "trainer.use_vllm=false (see --plan)."
        )
    if not low <= share <= high:
        fix = high if share > high else low
        why = (
            "leaves training less than its planned peak"
            if share > high
            else "cannot hold vLLM's weights and KV"
        )
        raise RecipeError(
            f"trainer.vllm_gpu_memory_utilization={share:g} {why} on {card}: the shares that fit are "
            f"{low:g}-{high:g}. Set trainer.vllm_gpu_memory_utilization={fix:g} (see --plan)."
        )
