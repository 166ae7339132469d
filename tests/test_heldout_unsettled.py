"""Held-out evaluation during training grades as the reward does: a comparison that runs out of time is marked
unsettled at once, never asked again patiently (up to 60 s more per answer in the grader process, on the training
process, while with ZeRO-3 or FSDP every other process waits for it at its next generate call)."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

from recipes.evaluation import live
from recipes.evaluation.generation import Completion, Decoding

MATRIX = r"\begin{pmatrix} 2 \\ 9 \end{pmatrix}"
ANSWER = Completion(rf"So $A = \boxed{{{MATRIX}}}$.", 12)


class _Generator:
    def __init__(self, *args):
        pass

    def size_cache(self, prompts):
        pass

    def generate(self, prompts, seeds):
        return [ANSWER] * len(prompts)


def test_held_out_grading_marks_a_timeout_unsettled_without_a_patient_retry(busy, monkeypatch):
    model = SimpleNamespace(training=True, eval=lambda: None, train=lambda mode: None)
    monkeypatch.setattr(live, "generate_context", lambda trainer: (contextlib.nullcontext(), model))
    monkeypatch.setattr(live, "HFGenerator", _Generator)
    monkeypatch.setattr(live, "prompt_token_ids", lambda tokenizer, prompts: [[1]] * len(prompts))
    trainer = SimpleNamespace(
        accelerator=SimpleNamespace(state=SimpleNamespace(process_index=0, num_processes=1)),
        processing_class=SimpleNamespace(padding_side="left"),
        model=model,
    )
    rows = [{"id": f"math-{i}", "prompt": [], "question": "Find A.", "gold": MATRIX} for i in range(2)]
    plan = live.HeldoutPlan(rows, 2, 0, 4, Decoding(1.0, 1.0, 8), "boxed", {"model": "m"})

    records = live.evaluate_live(trainer, plan, step=5)

    assert [(r["correct"], r.get("unsettled")) for r in records] == [(False, True)] * 4
    assert busy["asked"] and not [asked for asked in busy["asked"] if asked[1]]  # never patiently
