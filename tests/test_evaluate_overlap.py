"""recipes/evaluate.py warns when the evaluated questions are also training questions (recipes/evaluation/overlap.py)."""

from __future__ import annotations

import json
import logging
import re

import pytest

from recipes.evaluation import generation
from recipes.evaluation.generation import EvaluationError
from recipes.evaluation.overlap import warn_if_trained_on
from recipes.recipe import load_recipe
from recipes.tasks.heldout import in_heldout
from tests._evaluate_helpers import run


def _jsonl(path, questions):
    path.write_text("".join(json.dumps({"question": q, "answer": "7"}) + "\n" for q in questions))


@pytest.fixture
def overlapping(tmp_path):
    """The user trial: a folder whose test.jsonl has 10 of its 40 questions word for word in train.jsonl."""
    trained = [q for q in (f"Ann has {i} apples and eats {i % 3}. How many are left?" for i in range(80))]
    trained = [q for q in trained if not in_heldout(q)][:40]  # the carved held-out 5% is never trained on
    tested = [q.replace(" and ", "  and\n") for q in trained[:10]]  # re-wrapped: still the same question
    tested += [f"Bob has {i} pears. How many has he?" for i in range(30)]
    _jsonl(tmp_path / "train.jsonl", trained)
    _jsonl(tmp_path / "test.jsonl", tested)
    return tmp_path


def test_evaluating_a_split_that_repeats_training_questions_warns_with_count_example_and_fix(
    overlapping, capsys, caplog, monkeypatch
):
    def stop(*args, **kwargs):
        raise EvaluationError("stopped before loading a model")

    monkeypatch.setattr(generation, "load_generator", stop)
    out = overlapping / "out.jsonl"
    with caplog.at_level(logging.WARNING, logger="recipes.evaluate"):
        run(capsys, "gsm8k_tiny", "data.task=jsonl", f"data.source={overlapping}", "--out", out)
    assert (
        f"10 of the 40 evaluated questions (--split test of {overlapping}) are also in the training split"
        in (caplog.text)
    )
    assert f"(data.split=train of data.source {overlapping})" in caplog.text
    assert re.search(r"e\.g\. \S+-test-\d+ 'Ann has \d+ apples and eats", caplog.text)  # an id and its text
    assert "evaluate with --split heldout" in caplog.text


def test_the_training_and_heldout_splits_and_other_hub_datasets_are_not_checked(
    overlapping, caplog, monkeypatch
):
    data = load_recipe("gsm8k_tiny", ["data.task=jsonl", f"data.source={overlapping}"]).config["data"]
    rows = [
        {
            "id": "x",
            "question": json.loads((overlapping / "train.jsonl").read_text().splitlines()[0])["question"],
        }
    ]
    with caplog.at_level(logging.WARNING, logger="recipes.evaluate"):
        assert warn_if_trained_on(data, data, "test", rows) == 1
        caplog.clear()
        for split in ("train", "heldout"):
            assert warn_if_trained_on(data, data, split, rows) == 0
        # Training on one Hub dataset, evaluating on another: checking would download the training split.
        hub = {**data, "source": "EleutherAI/hendrycks_math"}
        monkeypatch.setattr(
            "recipes.tasks.heldout.task_rows", lambda *a: pytest.fail("read the training split")
        )
        assert warn_if_trained_on(hub, {"source": "HuggingFaceH4/MATH-500"}, "test", rows) == 0
    assert not caplog.records
