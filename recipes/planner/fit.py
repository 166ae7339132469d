"""A plan over a card, fitted to it without changing what the run learns: the same effective batch, the same groups.

In TRL 1.16's GRPO, ``per_device_train_batch_size`` (B) counts completions, and an optimizer step averages over
B x ``gradient_accumulation_steps`` (GA) x processes of them: the effective batch, which with the learning rate sets
the learning dynamics. Completions come from one ``generate`` call per generation batch, G = B x
``steps_per_generation`` per device (``steps_per_generation`` defaults to GA; ``generation_batch_size`` sets G
across all processes instead), which must hold whole groups of ``num_generations``. The planner's parts follow
those settings: the training phase (activations, backward and log-prob workspaces) grows with B, the generation
phase (KV cache, prefill workspace) with G, the resident part with neither.

So a plan over a card is fitted by trading B for accumulation steps at a constant B x GA: the training phase
shrinks, and G stays the same (B x GA when ``steps_per_generation`` is left to its default; pinned to its old value
when the recipe sets it), and with it the prompts per generation, their groups and the checkpoint cycle. What no
trade shrinks, the resident part and the generation phase, is left to a 4-bit recipe or a larger card. A colocated
vLLM's share of the card (``vllm_gpu_memory_utilization``) changes nothing the run learns either: where it is what
does not fit, the share that holds vLLM comes first.
"""

from __future__ import annotations

from recipes.checks import generation_schedule, world_size
from recipes.planner.memory import plan_memory, section
from recipes.planner.shapes import load_model_config


def _effective(t: dict) -> int:
    """Completions per optimizer step per device: the batch the overrides keep."""
    return t["per_device_train_batch_size"] * t["gradient_accumulation_steps"]


def no_trade(recipe_config: dict, card_bytes: int, *, model_config, offload_optimizer: bool = False) -> str:
    """What a plan no trade fits is told to do: its resident weights or its generation phase overflow the card.
    4-bit weights are named only when the 4-bit plan fits the card: when the generation phase is what overflows,
    they did not, and the advice sent the user to a run that still did not fit."""
    model = section(recipe_config, "model")
    if model["quantization"] != "4bit":
        four_bit = {**recipe_config, "model": {**model, "quantization": "4bit"}}
        if plan_memory(four_bit, model_config=model_config, offload_optimizer=offload_optimizer).fits(
            card_bytes
        ):
            return "use a 4-bit recipe (model.quantization=4bit) or a larger GPU"
    return "use a larger GPU"


def same_batch_overrides(
    recipe_config: dict, card_bytes: int, *, model_config=None, offload_optimizer: bool = False
) -> list[str] | None:
    """The ``trainer.*`` overrides with the largest per-device batch that fits ``card_bytes`` while keeping the
    effective batch (B x GA per device) and the generation batch; None when no smaller batch does.

    Each candidate is checked as TRL checks it, over the launch's processes (the generation batch, derived from the
    overridden settings as ``GRPOConfig`` derives it, is the old one, so it still holds whole groups) and planned:
    the overrides returned, applied to the recipe, plan as fitting.

    >>> from recipes.recipe import load_recipe
    >>> config = load_recipe("gsm8k_qwen").config  # 12 x 4 completions per step, planned at 20.26 GiB
    >>> same_batch_overrides(config, 20 * 2**30)
    ['trainer.per_device_train_batch_size=8', 'trainer.gradient_accumulation_steps=6']
    """
    t = section(recipe_config, "trainer")
    batch = t["per_device_train_batch_size"]
    generation = generation_schedule(t, processes=1)[0]  # per device, as the planner plans it
    # GRPOConfig checks the launch's generation batch, over all its processes: a generation_batch_size must be
    # divisible by B x processes, which B dividing it does not make so with several processes.
    processes = world_size()
    launch_generation = generation_schedule(t, processes)[0]
    effective = _effective(t)
    if model_config is None:
        model_config = load_model_config(section(recipe_config, "model"))
    for smaller in (b for b in range(batch - 1, 0, -1) if effective % b == 0):
        changes = {
            "per_device_train_batch_size": smaller,
            "gradient_accumulation_steps": effective // smaller,
        }
        if t["steps_per_generation"]:  # pinned by the recipe: pin it again at the old generation batch
            changes["steps_per_generation"] = generation // smaller
        trainer = {**t, **changes}
        if (
            generation_schedule(trainer, processes=1) != (generation, generation // smaller)
            or generation % smaller
            or generation_schedule(trainer, processes)[0] != launch_generation
            or launch_generation % (smaller * processes)
        ):
            continue  # TRL would derive another generation batch, or refuse one that B does not divide
        config = {**recipe_config, "trainer": trainer}
        if plan_memory(config, model_config=model_config, offload_optimizer=offload_optimizer).fits(
            card_bytes
        ):
            return [f"trainer.{key}={value}" for key, value in changes.items()]
    return None


def fitting_overrides(
    recipe_config: dict, card_bytes: int, *, model_config=None, offload_optimizer: bool = False
) -> list[str] | None:
    """The overrides that fit a plan over ``card_bytes`` without changing what the run learns; None when none do.

    A colocated vLLM whose ``vllm_gpu_memory_utilization`` cannot hold its weights and KV cache, or leaves training
    less than its peak, gets the smallest share that holds it (the most left to training) first; then, where that
    is not enough, :func:`same_batch_overrides` at that share. Without the share, an A100 40GB that fits gsm8k_llama
    at a share of 0.44 was told to use a 4-bit recipe or a larger GPU.
    """
    if model_config is None:
        model_config = load_model_config(section(recipe_config, "model"))
    t = section(recipe_config, "trainer")
    plan = plan_memory(recipe_config, model_config=model_config, offload_optimizer=offload_optimizer)
    share, config = [], recipe_config
    low, high = plan.vllm_share_range(card_bytes)
    current = t["vllm_gpu_memory_utilization"]
    if plan.vllm == "colocate" and not low <= current <= high and low < 1 and current != low:
        share = [f"trainer.vllm_gpu_memory_utilization={low:g}"]
        config = {**recipe_config, "trainer": {**t, "vllm_gpu_memory_utilization": low}}
        if plan_memory(config, model_config=model_config, offload_optimizer=offload_optimizer).fits(
            card_bytes
        ):
            return share
    batch = same_batch_overrides(
        config, card_bytes, model_config=model_config, offload_optimizer=offload_optimizer
    )
    return share + batch if batch else None


def batch_advice(
    recipe_config: dict, card_bytes: int, *, model_config=None, offload_optimizer: bool = False
) -> str:
    """What to run instead of a plan over ``card_bytes``: the overrides of :func:`fitting_overrides`, said with
    the batches they keep, or why none fits and what does."""
    t = section(recipe_config, "trainer")
    effective = _effective(t)
    generation = generation_schedule(t, processes=1)[0]
    if model_config is None:
        model_config = load_model_config(section(recipe_config, "model"))
    planned = {"model_config": model_config, "offload_optimizer": offload_optimizer}
    overrides = fitting_overrides(
        recipe_config, card_bytes, model_config=model_config, offload_optimizer=offload_optimizer
    )
    if overrides:
        return (
            f"{' '.join(overrides)} fits and keeps the effective batch ({effective} completions per optimizer step "
            f"per device) and the generation batch ({generation})"
        )
    resident = plan_memory(
        recipe_config, model_config=model_config, offload_optimizer=offload_optimizer
    ).resident
    if resident > card_bytes:  # no batch at all fits: the weights, adapter and optimizer states pass the card
        return (
            f"No batch fits: the resident part alone (weights, adapter, optimizer states: {resident / 2**30:.1f} "
            f"GiB) passes the card, so {no_trade(recipe_config, card_bytes, **planned)}"
        )
    return (
        f"No smaller per-device batch fits with the same effective batch ({effective} completions per optimizer "
        f"step per device): the generation batch of {generation} sequences is generated at once whatever the "
        f"per-device batch, so {no_trade(recipe_config, card_bytes, **planned)}"
    )


def refit_lines(recipe_config: dict, cards, *, model_config, offload_optimizer: bool = False) -> list[str]:
    """``--plan``'s lines for the cards of ``cards`` (name, bytes) the plan does not fit: what fits each instead."""
    plan = plan_memory(recipe_config, model_config=model_config, offload_optimizer=offload_optimizer)
    over = [(name, card) for name, card in cards if not plan.fits(card)]
    if not over:
        return []
    t = section(recipe_config, "trainer")
    effective = _effective(t)
    title = (
        f"Cards it does not fit, at the same effective batch ({effective} completions per optimizer step per "
        f"device) and generation batch ({plan.generation_batch}):"
    )
    lines = ["", title]
    for name, card in over:
        planned = {"model_config": model_config, "offload_optimizer": offload_optimizer}
        overrides = fitting_overrides(recipe_config, card, **planned)
        if overrides:
            lines.append(f"  {name + ':':<11}{' '.join(overrides)}")
            continue
        from recipes.planner.render import largest_batch  # render imports this module

        smaller = largest_batch(recipe_config, card, **planned)
        fewer = (
            f"a per-device batch of {smaller} fits (fewer completions per step and per generation), or "
            if smaller
            else ""
        )
        lines.append(f"  {name + ':':<11}none fits: {fewer}{no_trade(recipe_config, card, **planned)}")
    return lines
