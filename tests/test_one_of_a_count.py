"""Messages that count say one thing in the singular: a split of 1 question, 1 nonzero difference."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from datasets import Dataset

from recipes.evaluation.generation import EvaluationError
from recipes.evaluation.questions import select_questions
from recipes.recipe import load_recipe
from recipes.tasks.sources import DataError
from stats.report import _smallest_p_note


def test_asking_more_questions_than_a_one_question_split_has():
    with pytest.raises(EvaluationError) as raised:
        select_questions(["q1"], 2, seed=0)
    assert str(raised.value) == "--questions 2 but the split has 1 question; use 1 or fewer."


def test_asking_more_held_out_questions_than_a_one_question_split_has(monkeypatch):
    import recipes.data
    import recipes.evaluation.questions
    from recipes.heldout import heldout_plan

    monkeypatch.setattr(recipes.evaluation.questions, "eval_data", lambda data, split: data)
    monkeypatch.setattr(recipes.data, "load_split", lambda data, split: Dataset.from_list([{"id": "q1"}]))
    recipe = load_recipe("arith_tiny", ["heldout.enabled=true", "heldout.questions=2"])
    with pytest.raises(DataError) as raised:
        heldout_plan(recipe)
    source = recipe.config["data"]["source"]
    assert str(raised.value) == (
        f"heldout.questions is 2 but the heldout split of {source} has 1 question; set heldout.questions=1 or fewer."
    )


@pytest.mark.parametrize(
    ("diffs", "note"),
    [
        ([0, 1, 0], "  (1 nonzero difference: p cannot go below 1)"),
        ([1, -1, 0], "  (2 nonzero differences: p cannot go below 0.5)"),
    ],
)
def test_the_smallest_p_note_counts_one_difference_and_several(diffs, note):
    assert _smallest_p_note(SimpleNamespace(comparison=SimpleNamespace(diffs=diffs))) == note


def test_an_evaluation_of_one_sample_per_question_says_sample(tmp_path):
    from recipes.evaluation.summary import summary

    records = [{"id": q, "correct": q == "a", "format_ok": True} for q in ("a", "b")]
    text = summary(records, questions=2, out=tmp_path / "e.jsonl")
    assert text.startswith(f"{tmp_path / 'e.jsonl'}: 2 questions x 1 sample = 2 records")
