"""Plug-ins the spec tests point at by path (``_plugins:...``)."""

import json
from pathlib import Path

from transformers import TrainerCallback


class StepCounter(TrainerCallback):
    """A user's callback: counts optimizer steps."""

    def __init__(self, start: int = 0):
        if start < 0:
            raise ValueError(f"start must be at least 0, got {start}")
        self.steps = start

    def on_step_end(self, args, state, control, **kwargs):
        self.steps += 1


class EngineReport(TrainerCallback):
    """Writes OUTPUT_DIR/engine.json as training starts: the class of the model the Trainer trains and whether its
    parameters are sharded (FSDP2 makes them DTensors), so a test can tell FSDP from plain data parallelism."""

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        from torch.distributed.tensor import DTensor

        if state.is_world_process_zero:
            sharded = any(isinstance(p, DTensor) for p in model.parameters())
            report = {"class": type(model).__name__, "sharded": sharded}
            Path(args.output_dir, "engine.json").write_text(json.dumps(report))


class CardAtSave(TrainerCallback):
    """Records, at each checkpoint save, what OUTPUT_DIR/README.md held then (None: no file) in
    OUTPUT_DIR/cards-at-save.json: what the folder of a run stopped at that step shows."""

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            card, seen_file = Path(args.output_dir, "README.md"), Path(args.output_dir, "cards-at-save.json")
            seen = json.loads(seen_file.read_text()) if seen_file.exists() else {}
            seen[str(state.global_step)] = card.read_text() if card.exists() else None
            seen_file.write_text(json.dumps(seen))


def make_counter(start: int = 5) -> StepCounter:
    """A factory function: callbacks may be built by a function returning one."""
    return StepCounter(start)


def not_a_callback(start: int = 0) -> int:
    return start


def bonus_correct(completions, gold, **kwargs) -> list[float]:
    """A user's own correctness reward: 10 for the gold string anywhere in the text."""
    return [10.0 if g in str(c) else 0.0 for c, g in zip(completions, gold)]


bonus_correct.max_reward = 10.0
bonus_correct.is_correctness = True


def shaping(completions, **kwargs) -> list[float]:
    """A user's shaping reward that declares it can pay 3."""
    return [3.0 for _ in completions]


shaping.max_reward = 3.0


def wrong_signature(completion, answer) -> list[float]:
    """Singular names and no **kwargs: TRL's call would fail at step 1."""
    return [1.0]


def crashes(completions, **kwargs) -> list[float]:
    """Reads completions as plain strings, but TRL passes chat messages."""
    return [float(c.strip() == kwargs["gold"]) for c in completions]


def returns_a_number(completions, **kwargs) -> float:
    return 1.0


def scores_the_first_only(completions, **kwargs) -> list[float]:
    """One value whatever TRL passes: right for one completion, short by one for a group."""
    return [float("#### 5" in completions[0][-1]["content"])]


def returns_inf(completions, **kwargs) -> list[float]:
    return [float("inf")] * len(completions)


def numpy_scores(completions, **kwargs):
    """numpy scalars and bools: TRL turns them into its float tensor like floats."""
    import numpy as np

    return [np.float32(0.5) if i % 2 else True for i in range(len(completions))]


def inf_in_training(completions, id, **kwargs) -> list[float]:
    """Finite on the load-time probe's completion, infinite on every training one: only the run can see it."""
    return [0.0 if i == "probe-0" else float("inf") for i in id]


def planted_hack(completions, gold, **kwargs) -> list[float]:
    """A reward with a planted hack: it pays a well-formed answer that is WRONG, so a policy can raise it by
    getting worse. The held-out alarm must see the reward rise while held-out accuracy falls.

    Well-formed means ``#### n`` with an answer the grader reads: paying a bare ``####`` too would also teach the
    policy to drop its answers, and the unparseable alarm could then fire first."""
    from rewards.answers import grade

    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    graded = [grade(t, g) for t, g in zip(texts, gold)]
    return [float("####" in t and r.found is not None and not r.correct) for t, r in zip(texts, graded)]


def distinct_share(completion_ids, **kwargs) -> list[float]:
    """A reward the tiny random model gets varied values of (share of distinct tokens), so GRPO advantages are
    non-zero and the adapter moves: resumed and uninterrupted runs then have something to disagree about."""
    return [len(set(ids)) / max(len(ids), 1) for ids in completion_ids]


def nan_in_training(completions, id, **kwargs) -> list[float]:
    """Finite on the load-time probe's completion, NaN on every training one (TRL reads a NaN as None)."""
    return [0.0 if i == "probe-0" else float("nan") for i in id]


def none_in_training(completions, id, **kwargs) -> list[float | None]:
    """Applies to the load-time probe's completion only: every training step logs its mean as None."""
    return [0.0 if i == "probe-0" else None for i in id]
