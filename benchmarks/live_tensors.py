"""Peak bytes of live tensors, counted op by op: the allocator-free measure a CPU run can give the memory planner.

    from benchmarks.live_tensors import LiveTensorBytes
    with LiveTensorBytes(model.parameters(), device_type="cpu") as live:
        trainer.train()
    live.peak  # {"generation": bytes, "training": bytes}

``torch.cuda.max_memory_allocated`` counts the bytes of tensors alive at once on a GPU; a CPU has no such
counter (its allocator is malloc, and the process RSS also holds Python and the torch libraries). This
``TorchDispatchMode`` sees every tensor an operator returns, also inside autograd's backward, and counts each
storage once from its first appearance until it is freed (a weak reference to the storage), so its peak is
the same quantity measured on the CPU: what the planner's formulas describe, without the CUDA context and
allocator slack. Tensors that exist before the mode starts are counted when passed in (model weights).

The peak is kept per phase: "generation" while the trainer's ``_generate_single_turn`` runs (which holds the
merged LoRA copies of ``lora.merged_generation``, made before TRL's ``*.generate`` profiling block opens and freed
after it closes) or TRL's profiling context of a ``*.generate`` call is open; "training" otherwise (scoring passes,
forward, backward, optimizer), so each planner phase has its own check.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Iterable
from unittest import mock

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from recipes.planner.memory import GIB, plan_memory


class LiveTensorBytes(TorchDispatchMode):
    """Counts live tensor storages and their peak per phase while active (see the module docstring)."""

    def __init__(self, tensors: Iterable[torch.Tensor] = (), device_type: str = "cpu"):
        super().__init__()
        self.device_type = device_type  # only this device's tensors count (host tensors of a GPU run do not)
        self.counted: dict[int, int] = {}  # id(storage) -> its bytes; its finalizer removes it when freed
        self.live = 0
        self.phase = "training"
        # Open generation blocks: they nest (the trainer's call, then TRL's profiling block inside it).
        self._generating = 0
        self.peak = {"generation": 0, "training": 0}
        self._patches: list = []
        for t in tensors:
            self._count(t)

    def _freed(self, key: int) -> None:
        self.live -= self.counted.pop(key)

    def _count(self, t: torch.Tensor) -> None:
        if not isinstance(t, torch.Tensor) or t.device.type != self.device_type:
            return
        storage = t.untyped_storage()  # one Python object per storage while it lives, so id() is its key
        key, size = id(storage), storage.nbytes()
        known = self.counted.get(key)
        if known == size:
            return
        if known is None:
            weakref.finalize(storage, self._freed, key)
        self.counted[key] = size  # new, or resized in place: count the difference
        self.live += size - (known or 0)
        self.peak[self.phase] = max(self.peak[self.phase], self.live)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            self._count(t)
        return out

    def _generation(self, opened: bool) -> None:
        self._generating += 1 if opened else -1
        self.phase = "generation" if self._generating else "training"

    def __enter__(self):
        from trl.extras.profiling import ProfilingContext

        from recipes.trainer import RecipeGRPOTrainer

        tracker, enter, exit_ = self, ProfilingContext.__enter__, ProfilingContext.__exit__
        generate = RecipeGRPOTrainer._generate_single_turn

        def entered(context):
            if context.name.endswith("generate"):
                tracker._generation(opened=True)
            return enter(context)

        def exited(context, *exc):
            if context.name.endswith("generate"):
                tracker._generation(opened=False)
            return exit_(context, *exc)

        def generating(trainer, *args, **kwargs):
            tracker._generation(opened=True)
            try:
                return generate(trainer, *args, **kwargs)
            finally:
                tracker._generation(opened=False)

        self._patches = [
            mock.patch.multiple(ProfilingContext, __enter__=entered, __exit__=exited),
            mock.patch.object(RecipeGRPOTrainer, "_generate_single_turn", generating),
        ]
        for patch in self._patches:
            patch.start()
        return super().__enter__()

    def __exit__(self, *exc):
        for patch in self._patches:
            patch.stop()
        return super().__exit__(*exc)


def planner_check(recipe, model_config, plan, measured: dict, card_bytes: int) -> list[str]:
    """Live-tensor peak per phase beside the planner's: at the recipe's token budget and at the widths run.

    The planner's numbers here leave out its CUDA overhead constant (not a tensor) and, without a GPU, plan a CPU
    run (``gpu=False``: TRL's torch fallback of the fused log-prob head, float dropout masks).
    """
    as_run = copy.deepcopy(recipe.config)
    as_run["data"]["max_prompt_tokens"] = measured["prompt_tokens"]
    as_run["trainer"]["max_completion_length"] = measured["completion_tokens"]
    gpu = bool(card_bytes)
    plans = [plan_memory(c, model_config=model_config, gpu=gpu) for c in (recipe.config, as_run)]
    budget = f"{plan.prompt_tokens}+{plan.completion_tokens}"
    run = f"{measured['prompt_tokens']}+{measured['completion_tokens']}"
    title = (
        "planner check, live tensor bytes (counted op by op, so the timings above are slowed; planner without its "
        f"{plan.overhead / GIB:.2f} GB CUDA overhead{'' if gpu else ', planned for a CPU run'}):"
    )
    header = (
        f"{'phase':<11} {'measured GB':>11} {'planned at ' + budget:>20} {'planned at ' + run + ' (as run)':>28} "
        f"{'as run / measured':>17}"
    )
    lines = [title, header]
    for phase, peak in measured["peak"].items():
        at_budget, at_run = (
            p.resident
            - p.overhead
            + (p.generation_phase(card_bytes) if phase == "generation" else p.training_phase)
            for p in plans
        )
        ratio = f"{at_run / peak:.2f}" if peak else "n/a"
        lines.append(
            f"{phase:<11} {peak / GIB:>11.3f} {at_budget / GIB:>20.3f} {at_run / GIB:>28.3f} {ratio:>17}"
        )
    return lines
