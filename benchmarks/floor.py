"""The physical floor of a GRPO step: the time its generation and training cannot beat on a given GPU.

    from benchmarks.floor import floor_seconds
    generation, training = floor_seconds(plan_memory(recipe.config), trainer_settings(recipe.config), "h200")

Floor per optimizer step (model weights W bytes, N parameters, C completions of up to L tokens after prompts
of up to P tokens, R generation rounds per step; bandwidth B and dense bf16 FLOP/s F from HARDWARE):
    generation: decoding is memory-bound, each decode step reads the weights once for the whole batch:
                R x L x W / B
    training:   LoRA + activation checkpointing: forward 2N + backward through activations 2N + recompute 2N
                = 6N FLOPs per token (LoRA weight gradients are negligible; full fine-tuning would add 2N):
                6 x N x C x (P + L) / F
Lengths are the recipe's maxima, so short (EOS-stopped) completions can beat the floor. Without a known GPU
the floor is "n/a" (a CPU has no single bandwidth figure worth stating).
"""

from __future__ import annotations

import math

from recipes.planner.memory import steps_per_generation

# name -> (achievable HBM bytes/s, peak dense bf16 FLOP/s). H200: 4.8 TB/s peak, ~4.3 measured by copy kernels.
HARDWARE = {"h200": (4.3e12, 989e12), "h100": (3.0e12, 989e12), "a100": (2.0e12, 312e12)}


def floor_seconds(plan, t: dict, hardware: str) -> tuple[float, float]:
    """``(generation, training)`` floor in seconds per optimizer step (formulas in the module docstring)."""
    bandwidth, flops = HARDWARE[hardware]
    rounds = math.ceil(t["gradient_accumulation_steps"] / steps_per_generation(t))
    completions = plan.batch * t["gradient_accumulation_steps"]
    generation = rounds * plan.completion_tokens * plan.weights / bandwidth
    training = 6 * plan.base_params * completions * (plan.prompt_tokens + plan.completion_tokens) / flops
    return generation, training


def detect_hardware(requested: str | None) -> str | None:
    """The HARDWARE key for this machine's GPU (``requested`` wins), or None without a known GPU."""
    import torch

    if requested or not torch.cuda.is_available():
        return requested
    name = torch.cuda.get_device_name(0).lower()
    return next((key for key in HARDWARE if key in name), None)
