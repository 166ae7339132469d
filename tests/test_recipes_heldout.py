"""Held-out splits: carved from the training split by question hash (GSM8K, MATH, user JSONL), or the task's own
(arithmetic); never overlapping training or test questions, and what evaluate.py --split heldout reads.

python -m pytest tests/test_recipes_heldout.py -q
"""

from __future__ import annotations

import json

import pytest

from recipes.data import DataError, load_split
from recipes.evaluate import main as evaluate_main
from recipes.evaluation.questions import eval_data
from recipes.recipe import RecipeError, load_recipe
from recipes.tasks import TASKS, arithmetic
from recipes.tasks.heldout import HELDOUT_PERCENT, in_heldout, source_split

SECTION = {"system_prompt": "Be brief.", "config": None, "split": "train"}


def normalised(questions) -> set[str]:
    return {" ".join(q.split()) for q in questions}


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_gsm8k_heldout_is_5_percent_of_train_and_disjoint_from_train_and_test(gsm8k_dir):
    data = {**SECTION, "task": "gsm8k", "source": str(gsm8k_dir)}
    heldout, train = load_split(data, "heldout"), load_split(data)
    test = load_split(data, "test")
    assert (len(heldout), len(train)) == (365, 7108)  # of GSM8K's 7,473 training rows
    assert len(heldout) / (len(heldout) + len(train)) == pytest.approx(HELDOUT_PERCENT / 100, abs=0.005)
    assert not set(heldout["id"]) & set(train["id"])
    assert set(heldout["id"]) | set(train["id"]) == {f"gsm8k-train-{i:05d}" for i in range(7473)}
    assert not normalised(heldout["question"]) & normalised(train["question"])
    assert not normalised(heldout["question"]) & normalised(test["question"])
    assert all(in_heldout(q) for q in heldout["question"]) and not any(map(in_heldout, train["question"]))
    assert load_split(data, "heldout")["id"] == heldout["id"]  # deterministic
    assert len(test) == 1319  # the test split is the source's, untouched


def test_membership_is_by_whitespace_normalised_question_text(tmp_path):
    questions = [f"What is {i} plus 1?" for i in range(40)]
    held = [q for q in questions if in_heldout(q)]
    assert held and in_heldout(held[0].replace(" ", "  \n"))
    # The same question, spaced differently, lands in the held-out split with its twin (GSM8K data: the jsonl
    # task refuses a question twice).
    rows = [{"question": q, "answer": f"#### {i}"} for i, q in enumerate(questions)]
    rows.append({"question": held[0].replace(" ", "\t "), "answer": "#### 0"})
    source = write_jsonl(tmp_path / "gsm8k" / "train.jsonl", rows)
    data = {**SECTION, "task": "gsm8k", "source": str(source.parent)}
    heldout, train = load_split(data, "heldout"), load_split(data)
    assert (
        "gsm8k-train-00040" in heldout["id"]
        and len(heldout) == len(held) + 1
        and len(train) == 40 - len(held)
    )
    assert not normalised(heldout["question"]) & normalised(train["question"])
    mine = write_jsonl(
        tmp_path / "mine" / "train.jsonl", [{**r, "id": f"u{i}"} for i, r in enumerate(rows[:40])]
    )
    assert load_split({**data, "task": "jsonl", "source": str(mine)}, "heldout")["id"][0].startswith("u")


def test_limit_applies_to_training_rows_after_the_carve(gsm8k_dir):
    data = {**SECTION, "task": "gsm8k", "source": str(gsm8k_dir)}
    train = load_split(data)
    limited = load_split({**data, "limit": 100})
    assert limited["id"] == train["id"][:100] and not any(map(in_heldout, limited["question"]))
    assert len(load_split({**data, "limit": 100}, "heldout")) == 365  # the held-out split is not cut


def test_bundled_tiny_recipes_get_a_heldout_split_from_their_train_file(monkeypatch, caplog):
    monkeypatch.setattr("recipes.tasks.heldout._said", set())
    for name, sizes in (("gsm8k_tiny", (5, 195)), ("math_tiny", (10, 90))):
        data = load_recipe(name).config["data"]
        evaluated = eval_data(data, "heldout")
        assert evaluated["source"] == data["source"]  # the train sample, not a test file or data.eval_source
        with caplog.at_level("INFO", logger="recipes.tasks.heldout"):
            heldout = load_split(evaluated, "heldout")
            train = load_split({**data, "max_prompt_tokens": None})
        assert (len(heldout), len(train)) == sizes
        assert all(i.split("-")[1] == "train" for i in heldout["id"])
        assert not set(heldout["id"]) & set(train["id"])
        # Both splits read the carve; the log says it once.
        said = f"The train split of {data['source']}: {sizes[0]} of {sum(sizes)} rows held out"
        assert caplog.text.count(said) == 1


def test_math_heldout_comes_from_its_train_source_not_math500(math_dir):
    data = {**SECTION, "task": "math", "source": str(math_dir / "train_sample.jsonl")}
    data["eval_source"] = str(math_dir / "math500_test.jsonl")
    evaluated = eval_data(data, "heldout")
    assert evaluated["source"] == data["source"]
    heldout = load_split(evaluated, "heldout")
    math500 = load_split(eval_data(data, "test"), "test")
    assert len(heldout) == 25 and all(i.startswith("math-train-") for i in heldout["id"])
    assert not normalised(heldout["question"]) & normalised(math500["question"])
    assert not set(heldout["id"]) & set(load_split(data)["id"])
    # On the Hub: the held-out split is hendrycks_math's train rows, in the recipe's config.
    hub = eval_data(load_recipe("math_qwen", ["data.config=algebra"]).config["data"], "heldout")
    assert (hub["source"], hub["config"]) == ("EleutherAI/hendrycks_math", "algebra")


def test_heldout_of_a_single_test_file_is_read_from_its_train_sibling(tmp_path):
    rows = [{"question": f"What is {i} plus 1?", "answer": i + 1} for i in range(40)]
    write_jsonl(tmp_path / "mine_train.jsonl", rows)
    write_jsonl(tmp_path / "mine_test.jsonl", rows[:3])
    data = {**SECTION, "task": "jsonl", "source": str(tmp_path / "mine_test.jsonl")}
    assert eval_data(data, "heldout")["source"] == str(tmp_path / "mine_train.jsonl")


def test_arithmetic_serves_its_own_heldout_split_and_trains_on_all_of_train():
    assert [name for name, task in TASKS.items() if task.native_heldout] == ["arithmetic"]
    data = {**SECTION, "task": "arithmetic", "source": "builtin:arithmetic"}
    heldout = load_split(eval_data(data, "heldout"), "heldout")
    assert heldout["id"] == [p["id"] for p in arithmetic.make_rows("heldout", arithmetic.SIZES["heldout"])]
    assert len(load_split(data)) == arithmetic.SIZES["train"]  # nothing carved out of it


def test_a_folders_own_heldout_file_is_the_heldout_split_and_train_is_read_whole(tmp_path, caplog):
    folder = tmp_path / "mine"
    write_jsonl(
        folder / "train.jsonl", [{"question": f"What is {i} plus 1?", "answer": i + 1} for i in range(40)]
    )
    held = [{"question": f"What is {i} plus 2?", "answer": i + 2} for i in range(6)]
    write_jsonl(folder / "heldout.jsonl", held)
    write_jsonl(folder / "test.jsonl", [{"question": "What is 7 plus 3?", "answer": 10}])
    data = {**SECTION, "task": "jsonl", "source": str(folder)}
    with caplog.at_level("INFO", logger="recipes.tasks.heldout"):
        assert load_split(eval_data(data, "heldout"), "heldout")["question"] == [r["question"] for r in held]
        assert len(load_split(data)) == 40  # nothing carved: 3 of these 40 would hash into a carved split
    assert "its own heldout files (6 questions); training on all 40 rows of its train split" in caplog.text
    assert sum(in_heldout(f"What is {i} plus 1?") for i in range(40)) == 3


def test_a_question_in_both_a_folders_heldout_and_train_files_is_refused(tmp_path):
    folder = tmp_path / "mine"
    write_jsonl(
        folder / "train.jsonl", [{"question": f"What is {i} plus 1?", "answer": i + 1} for i in range(9)]
    )
    write_jsonl(folder / "heldout.jsonl", [{"question": "What  is 3 plus\n1?", "answer": 4},
                                           {"question": "What is 30 plus 1?", "answer": 31}])  # fmt: skip
    data = {**SECTION, "task": "jsonl", "source": str(folder)}
    for split in ("heldout", "train"):
        with pytest.raises(
            DataError,
            match=r"1 of the 2 questions of its heldout files are also in its train split \(e.g. 'What is 3 plus "
            r"1\?'\); a held-out question must never be trained on. Remove them .* or remove the heldout files",
        ):
            load_split(data, split)


def test_a_source_too_small_to_hold_out_a_question_and_a_heldout_training_split_are_refused(tmp_path):
    rows = [{"question": f"What is {i} plus 1?", "answer": i + 1} for i in range(5)]  # none hash into it
    source = write_jsonl(tmp_path / "train.jsonl", rows)
    data = {**SECTION, "task": "jsonl", "source": str(source)}
    with pytest.raises(DataError, match=r"train.jsonl has no held-out questions: .* none of its 5 do. Add"):
        load_split(data, "heldout")
    with pytest.raises(
        DataError, match=r"data.split is 'heldout', but the jsonl task carves .* \(e.g. train\)"
    ):
        load_split({**data, "split": "heldout"}, "heldout")


def test_evaluate_split_heldout_grades_the_heldout_questions(tmp_path, tiny_model_dir):
    out = tmp_path / "heldout.jsonl"
    assert (
        evaluate_main(["gsm8k_tiny", "--split", "heldout", "--out", str(out), "--max-new-tokens", "4"]) == 0
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["split"] for r in records} == {"heldout"}
    assert sorted(r["id"] for r in records) == [
        "gsm8k-train-00015", "gsm8k-train-00047", "gsm8k-train-00049", "gsm8k-train-00072", "gsm8k-train-00080",
    ]  # fmt: skip


def test_the_heldout_split_is_read_from_the_training_split_unless_the_task_serves_its_own():
    data = {**SECTION, "split": "train_all"}
    assert source_split(TASKS["gsm8k"], data, "heldout") == "train_all"
    assert source_split(TASKS["arithmetic"], data, "heldout") == "heldout"
    assert (
        source_split(TASKS["gsm8k"], data, "test")
        == source_split(TASKS["arithmetic"], data, "test")
        == "test"
    )


def test_heldout_evaluation_on_the_training_split_is_refused_at_load():
    """Its accuracy would be on trained questions, which the log and the card call never trained on."""
    with pytest.raises(RecipeError, match=r"heldout.split=train in override .* is the training split"):
        load_recipe("gsm8k_tiny", ["heldout.split=train"])
    assert load_recipe("gsm8k_tiny", ["heldout.split=train", "heldout.enabled=false"])  # nothing evaluated
    with pytest.raises(
        RecipeError,
        match=r"heldout.split=test in override .* is the split evaluate.py compares models on",
    ):
        load_recipe("gsm8k_tiny", ["heldout.split=test"])
