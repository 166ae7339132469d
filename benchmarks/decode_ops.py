"""Operators and milliseconds per decode step of HF ``generate``: the per-token overhead of the one-GPU path.

    python benchmarks/decode_ops.py gsm8k_tiny                        # the tiny model on a CPU, seconds
    python benchmarks/decode_ops.py gsm8k_llama --batch 24 --steps 32  # on a GPU, the recipe's model
    python benchmarks/decode_ops.py gsm8k_llama --random-weights meta-llama/Llama-3.1-8B-Instruct --layers 2
    python benchmarks/decode_ops.py gsm8k_llama --batch 24 --steps 32 --compiled      # + the compiled step

A decode step is one forward of one token per sequence, plus sampling and cache bookkeeping. Every aten operator
it runs is at least one kernel launch on a GPU, and Python works for each; counted with a ``TorchDispatchMode``,
the number is the same on a CPU. Per step = (generating N + K tokens) - (generating N tokens), divided by K, so
prefill and set-up cancel out. Rows: the base model, and the model with the recipe's LoRA adapter on it, as GRPO
generates (peft's LoRA branch runs on every adapted projection), and that model with the adapter merged for
generation (``recipes.merged_lora``: one matmul per projection again), as ``lora.merged_generation`` runs it.
``--compiled`` adds that model decoded with a static cache and a compiled step (``model.compiled_generation``);
its operators run inside compiled kernels, so only its time is measured (first a pause to compile).

``--random-weights NAME`` measures a shipped shape with random weights (no download); ``--layers N`` keeps N of
its decoder layers at full width, a size a CPU can decode. Operators grow by the same count with every layer, so
two runs (``--layers 1`` and ``2``) give the full model's count: ops(1) + (layers - 1) x (ops(2) - ops(1)).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

if __package__ in (None, ""):  # run as a script: import the project, not the modules beside this file
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from benchmarks.step_timer import build_random_model
from common.errors import exit_status
from recipes.compiled_generation import compile_generation
from recipes.evaluation.generation import prompt_token_ids
from recipes.merged_lora import merged_lora
from recipes.model import load_model_and_tokenizer, lora_config
from recipes.planner.shapes import SHAPES, config_for
from recipes.recipe import load_recipe


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


def table_header(recipe_name: str, batch_size: int, gpu: bool) -> str:
    return "\n".join([
        f"{recipe_name}: decode steps of a batch of {batch_size}",
        "| model | aten ops per decode step | ms per decode step |" + (" GPU kernel ms per step |" if gpu else ""),
        "|---|---|---|" + ("---|" if gpu else ""),
    ])  # fmt: skip


def table_row(row: dict) -> str:
    ops = "in compiled kernels" if row["ops_per_step"] is None else round(row["ops_per_step"])
    gpu = f" {row['gpu_ms_per_step']:.1f} |" if "gpu_ms_per_step" in row else ""
    return f"| {row['model']} | {ops} | {row['ms_per_step']:.1f} |{gpu}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("recipe", help="recipe name or YAML path (its model: and lora: sections are used)")
    parser.add_argument("overrides", nargs="*", help="section.key=value overrides")
    parser.add_argument("--batch", type=int, default=8, help="sequences decoded together (default 8)")
    parser.add_argument("--steps", type=int, default=16, help="decode steps measured (default 16)")
    parser.add_argument("--random-weights", choices=list(SHAPES), help="random-weight model of this shape")
    parser.add_argument("--layers", type=int, help="with --random-weights: this many decoder layers")
    parser.add_argument("--compiled", action="store_true", help="add a row decoded by a compiled step")
    args = parser.parse_intermixed_args(argv)
    if args.layers is not None and (not args.random_weights or args.layers < 1):
        parser.error("--layers takes a positive number and needs --random-weights")

    def measure() -> None:
        recipe = load_recipe(args.recipe, args.overrides)
        with tempfile.TemporaryDirectory(prefix="decode-ops-") as tmp:
            if args.random_weights:
                config = config_for(args.random_weights, layers=args.layers)
                build_random_model(config, Path(tmp), recipe.config["model"]["dtype"])
                recipe = load_recipe(args.recipe, [*args.overrides, f"model.name_or_path={tmp}"])
            print(table_header(recipe.name, args.batch, torch.cuda.is_available()), flush=True)
            for row in profile_recipe(recipe, args.batch, args.steps, args.compiled):
                print(table_row(row), flush=True)

    return exit_status(measure)


if __name__ == "__main__":
    sys.exit(main())
