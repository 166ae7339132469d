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
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the project, not the modules beside this file
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from common.errors import exit_status
from recipes.planner.shapes import SHAPES, config_for
from recipes.recipe import load_recipe


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
        import torch  # here, not at the top: --help and argument errors answer at once

        from benchmarks.decode_profile import profile_recipe
        from benchmarks.step_timer import build_random_model

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
