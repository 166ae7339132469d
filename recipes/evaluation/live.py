"""Evaluate the policy being trained, in the training process: evaluate.py's batched generation and grader on
the live model, so a held-out score during training means what an evaluation after it would.

Used by callbacks/heldout.py; not a command of its own.

Every process generates its share of the batches and the records are gathered on all of them. Each process makes
the same number of ``generate`` calls (short shares repeat their last batch, discarded), because with ZeRO-3 or
FSDP every forward pass is a collective. The training RNG is left as it was: sampling here must not change what
the run draws next.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from recipes.evaluation.generation import Decoding, HFGenerator, derive_seed, plan_batches, prompt_token_ids
from recipes.evaluation.records import make_record, settle_patiently
from recipes.merged_lora import merged_lora

# Seconds each process may spend grading again, patiently, what its reward-bounded grades left unsettled.
SETTLE_BUDGET_S = 60.0


@dataclass(frozen=True)
class HeldoutPlan:
    """What one held-out evaluation generates: the same questions, samples and seeds every time.

    Attributes:
        rows: The drawn held-out rows (``id``, ``prompt``, ``question``, ``gold``, ...).
        samples: Completions per question.
        seed: Seeds every sample (with the question id and sample index), so evaluations at different steps
            draw with common random numbers and differ only by the policy.
        batch_size: Completions per ``generate`` call.
        decoding: Sampling settings (the training sampling).
        style: The format reward's answer style, for ``format_ok`` and strict grading.
        settings: Fields every record carries (evaluate.py's: model, adapter_path, seed, split, source, decoding).
    """

    rows: list[dict]
    samples: int
    seed: int
    batch_size: int
    decoding: Decoding
    style: str | None
    settings: dict

    def batches(self) -> list[list[tuple[int, int]]]:
        """(question index, sample) units cut into batches, in plan order."""
        return plan_batches(len(self.rows), self.samples, self.batch_size)


def share(batches: list, rank: int, world: int) -> tuple[list, int]:
    """This process's batches (round robin) padded to the longest share, and how many of them are real.

    >>> share([["a"], ["b"], ["c"]], 1, 2)
    ([['b'], ['b']], 1)
    """
    mine = batches[rank::world]
    calls = -(-len(batches) // world)
    filler = mine[-1] if mine else batches[0]
    return mine + [filler] * (calls - len(mine)), len(mine)


def generate_context(trainer):
    """The context TRL's own generation uses: an unwrapped model (ZeRO-3 weights gathered, FSDP v1 summoned)."""
    import torch
    from trl.distributed import DistributedBackend
    from trl.models import unwrap_model_for_generation

    stack = contextlib.ExitStack()
    model = stack.enter_context(
        unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
            gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
        )
    )
    stack.enter_context(torch.no_grad())
    stack.enter_context(
        DistributedBackend(trainer.accelerator).summon_full_params(trainer.model_wrapped, recurse=False)
    )
    if getattr(trainer, "merged_generation", False):  # generate as the trainer does (recipes/merged_lora.py)
        try:
            stack.enter_context(merged_lora(model, keep=getattr(trainer, "compiled_generation", False)))
        except BaseException:  # leave TRL's context (activation checkpointing back on) before the error rises
            stack.close()
            raise
    return stack, model


def evaluate_live(trainer, plan: HeldoutPlan, step: int) -> list[dict]:
    """Generate and grade the plan with the trainer's current policy; every process gets all records.

    Returns:
        evaluate.py records in plan order, each with ``step``.
    """
    import torch
    from accelerate.utils import gather_object

    state = trainer.accelerator.state
    tokenizer = trainer.processing_class
    padding_side = tokenizer.padding_side
    batches = plan.batches()
    calls, real = share(batches, state.process_index, state.num_processes)
    prompts = prompt_token_ids(tokenizer, [row["prompt"] for row in plan.rows])
    was_training = trainer.model.training
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    records = []
    stack, model = generate_context(trainer)
    with stack, torch.random.fork_rng(devices=devices):
        model.eval()
        try:
            generator = HFGenerator(
                model, tokenizer, plan.decoding, getattr(trainer, "compiled_generation", False)
            )
            generator.size_cache(prompts)
            for i, batch in enumerate(calls):
                seeds = [derive_seed(plan.seed, plan.rows[q]["id"], k) for q, k in batch]
                completions = generator.generate([prompts[q] for q, _ in batch], seeds)
                if i < real:
                    records += [
                        {
                            # The reward's bounds: a patient grade of each (a minute per answer at worst) would
                            # stall every process; settle_patiently below gives the few that run out more time.
                            **make_record(
                                plan.rows[q], k, c, plan.style, plan.settings, patient=False, engine="hf"
                            ),
                            "step": step,
                        }
                        for (q, k), c in zip(batch, completions)
                    ]
        finally:
            tokenizer.padding_side = padding_side
            model.train(was_training)
    # A grade that ran out of time in a busy moment is graded again with patient bounds, within a budget: left
    # unsettled, it would be left out of the step's accuracy, and the few answers that run out are not a random
    # sample of them.
    settle_patiently(records, plan.style, SETTLE_BUDGET_S)
    if state.num_processes > 1:
        records = gather_object(records)
    order = {(row["id"], k): i for i, row in enumerate(plan.rows) for k in range(plan.samples)}
    return sorted(records, key=lambda r: order[(r["id"], r["sample"])])
