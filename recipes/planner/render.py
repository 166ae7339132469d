"""Print a recipe's expected peak GPU memory, part by part, the largest per-device batch that fits each card and,
where it does not fit, the overrides that do with the same effective batch (`recipes/planner/fit.py`).

    python recipes/run.py gsm8k_qwen --plan
    python recipes/run.py gsm8k_qwen_small --plan --config_file recipes/accelerate/deepspeed_zero2_offload.yaml

The formulas, each documented, are in `recipes/planner/memory.py`; this module searches batches and renders tables.
"""

from __future__ import annotations

import math

from recipes.planner.fit import refit_lines
from recipes.planner.memory import (
    GIB,
    plan_memory,
    section,
    steps_per_generation,
    trainer_settings,
)
from recipes.planner.memory_plan import MemoryPlan
from recipes.planner.shapes import load_model_config
from recipes.recipe import with_defaults

__all__ = [
    "CARDS",
    "MemoryPlan",
    "batch_step",
    "largest_batch",
    "plan_memory",
    "render_plan",
]

# Cards by the memory torch gives a run on them (``get_device_properties().total_memory``, MiB): what the run's own
# check (recipes/planner/on_card.py) compares its plan with. It is under what nvidia-smi prints (15360, 23034, 40960,
# 81559, 143771 MiB): a T4 holds 14.74 GiB, an L4 21.96, an H100 79.18, an H200 139.8. A plan that fits "16 GB" may
# not fit a T4, nor one that fits nvidia-smi's 15 GiB.
CARDS = tuple(
    (name, mib * 2**20)
    for name, mib in (
        ("T4", 15095),
        ("L4", 22488),
        ("RTX-4090", 24563),
        ("A100-40GB", 40536),
        ("H100-80GB", 81082),
        ("H200", 143156),
    )
)
MAX_BATCH = 1024


def batch_step(t: dict) -> int:
    """Batches keep whole groups: batch x steps_per_generation must be divisible by num_generations."""
    return t["num_generations"] // math.gcd(t["num_generations"], steps_per_generation(t))


def largest_batch(
    recipe_config: dict, card_bytes: int, *, model_config=None, offload_optimizer: bool = False
) -> int | None:
    """The largest per-device batch that fits ``card_bytes``, or None when even the smallest does not.

    Candidates keep the generation batch (batch x steps_per_generation) divisible by num_generations, so they are
    multiples of :func:`batch_step`, searched up to ``MAX_BATCH``.
    """
    step = batch_step(trainer_settings(recipe_config))
    model_config = (
        model_config if model_config is not None else load_model_config(section(recipe_config, "model"))
    )
    lo, hi = (
        0,
        MAX_BATCH // step,
    )  # invariant: lo x step fits (or lo == 0); (hi + 1) x step fails or is past the cap
    while lo < hi:  # every part grows with the batch, so fitting is monotone and bisection finds the edge
        mid = (lo + hi + 1) // 2
        plan = plan_memory(
            recipe_config, model_config=model_config, batch=mid * step, offload_optimizer=offload_optimizer
        )
        if plan.fits(card_bytes):
            lo = mid
        else:
            hi = mid - 1
    return lo * step or None


def render_plan(recipe, *, offload_optimizer: bool = False, sharding: str | None = None) -> str:
    """A recipe's plan as text: its parts in GB by phase, then how it fits the cards in ``CARDS`` (T4 to H200).

    Args:
        recipe: A ``recipes.recipe.Recipe`` (its ``.name`` and ``.config`` are read).
        offload_optimizer: Plan DeepSpeed ZeRO-2 with the optimizer in host RAM
            (``recipes.planner.launch_config.offloads_optimizer``).
        sharding: The launch's weight sharding (``recipes.planner.launch_config.unmodelled_sharding``), named as
            not modelled.

    Raises:
        RecipeError: The model config cannot be read, or a value the formulas cannot take.
    """
    config = recipe.config
    model_config = load_model_config(section(config, "model"))
    plan = plan_memory(config, model_config=model_config, offload_optimizer=offload_optimizer)
    t = trainer_settings(config)
    unused = " (not used)"
    ck = "" if plan.gradient_checkpointing else unused
    reference = "adapter-disabled base, no copy" if t["beta"] else "none, beta = 0"
    vllm = {"off": "off", "server": "server on another GPU"}.get(
        plan.vllm, f"colocate, {plan.vllm_fraction:g} x card"
    )
    merge_label = {"on": "true", "auto": "auto: where they fit"}.get(plan.merge) or _unmerged(config, plan)
    sections = {
        "resident": [
            ("CUDA context + allocator overhead (constant)", plan.overhead),
            (f"base weights ({plan.weight_dtype})", plan.weights),
            (f"LoRA parameters ({plan.adapter_dtype})", plan.lora_params),
            (
                "optimizer states (in host RAM: ZeRO-2 offload)"
                if offload_optimizer
                else f"optimizer states ({t['optim']})",
                plan.optimizer_states,
            ),
            (f"reference model ({reference})", plan.reference_model),
        ],
        f"training phase ({plan.batch} sequences)": [
            ("LoRA gradients", plan.lora_grads),
            (f"activations, checkpointing{ck}", plan.activations_checkpointed),
            (f"activations, no checkpointing{unused if not ck else ''}", plan.activations_full),
            ("backward workspace", plan.backward_workspace),
            ("log-prob workspace (fused LM head)", plan.logprob_workspace),
            *([("4/8-bit dequantisation buffer", plan.dequant_buffer)] if plan.dequant_buffer else []),
            ("phase peak: backward through the head or the layers", plan.training_phase),
            *(
                [("+ merged LoRA weights kept (model.compiled_generation)", plan.merged_weights)]
                if plan.compiled and plan.merged_weights
                else []
            ),
        ],
        f"generation phase ({plan.generation_batch} sequences)": [
            (f"merged LoRA weights (lora.merged_generation={merge_label})", plan.merged_weights),
            ("KV cache", plan.kv_cache),
            ("generation workspace", plan.generation_workspace),
            *(
                [("vLLM: weights + KV it must fit in its share", plan.vllm_need)]
                if plan.vllm == "colocate"
                else []
            ),
        ],
    }
    width = 2 + max(len(name) for rows in sections.values() for name, _ in rows)
    lora = f"LoRA r={section(config, 'lora')['r']} on {plan.adapted_linears} linears"
    tokens = f"{plan.prompt_tokens} prompt + {plan.completion_tokens} completion"
    lines = [
        f"Memory plan for {recipe.name} ({section(config, 'model')['name_or_path']})",
        f"  {plan.base_params:,} base parameters; {lora}: {plan.trainable_params:,} trainable",
        f"  per-device batch {plan.batch} x ({tokens}) tokens; generation batch {plan.generation_batch}; "
        + f"checkpointing {'off' if ck else 'on'}; vLLM {vllm}",
        *(
            ["  generation: static KV cache, compiled decode step (model.compiled_generation)"]
            if plan.compiled
            else []
        ),
    ]
    for title, rows in sections.items():
        lines += [
            "",
            f"{title:<{width}}{'GB':>8}",
            *(f"  {name:<{width - 2}}{_gb(n):>8}" for name, n in rows),
        ]
    lines += [
        "",
        "peak = resident + vLLM share (colocated, unless sleeping) + max(generation phase, training phase)"
        + ("; with merged copies only where they fit" if plan.merge == "auto" else ""),
        f"{'card':<10}{'GB':>7}{'vLLM share':>12}{'peak GB':>9}  {'fits':<5}largest per-device batch that fits",
    ]
    for name, card in CARDS:
        best = largest_batch(config, card, model_config=model_config, offload_optimizer=offload_optimizer)
        share, peak, fits = (
            _gb(plan.vllm_share(card)),
            _gb(plan.peak(card)),
            "yes" if plan.fits(card) else "no",
        )
        short = plan.vllm == "colocate" and plan.vllm_share(card) < plan.vllm_need
        note = f" (vLLM share < {_gb(plan.vllm_need)} GB of weights + KV)" if short else ""
        if best and best + batch_step(t) > MAX_BATCH:
            note = f" (the search stops at {MAX_BATCH})"
        if plan.merge == "auto" and not plan.merges(card) and plan.fits(card):
            note += " (generates unmerged: no room for the merged copies)"
        lines.append(f"{name:<10}{_gb(card):>7}{share:>12}{peak:>9}  {fits:<5}{best or 'none'}{note}")
    lines += refit_lines(config, CARDS, model_config=model_config, offload_optimizer=offload_optimizer)
    if plan.vllm == "colocate":
        lines += ["", *vllm_share_lines(plan, t["vllm_gpu_memory_utilization"])]
    if offload_optimizer:
        lines.append(
            f"Host RAM for the offloaded optimizer: {_gb(plan.host_optimizer)} GB (fp32 master weights, two Adam "
            f"moments and gradients of {plan.trainable_params:,} trainable parameters), split evenly across the "
            "ranks: a machine needs its ranks' share of it, beyond what its processes use themselves."
        )
    if sharding:  # the figures would otherwise read as what each GPU needs under the sharding asked for
        lines.append(
            f"{sharding} shards the weights across GPUs, which this plan does not model: its figures are for "
            "whole weights on every GPU, an upper bound per GPU."
        )
    lines.append("GB = 2**30 bytes. Every formula is documented in recipes/planner/memory.py.")
    return "\n".join(lines)


def _unmerged(config: dict, plan: MemoryPlan) -> str:
    """Why a plan generates with peft's LoRA branch: the setting, and what made ``auto`` decide so."""
    from recipes.merge_rules import auto_declines

    setting = section(config, "lora")["merged_generation"]
    if setting is not True and setting is not False:  # auto: recipes/merged_lora.py's reasons
        why = {
            "vllm": "vLLM generates",
            "paged": "continuous batching generates",
            "8bit": "8-bit layers do not merge",
            "dropout": "LoRA dropout",
            "dtype": f"{section(config, 'model')['dtype']} weights round small updates",
        }[auto_declines(with_defaults(config))]
        return f"auto: none, {why}"
    return f"{str(setting).lower()}: none, {'vLLM generates' if plan.vllm != 'off' else 'peft branch'}"


def vllm_share_lines(plan: MemoryPlan, share: float) -> list[str]:
    """Per card, the ``trainer.vllm_gpu_memory_utilization`` range that fits a colocated vLLM and training."""
    title = (
        f"colocated vLLM: trainer.vllm_gpu_memory_utilization={share:g} against the range that holds vLLM's "
        "weights + KV and leaves training its peak"
    )
    lines = [
        title,
        f"{'card':<10}{'GB':>7}{'smallest':>9}{'largest':>9}  verdict",
    ]
    for name, card in CARDS:
        low, high = plan.vllm_share_range(card)
        if low > high:
            verdict = "no share fits"
        elif low <= share <= high:
            verdict = "fits"
        else:
            verdict = f"refused: set trainer.vllm_gpu_memory_utilization={high if share > high else low:g}"
        lines.append(f"{name:<10}{_gb(card):>7}{low:>9.2f}{max(high, 0):>9.2f}  {verdict}")
    return lines


def _gb(n: int) -> str:
    return f"{n / GIB:.2f}"
