"""Decode-step profiles of HF ``generate``: aten operators and milliseconds per step (``benchmarks/decode_ops.py``
prints them as a table; ``benchmarks/grpo_step.py`` profiles the trained policy with ``policy_decode_profile``).

Imported only once a measurement starts, so the scripts' ``--help`` and argument errors need no torch.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Iterator

import common  # noqa: F401  (first: its log filters hold back a bitsandbytes hint that importing transformers logs)

# isort: split
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from recipes.compiled_generation import compile_generation
from recipes.evaluation.generation import prompt_token_ids
from recipes.merged_lora import merged_lora
from recipes.model import load_model_and_tokenizer, lora_config


class OpCounter(TorchDispatchMode):
    """Counts the aten operators run while active (inside autograd too)."""

    def __init__(self):
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        return func(*args, **(kwargs or {}))


def _generate(model, batch, tokens: int, count: bool, config=None) -> tuple[float, int]:
    """(seconds, operators) of one sampled ``generate`` of exactly ``tokens`` new tokens per sequence, with the
    generation ``config`` when given."""
    counter = OpCounter()
    config = copy.deepcopy(config or model.generation_config)
    config.update(max_new_tokens=tokens, min_new_tokens=tokens, do_sample=True)
    sync = torch.cuda.synchronize if model.device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    with torch.no_grad(), counter if count else contextlib.nullcontext():
        model.generate(**batch, generation_config=config)
    sync()
    return time.perf_counter() - start, counter.ops


def _gpu_kernel_seconds(model, batch, tokens: int, config=None) -> float:
    """Seconds the GPU spent in kernels during one ``generate`` of ``tokens`` tokens (torch profiler)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        _generate(model, batch, tokens, count=False, config=config)
    # The kernels' own events only, as torch's table totals them: an operator's event also carries its kernels.
    kernels = [e for e in prof.events() if e.device_type == DeviceType.CUDA and not e.is_user_annotation]
    return sum(e.self_device_time_total for e in kernels) / 1e6


def decode_profile(model, batch: dict, *, steps: int = 16, prefix: int = 4, compiled: bool = False) -> dict:
    """``{"ops_per_step", "ms_per_step"}`` of decoding ``batch`` (input_ids, attention_mask), and on a GPU
    ``gpu_ms_per_step``: the kernels' share of the step. Far below ``ms_per_step``, the GPU waits on the host.

    Timing runs without the counter (its Python hook slows every operator) and after one warm-up generate of the
    longer length, so a static cache is sized, and a ``compiled`` step compiled, before anything is measured.
    ``compiled``: decode with a static cache and a compiled step; ``ops_per_step`` is then None.
    """
    config = None
    if compiled:
        config = copy.deepcopy(model.generation_config)
        compile_generation(config, model.device.type)
    # Warm-up: lazy allocations, kernel selection, the compile.
    _generate(model, batch, prefix + steps, count=False, config=config)
    ops = None
    if not compiled:
        short_ops, long_ops = (_generate(model, batch, n, count=True)[1] for n in (prefix, prefix + steps))
        ops = (long_ops - short_ops) / steps
    short = min(_generate(model, batch, prefix, count=False, config=config)[0] for _ in range(2))
    long = min(_generate(model, batch, prefix + steps, count=False, config=config)[0] for _ in range(2))
    profile = {"ops_per_step": ops, "ms_per_step": 1000 * max(long - short, 0.0) / steps}
    if model.device.type == "cuda":
        kernels = [_gpu_kernel_seconds(model, batch, n, config) for n in (prefix, prefix + steps)]
        profile["gpu_ms_per_step"] = 1000 * max(kernels[1] - kernels[0], 0.0) / steps
    return profile


def policy_decode_profile(trainer, batch_size: int, steps: int = 16) -> dict:
    """``decode_profile`` of a GRPO trainer's policy as it generates: its first ``batch_size`` training prompts,
    left-padded, with the adapter merged when the trainer merges it (``lora.merged_generation``)."""
    tokenizer = trainer.processing_class
    rows = trainer.train_dataset.select(range(min(batch_size, len(trainer.train_dataset))))
    tokenizer.padding_side = "left"
    prompts = prompt_token_ids(tokenizer, list(rows["prompt"]))
    batch = tokenizer.pad({"input_ids": prompts}, return_tensors="pt").to(trainer.model.device)
    merge = getattr(trainer, "merged_generation", False)
    compiled = getattr(trainer, "compiled_generation", False)
    with merged_lora(trainer.model, keep=compiled) if merge else contextlib.nullcontext():
        profile = decode_profile(trainer.model, batch, steps=steps, compiled=compiled)
    return {**profile, "merged": merge, "compiled": compiled}


def profile_recipe(recipe, batch_size: int, steps: int, compiled: bool = False) -> Iterator[dict]:
    """Rows, each as soon as it is measured (a run stopped at a time limit keeps the rows before): the recipe's
    base model, with the recipe's (fresh) LoRA adapter, with it merged, and when ``compiled`` merged and decoded by
    a compiled step."""
    from peft import get_peft_model

    model, tokenizer = load_model_and_tokenizer(recipe.config["model"])
    model.eval()
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Natalia sold clips to 48 of her friends in April. How many in total?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    batch = tokenizer([text] * batch_size, return_tensors="pt").to(model.device)
    yield {"model": "base", **decode_profile(model, batch, steps=steps)}
    adapted = get_peft_model(model, lora_config(recipe.config["lora"]))
    adapted.eval()
    lora = f"+ LoRA r={recipe.config['lora']['r']}"
    yield {"model": lora, **decode_profile(adapted, batch, steps=steps)}
    with merged_lora(adapted, keep=compiled):
        yield {"model": f"{lora}, merged", **decode_profile(adapted, batch, steps=steps)}
        if compiled:
            yield {
                "model": f"{lora}, merged, compiled",
                **decode_profile(adapted, batch, steps=steps, compiled=True),
            }
