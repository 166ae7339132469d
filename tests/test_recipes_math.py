r"""The MATH task: Hub configs (read through datasets from a local folder in the Hub layout), golds, ids, levels,
evaluation on a second source (data.eval_source), and math_tiny end to end.

python -m pytest tests/test_recipes_math.py -q
"""

from __future__ import annotations

import json
import logging

import pytest

from recipes.data import DataError, load_split
from recipes.evaluation.generation import EvaluationError
from recipes.evaluation.questions import eval_data
from recipes.recipe import RecipeError, load_recipe
from recipes.tasks.math import SUBJECTS

SECTION = {"task": "math", "config": None, "system_prompt": r"Put the answer in \boxed{}."}
TYPES = {"algebra": "Algebra", "counting_and_probability": "Counting & Probability", "geometry": "Geometry"}


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """The dropped-rows warning is said once per process: another test may have read the same file first."""
    monkeypatch.setattr("recipes.tasks.math._warned", set())


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def original(subject: str, i: int, level="Level 2", solution=None) -> dict:
    """A row in the original MATH format (EleutherAI/hendrycks_math)."""
    return {"problem": f"{subject} problem {i}?", "level": level, "type": TYPES[subject],
            "solution": solution or rf"Work. So $x = \boxed{{\frac{{{i}}}{{2}}}}$."}  # fmt: skip


def hub_folder(root, configs: dict[str, dict[str, list[dict]]]):
    """A dataset folder laid out as a Hub repository: README.md declares each config's data files."""
    card = ["---", "configs:"]
    for name, splits in configs.items():
        card += [f"- config_name: {name}", "  data_files:"]
        for split, rows in splits.items():
            write_jsonl(root / name / f"{split}.jsonl", rows)
            card += [f"  - split: {split}", f"    path: {name}/{split}.jsonl"]
    (root / "README.md").write_text("\n".join([*card, "---", "# A MATH-shaped dataset", ""]))
    return root


@pytest.fixture
def hendrycks(tmp_path):
    """Three of the seven subject configs, in the Hub's layout and the original row format."""
    return hub_folder(
        tmp_path / "hendrycks_math",
        {
            name: {"train": [original(name, i) for i in range(3)], "test": [original(name, 9)]}
            # The README lists them in another order than SUBJECTS: loading follows SUBJECTS.
            for name in ("geometry", "algebra", "counting_and_probability")
        },
    )


def test_hub_configs_load_all_subjects_when_config_is_null_and_one_when_named(hendrycks):
    rows = load_split({**SECTION, "source": str(hendrycks)}, split="train")
    assert rows["id"][:4] == [
        "math-train-algebra-0000", "math-train-algebra-0001", "math-train-algebra-0002",
        "math-train-counting_and_probability-0000",
    ]  # fmt: skip
    assert len(rows) == 9 and [rows["subject"][i] for i in (0, 3, 6)] == list(TYPES.values())
    assert rows["level"] == [2] * 9 and rows[1]["question"] == "algebra problem 1?"
    assert rows[1]["gold"] == r"\frac{1}{2}"  # the boxed body as written, not normalised
    one = load_split({**SECTION, "source": str(hendrycks), "config": "geometry"}, split="train")
    assert one["id"] == [f"math-train-geometry-{i:04d}" for i in range(3)]
    assert one["id"] == [i for i in rows["id"] if "geometry" in i]  # the same ids either way
    assert (
        load_split({**SECTION, "source": str(hendrycks)}, split="test")["id"][0] == "math-test-algebra-0000"
    )
    with pytest.raises(
        DataError, match=r"data.config 'geometri' is not a config of .*Did you mean geometry\?"
    ):
        load_split({**SECTION, "source": str(hendrycks), "config": "geometri"}, split="train")
    with pytest.raises(DataError, match=r"'main' is not a config .* or data.config: null for all subjects"):
        load_split({**SECTION, "source": str(hendrycks), "config": "main"}, split="train")


def test_subjects_are_the_hub_config_names():
    assert SUBJECTS == ("algebra", "counting_and_probability", "geometry", "intermediate_algebra",
                        "number_theory", "prealgebra", "precalculus")  # fmt: skip


def test_math500_shape_keeps_answer_subject_level_and_unique_id(tmp_path):
    row = {"problem": "Convert $(0,3)$ to polar coordinates.", "answer": r"\left( 3, \frac{\pi}{2} \right)",
           "solution": r"... so $\boxed{\left( 3, \frac{\pi}{2} \right)}.$ Also \boxed{wrong}",
           "subject": "Precalculus", "level": 2, "unique_id": "test/precalculus/807.json"}  # fmt: skip
    folder = hub_folder(
        tmp_path / "math500", {"default": {"test": [row, {**row, "unique_id": "test/x/1.json"}]}}
    )
    rows = load_split({**SECTION, "source": str(folder)}, split="test")
    assert rows["id"] == ["math-test/precalculus/807", "math-test/x/1"]
    assert rows[0]["gold"] == r"\left( 3, \frac{\pi}{2} \right)"  # the answer field wins over the last box
    assert (rows[0]["subject"], rows[0]["level"]) == ("Precalculus", 2)
    write_jsonl(tmp_path / "dup" / "test.jsonl", [row, row])
    with pytest.raises(DataError, match=r"id 'math-test/precalculus/807' repeats"):
        load_split({**SECTION, "source": str(tmp_path / "dup")}, split="test")


def test_gold_is_the_last_balanced_box_and_levels_parse(tmp_path):
    rows = [
        original(
            "algebra", 0, "Level 1", r"First \boxed{1}, then $\boxed{\dfrac{3}{4}}$ and \boxed{unclosed"
        ),
        original("algebra", 1, "Level ?", r"$\boxed{\{1, 2\}}$"),
        {**original("geometry", 0), "level": 5},
    ]
    loaded = load_split(
        {**SECTION, "source": str(write_jsonl(tmp_path / "train.jsonl", rows))}, split="train"
    )
    assert loaded["gold"] == [r"\dfrac{3}{4}", r"\{1, 2\}", r"\frac{0}{2}"]
    assert loaded["level"] == [1, None, 5]
    unreadable = write_jsonl(
        tmp_path / "na" / "train.jsonl", [original("algebra", 0, solution=r"So \boxed{N/A}.")]
    )
    with pytest.raises(
        DataError, match=r"train.jsonl line 1: 'solution': gold answer 'N/A' is not one number"
    ):
        load_split({**SECTION, "source": str(unreadable)}, split="train")  # the gold came from the solution
    bad = write_jsonl(tmp_path / "bad" / "train.jsonl", [original("algebra", 0, "hard")])
    with pytest.raises(DataError, match=r"train.jsonl line 1: level 'hard' is not 1-5"):
        load_split({**SECTION, "source": str(bad)}, split="train")
    other = write_jsonl(tmp_path / "qa" / "train.jsonl", [{"question": "q", "answer": "1"}])
    with pytest.raises(DataError, match="need a problem field .* use data.task: jsonl"):
        load_split({**SECTION, "source": str(other)}, split="train")


def test_a_row_without_gold_is_dropped_with_one_warning_and_many_are_refused(tmp_path, caplog):
    empty = r"so the answer is $\boxed{}$."
    rows = [original("algebra", i) for i in range(150)]  # a test split: training would hold some out
    rows[7] = original("algebra", 7, solution=empty)
    source = write_jsonl(tmp_path / "few" / "test.jsonl", rows)
    with caplog.at_level(logging.WARNING, logger="recipes.tasks.math"):
        loaded = load_split({**SECTION, "source": str(source)}, split="test")
        load_split({**SECTION, "source": str(source)}, split="test")  # read again: a run's held-out questions
    assert len(loaded) == 149 and "math-test-algebra-0007" not in loaded["id"]
    assert loaded["id"][7] == "math-test-algebra-0008"  # ids do not shift when a row is dropped
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert (
        len(warnings) == 1
        and "dropped 1 of 150 rows" in warnings[0]
        and "math-test-algebra-0007 (" in warnings[0]
        and "few/test.jsonl line 8)" in warnings[0]
    )
    rows[8] = original("algebra", 8, solution="No box at all.")  # 2 of 150 > 1%
    source = write_jsonl(tmp_path / "many" / "test.jsonl", rows)
    with pytest.raises(
        DataError, match=r"many/test.jsonl \(test\): 2 of 150 rows have no gold .* not look like MATH"
    ):
        load_split({**SECTION, "source": str(source)}, split="test")


def test_the_real_math_files(math_dir, caplog):
    with caplog.at_level(logging.WARNING, logger="recipes.tasks.math"):
        train = load_split({**SECTION, "source": str(math_dir / "train_sample.jsonl")}, split="train")
    assert "dropped 1 of 402 rows" in caplog.text  # the one empty \boxed{}
    assert len(train) == 376  # of the 401 with a gold, 25 are the held-out split
    assert len(set(train["id"])) == 376 and set(train["level"]) <= {1, 2, 3, 4, 5, None}
    test = load_split({**SECTION, "source": str(math_dir / "math500_test.jsonl")}, split="test")
    assert len(test) == 500 and len(set(test["id"])) == 500 and set(test["level"]) == {1, 2, 3, 4, 5}
    assert len(set(test["subject"])) == 7 and test["id"][0] == "math-test/precalculus/807"
    raw = [json.loads(line) for line in (math_dir / "math500_test.jsonl").read_text().splitlines()]
    assert test["gold"] == [r["answer"] for r in raw]


def test_bundled_samples_cover_subjects_and_levels():
    recipe = load_recipe("math_tiny")
    train = load_split({**recipe.config["data"], "max_prompt_tokens": None}, split="train")
    test = load_split(eval_data(recipe.config["data"], "test"), split="test")
    assert (len(train), len(test)) == (90, 50)  # 10 of the 100 train rows are the held-out split
    for rows in (train, test):
        assert len(set(rows["subject"])) == 7 and set(rows["level"]) == {1, 2, 3, 4, 5}


def test_eval_source_is_where_evaluation_reads(tmp_path):
    data = load_recipe("math_qwen_math", ["data.config=algebra"]).config["data"]
    assert data["eval_source"] == "HuggingFaceH4/MATH-500"
    evaluated = eval_data(data, "test")
    assert (evaluated["source"], evaluated["config"]) == (
        "HuggingFaceH4/MATH-500",
        None,
    )  # config is the train's
    assert eval_data({**data, "eval_source": None}, "test")["source"] == "EleutherAI/hendrycks_math"
    train_file = write_jsonl(tmp_path / "mine_train.jsonl", [original("algebra", 0)])
    with pytest.raises(
        EvaluationError, match=r"data.eval_source .*mine_train.jsonl is the train split's file"
    ):
        eval_data({**data, "eval_source": str(train_file)}, "test")
    with pytest.raises(RecipeError, match=r"Unknown key data.eval_sourc .*Did you mean data.eval_source\?"):
        load_recipe("math_tiny", ["data.eval_sourc=x"])


def test_evaluation_records_carry_subject_and_level(tmp_path, tiny_model_dir):
    from recipes.evaluate import main as evaluate_main

    out = tmp_path / "base.jsonl"
    argv = ["math_tiny", "--out", str(out), "--questions", "6", "--max-new-tokens", "8"]
    assert evaluate_main(argv) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    rows = {
        r["id"]: r for r in load_split(eval_data(load_recipe("math_tiny").config["data"], "test"), "test")
    }
    assert len(records) == 6 and all(r["id"].startswith("math-test/") for r in records)
    for record in records:
        row = rows[record["id"]]
        assert (record["subject"], record["level"], record["gold"]) == (
            row["subject"],
            row["level"],
            row["gold"],
        )
        assert record["source"] == "samples/math500_test_sample.jsonl"


@pytest.mark.slow
def test_math_tiny_trains_and_saves_an_adapter(tmp_path):
    from recipes.run import main as run_main

    out = tmp_path / "run"
    argv = ["math_tiny", f"trainer.output_dir={out}", "trainer.max_steps=2", "checkpoint.every_steps=2"]
    assert run_main(argv) == 0
    assert (out / "adapter_model.safetensors").is_file() and (out / "checkpoint-2").is_dir()
    assert "task: math" in (out / "recipe.yaml").read_text()
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    first = next(e for e in history if "loss" in e)  # the step-0 held-out entry comes before it
    assert "rewards/format/mean" in first and "rewards/correctness/mean" in first


def test_math_qwen_math_budgets_fit_the_models_4096_token_context():
    from recipes.checks import check_environment
    from recipes.planner.shapes import config_for

    shape = config_for("Qwen/Qwen2.5-Math-1.5B")
    check_environment(load_recipe("math_qwen_math"), shape, cuda_available=True)  # 1,024 + 3,072 = 4,096
    with pytest.raises(RecipeError, match=r"= 4097 tokens, but Qwen/Qwen2.5-Math-1.5B holds at most 4096"):
        check_environment(load_recipe("math_qwen_math", ["data.max_prompt_tokens=1025"]), shape, True)


def test_evaluate_then_compare_reports_by_subject_and_level(tmp_path, tiny_model_dir, capsys):
    """MATH records from evaluate.py carry what stats.compare needs for its per-subject and per-level rows."""
    from recipes.evaluate import main as evaluate_main
    from stats.compare import main as compare_main

    base = tmp_path / "base.jsonl"
    argv = ["math_tiny", "--out", str(base), "--questions", "10", "--samples", "2", "--max-new-tokens", "8"]
    assert evaluate_main(argv) == 0
    capsys.readouterr()  # evaluate's own summary
    records = [json.loads(line) for line in base.read_text().splitlines()]
    # The "tuned" model: the same records, answering every question of one subject correctly.
    subject = records[0]["subject"]
    tuned = tmp_path / "tuned.jsonl"
    tuned.write_text(
        "".join(json.dumps({**r, "correct": r["correct"] or r["subject"] == subject}) + "\n" for r in records)
    )
    assert compare_main([str(base), str(tuned), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    by_subject = {g["value"]: g for g in report["groups"]["subject"]}
    assert set(by_subject) == {r["subject"] for r in records}
    for value, group in by_subject.items():
        ids = {r["id"] for r in records if r["subject"] == value}
        base_accuracy = sum(r["correct"] for r in records if r["id"] in ids) / len(
            [r for r in records if r["id"] in ids]
        )
        assert group["questions"] == len(ids)
        assert group["difference"]["estimate"] == pytest.approx(
            (1.0 if value == subject else base_accuracy) - base_accuracy
        )
    assert {g["value"] for g in report["groups"]["level"]} == {r["level"] for r in records}


def test_levels_are_whole_numbers_1_to_5_or_level_text_and_nothing_else():
    from recipes.tasks.math import parse_level

    assert [parse_level(v) for v in (1, 5, None, "Level 3", " level 4 ", "Level ?")] == [
        1,
        5,
        None,
        3,
        4,
        None,
    ]
    for bad in (0, 6, True, 2.0, "Level 6", "3rd"):  # True == 1 in Python, but it is no level
        with pytest.raises(DataError, match="is not 1-5 or 'Level N'"):
            parse_level(bad)


def test_exactly_one_percent_of_rows_without_gold_is_still_a_quirk(tmp_path, caplog):
    rows = [original("algebra", i) for i in range(100)]
    rows[3] = original("algebra", 3, solution="No box at all.")  # 1 of 100: at MAX_DROPPED_SHARE, not over
    source = write_jsonl(tmp_path / "test.jsonl", rows)
    with caplog.at_level(logging.WARNING, logger="recipes.tasks.math"):
        assert len(load_split({**SECTION, "source": str(source)}, split="test")) == 99
    assert "dropped 1 of 100 rows" in caplog.text


def test_a_hub_source_whose_configs_are_not_math_subjects_must_name_one(tmp_path):
    rows = [original("algebra", i) for i in range(2)]
    folder = hub_folder(tmp_path / "other", {"easy": {"test": rows}, "hard": {"test": rows}})
    with pytest.raises(
        DataError, match=r"has configs easy, hard and none is a MATH subject; name one with data"
    ):
        load_split({**SECTION, "source": str(folder)}, split="test")
    assert len(load_split({**SECTION, "source": str(folder), "config": "hard"}, split="test")) == 2
