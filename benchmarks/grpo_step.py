"""GRPO step time by phase, generated tokens per second and peak memory, against the hardware floor.

    python benchmarks/grpo_step.py gsm8k_tiny --steps 3                      # CPU, tiny model, about a minute
    python benchmarks/grpo_step.py gsm8k_llama --random-weights meta-llama/Llama-3.1-8B-Instruct --steps 5
    python benchmarks/grpo_step.py gsm8k_qwen trainer.use_vllm=true trainer.vllm_mode=colocate --steps 5
    python benchmarks/grpo_step.py gsm8k_qwen --random-weights Qwen/Qwen2.5-1.5B-Instruct --layers 4 --steps 1 \
        --count-tensors trainer.bf16=false   # CPU: the memory planner against live tensor bytes, per phase

Runs N optimizer steps of a recipe (any ``section.key=value`` override) through the same ``build_trainer`` as
``recipes/run.py`` and prints one row per step. Phases come from TRL's own profiling (``profiling_context``:
``*.generate`` and ``sync_weights`` are generation, ``_calculate_rewards`` is reward, the rest of
``_prepare_inputs`` is "score" (old/reference log-probs, padding, decoding)) and from Trainer callbacks (the
remaining step time up to ``optimizer.step()`` is forward+backward; ``optimizer.step()`` itself is "optim").
Peak memory is ``torch.cuda.max_memory_allocated`` on a GPU, else the process's peak RSS (``getrusage``), shown
next to the memory planner's prediction (``plan_memory(...).peak(card)``; on a CPU the RSS also counts the
Python and torch libraries, so the two only agree in size).

The floor and its arithmetic are in ``benchmarks/floor.py``. ``--random-weights NAME`` builds a model of a
shipped shape (recipes/planner/shapes.py) with random weights and the real vocabulary size, saved with the tiny model's
tokenizer (its ids all lie inside the real vocabulary): random weights almost never emit that tokenizer's EOS,
so every completion runs to max_completion_length, the case the floor describes.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import resource
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

if __package__ in (None, ""):  # run as a script: import the project, not the modules beside this file
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

import torch
from tqdm import tqdm
from transformers import TrainerCallback

from benchmarks.floor import HARDWARE, detect_hardware, floor_seconds
from benchmarks.live_tensors import LiveTensorBytes, planner_check
from common.errors import UserError
from recipes.planner.memory import GIB, plan_memory, section, trainer_settings
from recipes.planner.shapes import SHAPES, config_for, load_model_config
from recipes.recipe import RecipeError, load_recipe

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


@dataclass
class Step:
    """One optimizer step's timings in seconds and its generated tokens."""

    total: float = 0.0
    prepare: float = 0.0  # all of _prepare_inputs: generation, reward and scoring
    generate: float = 0.0
    reward: float = 0.0
    optimizer: float = 0.0
    tokens: float = 0.0
    peak_bytes: int = 0
    marks: dict = field(default_factory=dict)

    @property
    def score(self) -> float:
        return self.prepare - self.generate - self.reward

    @property
    def forward_backward(self) -> float:
        return self.total - self.prepare - self.optimizer


def peak_memory_bytes() -> int:
    """Peak CUDA allocation when a GPU is used, else the process's peak resident set (Linux reports KiB)."""
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated()
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class StepTimer(TrainerCallback):
    """Collects a :class:`Step` per optimizer step from callbacks and TRL's profiling timings."""

    def __init__(self, completions_per_step: int, total_steps: int):
        self.completions_per_step = completions_per_step
        self.steps: list[Step] = []
        self.bar = tqdm(total=total_steps, desc="GRPO steps", unit="step", file=sys.stderr)

    def record_profile(self, name: str, seconds: float) -> None:
        """Attribute one TRL ``profiling/Time taken: <Trainer>.<name>`` timing to the running step."""
        if not self.steps:
            return
        step, block = self.steps[-1], name.split(".", 1)[-1]
        if block == "_prepare_inputs":
            step.prepare += seconds
        elif block == "_calculate_rewards":
            step.reward += seconds
        elif block.endswith(("generate", "generate_batch")) or block == "sync_weights":
            step.generate += seconds

    def on_step_begin(self, args, state, control, **kwargs):
        self.steps.append(Step(marks={"begin": time.perf_counter()}))

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.steps[-1].marks["optimizer"] = time.perf_counter()

    def on_optimizer_step(self, args, state, control, **kwargs):
        step = self.steps[-1]
        step.optimizer = time.perf_counter() - step.marks["optimizer"]

    def on_step_end(self, args, state, control, **kwargs):
        step = self.steps[-1]
        step.total = time.perf_counter() - step.marks["begin"]
        step.peak_bytes = peak_memory_bytes()
        self.bar.update(1)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.steps and logs and "completions/mean_length" in logs:  # logging_steps=1: this step's mean
            self.steps[-1].tokens = logs["completions/mean_length"] * self.completions_per_step


def build_random_model(config, folder: Path, dtype: str) -> None:
    """Save a random-weight model of ``config`` (a shipped shape) and the tiny model's tokenizer to ``folder``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from recipes.builtin import resolve_builtin

    tokenizer = AutoTokenizer.from_pretrained(resolve_builtin("builtin:tiny-llama"))
    if len(tokenizer) > config.vocab_size:  # cannot happen for the shipped shapes; guards future ones
        raise RecipeError(
            f"--random-weights {config.name_or_path}: vocabulary {config.vocab_size} < tokenizer's "
            f"{len(tokenizer)}."
        )
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = AutoModelForCausalLM.from_config(
            config, dtype=config.dtype if dtype == "auto" else getattr(torch, dtype)
        )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    del model  # free it now: a copy left on the GPU would count in the measured peak of the run that loads it
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def run_steps(recipe, completions_per_step: int, steps: int, count_tensors: bool = False):
    """Train ``steps`` optimizer steps of ``recipe``.

    Returns their timings and, with ``count_tensors``, the live-tensor peak per phase and the widest padded
    prompt and completion batches the steps ran (the shapes to check the planner at); else None.
    """
    from transformers import PrinterCallback
    from trl.extras.profiling import ProfilingContext

    from recipes.run import build_trainer

    timer = StepTimer(completions_per_step, steps)
    trainer = build_trainer(recipe, callbacks=[timer])
    trainer.remove_callback(PrinterCallback)  # its raw log dicts would interleave with the table
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()

    def record(context, seconds):  # TRL sends these timings only to wandb/mlflow/trackio: catch them here
        timer.record_profile(context.name, seconds)

    measured = {"prompt_tokens": 0, "completion_tokens": 0}
    generate_and_score = trainer._generate_and_score_completions

    def widths_recorded(*args, **kwargs):
        out = generate_and_score(*args, **kwargs)
        for key in ("prompt", "completion"):
            measured[f"{key}_tokens"] = max(measured[f"{key}_tokens"], out[f"{key}_ids"].shape[1])
        return out

    trainer._generate_and_score_completions = widths_recorded
    tensors = [*trainer.model.parameters(), *trainer.model.buffers()]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    live = LiveTensorBytes(tensors, device) if count_tensors else contextlib.nullcontext()
    with mock.patch.object(ProfilingContext, "_log_metrics", record), live:
        trainer.train()
    timer.bar.close()
    return timer.steps, ({**measured, "peak": live.peak} if count_tensors else None)


def _row(label: str, s: Step, floor: float | None) -> str:
    ratio = f"{s.total / floor:>8.1f}x" if floor else f"{'n/a':>9}"
    cells = (s.total, s.generate, s.reward, s.score, s.forward_backward, s.optimizer)
    tok_s = s.tokens / s.generate if s.generate else 0.0
    times = " ".join(f"{v:>{len(c)}.3f}" for v, c in zip(cells, COLUMNS[1:7]))
    return f"{label:>4} {times} {tok_s:>9,.0f} {s.peak_bytes / GIB:>7.2f} {ratio}"


def mean_step(steps: list[Step]) -> Step:
    """The field-wise mean of ``steps`` (the peak is their maximum)."""
    names = ("total", "prepare", "generate", "reward", "optimizer", "tokens")
    mean = Step(**{n: sum(getattr(s, n) for s in steps) / len(steps) for n in names})
    mean.peak_bytes = max(s.peak_bytes for s in steps)
    return mean


def report(recipe, steps: list[Step], plan, t: dict, hardware: str | None, card_bytes: int) -> str:
    """The table: a row per step, the mean of steps 2..N, then the floor, the planner's peak and its check."""
    floor = floor_seconds(plan, t, hardware) if hardware else None
    total_floor = sum(floor) if floor else None
    completions = plan.batch * t["gradient_accumulation_steps"]
    lines = [
        (
            f"{recipe.name}: {recipe.config['model']['name_or_path']}, {plan.base_params / 1e9:.3g}B params, "
            f"{completions} completions/step of up to {plan.completion_tokens} tokens (prompts up to "
            f"{plan.prompt_tokens}), device {torch.cuda.get_device_name(0) if card_bytes else 'cpu'}"
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
    kind = "CUDA max_memory_allocated" if card_bytes else "process peak RSS"
    lines.append(
        f"peak memory: measured {measured:.2f} GB ({kind}), planner {plan.peak(card_bytes) / GIB:.2f} GB"
    )
    return "\n".join(lines)


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
    args = parser.parse_intermixed_args(argv)
    if args.steps < 1:
        parser.error("--steps must be at least 1")
    if args.layers is not None and (not args.random_weights or args.layers < 1):
        parser.error("--layers takes a positive number and needs --random-weights")
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
        try:
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
            steps, measured = run_steps(recipe, completions, args.steps, args.count_tensors)
        except UserError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    card_bytes = torch.cuda.get_device_properties(0).total_memory if torch.cuda.is_available() else 0
    print(report(recipe, steps, plan, t, detect_hardware(args.hardware), card_bytes))
    if measured:
        print("\n" + "\n".join(planner_check(recipe, model_config, plan, measured, card_bytes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
