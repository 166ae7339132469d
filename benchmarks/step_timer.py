"""The timing machinery of ``benchmarks/grpo_step.py``: a step timer fed by Trainer callbacks and TRL's profiling,
a random-weight model builder, and the run itself. Kept apart so the script answers ``--help`` without torch.
"""

from __future__ import annotations

import contextlib
import gc
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import common  # noqa: F401  (first: its log filters hold back a bitsandbytes hint that importing transformers logs)

# isort: split
import torch
from tqdm import tqdm
from transformers import TrainerCallback

from benchmarks.live_tensors import LiveTensorBytes
from recipes.recipe import RecipeError


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
        """Attribute one TRL ``profiling/Time taken: <Trainer>.<name>`` timing to the running step. Generation is
        timed around the trainer's call instead (``record_generation``): TRL's ``*.generate`` block leaves out the
        merging of ``lora.merged_generation``, which only generation pays for."""
        if not self.steps:
            return
        step, block = self.steps[-1], name.split(".", 1)[-1]
        if block == "_prepare_inputs":
            step.prepare += seconds
        elif block == "_calculate_rewards":
            step.reward += seconds

    def record_generation(self, seconds: float) -> None:
        """Attribute one call of the trainer's ``_generate_single_turn`` (merging, vLLM's weight sync and
        generating) to the running step."""
        if self.steps:
            self.steps[-1].generate += seconds

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


def run_steps(
    recipe,
    completions_per_step: int,
    steps: int,
    count_tensors: bool = False,
    decode_batch: int = 0,
    decode_steps: int = 16,
):
    """Train ``steps`` optimizer steps of ``recipe``.

    Returns their timings; with ``count_tensors``, the live-tensor peak per phase and the widest padded prompt
    and completion batches the steps ran (the shapes to check the planner at), else None; with ``decode_batch``
    and ``decode_steps``, the trained policy's decode step at that batch over that many steps
    (``benchmarks.decode_profile.policy_decode_profile``), else None.
    """
    from trl.extras.profiling import ProfilingContext

    from callbacks.progress import ShortProgress
    from recipes.run import build_trainer

    timer = StepTimer(completions_per_step, steps)
    trainer = build_trainer(recipe, callbacks=[timer])
    trainer.remove_callback(ShortProgress)  # its log lines would interleave with the table
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

    def generation_timed(*args, **kwargs):
        start = time.perf_counter()
        try:  # the class's method, looked up at each call: LiveTensorBytes wraps it while it counts
            return type(trainer)._generate_single_turn(trainer, *args, **kwargs)
        finally:
            timer.record_generation(time.perf_counter() - start)

    trainer._generate_single_turn = generation_timed
    tensors = [*trainer.model.parameters(), *trainer.model.buffers()]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    live = LiveTensorBytes(tensors, device) if count_tensors else contextlib.nullcontext()
    with mock.patch.object(ProfilingContext, "_log_metrics", record), live:
        trainer.train()
    timer.bar.close()
    decode = None
    if decode_batch and decode_steps:
        from benchmarks.decode_profile import policy_decode_profile

        decode = policy_decode_profile(trainer, decode_batch, decode_steps)
    return timer.steps, ({**measured, "peak": live.peak} if count_tensors else None), decode


def mean_step(steps: list[Step]) -> Step:
    """The field-wise mean of ``steps`` (the peak is their maximum)."""
    names = ("total", "prepare", "generate", "reward", "optimizer", "tokens")
    mean = Step(**{n: sum(getattr(s, n) for s in steps) / len(steps) for n in names})
    mean.peak_bytes = max(s.peak_bytes for s in steps)
    return mean
