"""Held-out evaluation during training grades as the reward does first (a comparison that runs out of time is
marked unsettled at once: a patient grade of every sample would cost up to 60 s more per answer on the training
process, while every other process waits), then grades those few again patiently within a budget
(``live.SETTLE_BUDGET_S``): left unsettled, they would be left out of the step's accuracy, and the answers that run
out in a busy moment are not a random sample of them."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

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


@pytest.fixture
def evaluate(monkeypatch):
    """evaluate_live on a stand-in policy that answers MATRIX to every question (2 questions x 2 samples)."""
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
    return lambda: live.evaluate_live(trainer, plan, step=5)


def test_grades_that_ran_out_in_a_busy_moment_are_settled_by_a_patient_second_pass(busy, evaluate):
    busy["patient_answers"] = True  # the reward's bounds run out; the patient ones do not
    records = evaluate()
    assert [(r["correct"], r.get("unsettled"), r["step"]) for r in records] == [(True, None, 5)] * 4
    assert busy["asked"][0] == ("fingerprint", False)  # the reward's bounds first, on the training process
    assert ("fingerprint", True) in busy["asked"]


def test_what_the_patient_pass_cannot_settle_stays_unsettled(busy, evaluate):
    records = evaluate()
    assert [(r["correct"], r.get("unsettled")) for r in records] == [(False, True)] * 4
    # One patient request for the one answer: a pathological answer sampled again costs no second minute.
    assert busy["asked"].count(("fingerprint", True)) == 1


def test_the_patient_pass_stops_at_its_budget(busy, evaluate, monkeypatch):
    busy["patient_answers"] = True
    monkeypatch.setattr(live, "SETTLE_BUDGET_S", 0.0)
    records = evaluate()
    assert [r.get("unsettled") for r in records] == [True] * 4
    assert not [asked for asked in busy["asked"] if asked[1]]  # never patiently
