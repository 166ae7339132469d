"""GRPO step time by phase, generated tokens per second and peak memory, against the hardware floor.

    python benchmarks/grpo_step.py gsm8k_tiny --steps 3                      # CPU, tiny model, about a minute
    python benchmarks/grpo_step.py gsm8k_llama --random-weights meta-llama/Llama-3.1-8B-Instruct --steps 5
    python benchmarks/grpo_step.py gsm8k_qwen trainer.use_vllm=true trainer.vllm_mode=colocate --steps 5
    python benchmarks/grpo_step.py gsm8k_qwen --random-weights Qwen/Qwen2.5-1.5B-Instruct --layers 4 --steps 1 \
        --count-tensors --decode-steps 0 trainer.bf16=false trainer.per_device_train_batch_size=4 \
        trainer.num_generations=4 trainer.gradient_accumulation_steps=1 trainer.max_completion_length=32 \
        "rewards=[{name: correctness, reward: 5.0, min_tokens: 8, full_credit_tokens: 24}, {name: format}]"
        # CPU: the planner against live tensor bytes, at a CPU-sized batch (docs/PERFORMANCE.md); the recipe's
        # own batch (48 completions of 400 tokens) passed 17 GB of RAM on a CPU before its first step ended

Runs N optimizer steps of a recipe (any ``section.key=value`` override) through the same ``build_trainer`` as
``recipes/run.py`` and prints one row per step. Generation is the trainer's ``_generate_single_turn`` calls
(merging the adapter for ``lora.merged_generation``, vLLM's weight sync, generating); the other phases come from
TRL's own profiling (``profiling_context``: ``_calculate_rewards`` is reward, the rest of ``_prepare_inputs`` is
"score" (old/reference log-probs, padding, decoding)) and from Trainer callbacks (the remaining step time up to
``optimizer.step()`` is forward+backward; ``optimizer.step()`` itself is "optim").
Peak memory is ``torch.cuda.max_memory_allocated`` on a GPU, else the process's peak RSS (``getrusage``), shown
next to the memory planner's prediction (``plan_memory(...).peak(card)``; on a CPU the RSS also counts the
Python and torch libraries, so the two only agree in size). Under the table, one decode step of the trained policy
at the generation batch, generated as the trainer generates (merged or peft's branch): aten operators (each a
kernel launch on a GPU), milliseconds, and on a GPU the milliseconds its kernels ran (benchmarks/decode_ops.py);
``--decode-steps 0`` skips it.

The floor and its arithmetic are in ``benchmarks/floor.py``. ``--random-weights NAME`` builds a model of a
shipped shape (recipes/planner/shapes.py) with random weights and the real vocabulary size, saved with the tiny model's
tokenizer (its ids all lie inside the real vocabulary): random weights almost never emit that tokenizer's EOS,
so every completion runs to max_completion_length, the case the floor describes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the project, not the modules beside this file
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from benchmarks.floor import HARDWARE, detect_hardware, floor_seconds
from common.errors import exit_status
from recipes.planner.memory import GIB, plan_memory, section, trainer_settings
from recipes.planner.shapes import SHAPES, config_for, load_model_config
from recipes.recipe import load_recipe

SAMPLE_DATA = "samples/gsm8k_train_sample.jsonl"
COLUMNS = (
    "step",
    "total s",
    "generate s",
    "reward s",
    "score s",
    "fwd+bwd s",
    "optim s",
    "gen tok/s",
    "peak GB",
)


def _row(label: str, s, floor: float | None) -> str:
    ratio = f"{s.total / floor:>8.1f}x" if floor else f"{'n/a':>9}"
    cells = (s.total, s.generate, s.reward, s.score, s.forward_backward, s.optimizer)
    tok_s = s.tokens / s.generate if s.generate else 0.0
    times = " ".join(f"{v:>{len(c)}.3f}" for v, c in zip(cells, COLUMNS[1:7]))
    return f"{label:>4} {times} {tok_s:>9,.0f} {s.peak_bytes / GIB:>7.2f} {ratio}"


def decode_line(decode: dict, batch: int) -> str:
    """One decode step of the trained policy, as the trainer generates (benchmarks/decode_ops.py)."""
    how = "adapter merged" if decode["merged"] else "peft's LoRA branch"
    how += ", compiled step" if decode["compiled"] else ""
    ops = (
        "ops in compiled kernels"
        if decode["ops_per_step"] is None
        else f"{decode['ops_per_step']:.0f} aten ops"
    )
    gpu = f", GPU kernels {decode['gpu_ms_per_step']:.1f} ms" if "gpu_ms_per_step" in decode else ""
    return f"decode step ({batch} sequences, {how}): {ops}, {decode['ms_per_step']:.1f} ms{gpu}"


def report(recipe, steps: list, plan, t: dict, hardware: str | None, card_bytes: int, device: str) -> str:
    """The table: a row per step, the mean of steps 2..N, then the floor, the planner's peak and its check."""
    from benchmarks.step_timer import mean_step

    floor = floor_seconds(plan, t, hardware) if hardware else None
    total_floor = sum(floor) if floor else None
    completions = plan.batch * t["gradient_accumulation_steps"]
    lines = [
        (
            f"{recipe.name}: {recipe.config['model']['name_or_path']}, {plan.base_params / 1e9:.3g}B params, "
            f"{completions} completions/step of up to {plan.completion_tokens} tokens (prompts up to "
            f"{plan.prompt_tokens}), device {device}" + (", compiled decoding" if plan.compiled else "")
        ),
        "",
        " ".join(
            [f"{COLUMNS[0]:>4}", *COLUMNS[1:7], f"{COLUMNS[7]:>9}", f"{COLUMNS[8]:>7}", f"{'x floor':>9}"]
        ),
    ]
    lines += [_row(str(i), s, total_floor) for i, s in enumerate(steps, 1)]
    if len(steps) > 1:  # step 1 pays one-off costs (kernel selection, allocator growth, lazy imports)
        lines.append(_row("mean", mean_step(steps[1:]), total_floor))
    lines.append("")
    if floor:
        lines.append(
            f"floor ({hardware}: {HARDWARE[hardware][0] / 1e12:.1f} TB/s, {HARDWARE[hardware][1] / 1e12:.0f} "
            f"TFLOP/s bf16): {total_floor:.2f} s/step = generation {floor[0]:.2f} s + training {floor[1]:.2f} s"
        )
    else:
        lines.append("floor: n/a (no GPU)" if not card_bytes else "floor: n/a (unknown GPU: pass --hardware)")
    measured = max(s.peak_bytes for s in steps) / GIB
    planned = plan.peak(card_bytes) / GIB
    if not card_bytes:
        lines.append(f"peak memory: measured {measured:.2f} GB (process peak RSS), planner {planned:.2f} GB")
        return "\n".join(lines)
    # max_memory_allocated counts tensors only: compare it with the plan less its constant for the CUDA context and
    # allocator slack, which no tensor holds (with the constant, the bf16 8B plan read 6.7% high, NF4 21%).
    tensors = planned - plan.overhead / GIB
    lines.append(
        f"peak memory: measured {measured:.2f} GB of tensors (CUDA max_memory_allocated), planner {tensors:.2f} GB "
        f"of tensors ({tensors / measured - 1:+.1%}); {planned:.2f} GB on the card with its "
        f"{plan.overhead / GIB:.2f} GB CUDA constant"
    )
    return "\n".join(lines)


def measure(args: argparse.Namespace) -> None:
    """Train the steps and print the table, the decode line and the planner check."""
    import torch  # here, not at the top: --help answers at once

    from benchmarks.live_tensors import planner_check
    from benchmarks.step_timer import build_random_model, run_steps

    with tempfile.TemporaryDirectory(prefix="grpo_step_") as tmp:
        fixed = [
            f"trainer.max_steps={args.steps}",
            "trainer.logging_steps=1",
            f"trainer.output_dir={tmp}/out",
        ]
        fixed += [
            "trainer.report_to=none",
            "trainer.disable_tqdm=true",
            f"checkpoint.every_steps={args.steps + 1}",
        ]
        overrides = list(args.overrides)
        if args.random_weights:
            overrides.append(f"model.name_or_path={tmp}/model")
            if not any(o.startswith("data.source=") for o in overrides):
                print(f"--random-weights: offline data, data.source={SAMPLE_DATA}", file=sys.stderr)
                overrides.append(f"data.source={SAMPLE_DATA}")
        recipe = load_recipe(args.recipe, [*overrides, *fixed])
        model = section(recipe.config, "model")
        model_config = (
            config_for(args.random_weights, layers=args.layers)
            if args.random_weights
            else load_model_config(model)
        )
        plan, t = plan_memory(recipe.config, model_config=model_config), trainer_settings(recipe.config)
        if args.random_weights:
            print(f"building a random-weight {args.random_weights} ...", file=sys.stderr)
            build_random_model(model_config, Path(tmp) / "model", model["dtype"])
        completions = plan.batch * t["gradient_accumulation_steps"]
        steps, measured, decode = run_steps(
            recipe,
            completions,
            args.steps,
            args.count_tensors,
            decode_batch=plan.generation_batch,
            decode_steps=args.decode_steps,
        )
    card_bytes = torch.cuda.get_device_properties(0).total_memory if torch.cuda.is_available() else 0
    device = torch.cuda.get_device_name(0) if card_bytes else "cpu"
    print(report(recipe, steps, plan, t, detect_hardware(args.hardware), card_bytes, device))
    if decode:
        print(decode_line(decode, plan.generation_batch))
    if measured:
        print("\n" + "\n".join(planner_check(recipe, model_config, plan, measured, card_bytes)))


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its table; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipe", help="recipe name or path to a recipe YAML file")
    parser.add_argument(
        "overrides", nargs="*", help="section.key=value overrides, e.g. trainer.use_vllm=true"
    )
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps to time (default 3)")
    parser.add_argument("--random-weights", choices=list(SHAPES), help="random-weight model of this shape")
    parser.add_argument(
        "--layers",
        type=int,
        help="with --random-weights: this many decoder layers (a CPU-sized model of full width)",
    )
    parser.add_argument("--hardware", choices=list(HARDWARE), help="floor for this GPU (default: detected)")
    parser.add_argument(
        "--count-tensors",
        action="store_true",
        help="count live tensor bytes op by op and check the planner per phase (slows the steps)",
    )
    parser.add_argument(
        "--decode-steps",
        type=int,
        default=16,
        help="decode steps of the trained policy to profile under the table (default 16; 0: no profile)",
    )
    args = parser.parse_intermixed_args(argv)
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    if args.decode_steps < 0:
        parser.error("--decode-steps must be 0 (no profile) or more")
    if args.layers is not None and (not args.random_weights or args.layers < 1):
        parser.error("--layers takes a positive number and needs --random-weights")
    return exit_status(lambda: measure(args))  # a UserError: its message, no traceback


if __name__ == "__main__":
    sys.exit(main())
