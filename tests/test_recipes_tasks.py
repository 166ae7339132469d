"""Tasks as a seam: the recipe names the task; GSM8K, generated arithmetic and a user's own JSONL load alike."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys

import pytest

from recipes.data import DataError, load_split
from recipes.recipe import RecipeError, load_recipe
from recipes.tasks import TASKS, get_task
from recipes.tasks.arithmetic import SIZES, make_rows, split_of, write_split, write_splits

SECTION = {"system_prompt": "Be brief.", "source": "unused", "config": None}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_user_jsonl_task_keeps_ids_and_takes_the_answer_column_as_gold(tmp_path):
    rows = [
        {"question": f"Capital of country {i}?", "answer": f"City {i}", "id": f"geo-{i}"} for i in range(3)
    ]
    write_jsonl(tmp_path / "train.jsonl", rows)
    write_jsonl(tmp_path / "test.jsonl", [{"question": "2+2?", "answer": 4}])
    train = load_split({**SECTION, "task": "jsonl", "source": str(tmp_path)}, split="train")
    assert train["id"] == ["geo-0", "geo-1", "geo-2"] and train["gold"] == ["City 0", "City 1", "City 2"]
    assert train[0]["prompt"][1] == {"role": "user", "content": "Capital of country 0?"}
    test = load_split({**SECTION, "task": "jsonl", "source": str(tmp_path / "test.jsonl")}, split="test")
    assert test["id"] == ["test-test-00000"] and test["gold"] == ["4"]


def test_user_jsonl_errors_name_the_file_line_and_fix(tmp_path):
    bad = write_jsonl(
        tmp_path / "train.jsonl", [{"question": "q", "answer": "1"}, {"question": "q2", "answer": " "}]
    )
    with pytest.raises(DataError, match=r"train.jsonl line 2: the 'answer' field is empty"):
        load_split({**SECTION, "task": "jsonl", "source": str(bad)}, split="train")
    other = write_jsonl(tmp_path / "other.jsonl", [{"prompt": "q", "label": "1"}])
    with pytest.raises(
        DataError,
        match=r"Found: prompt, label\. Did you mean to name them label -> answer, prompt -> question\?$",
    ):
        load_split({**SECTION, "task": "jsonl", "source": str(other)}, split="train")
    # Before: "solution -> question", spelt alike, which would train on the worked solutions as the questions.
    math_like = write_jsonl(tmp_path / "math.jsonl", [{"problem": "q", "solution": "s", "answer": "1"}])
    with pytest.raises(
        DataError,
        match=r"Found: problem, solution, answer\. Did you mean to name them problem -> question\? Or, for "
        r"MATH-style rows .* set data.task=math, which reads them as they are\.$",
    ):
        load_split({**SECTION, "task": "jsonl", "source": str(math_like)}, split="train")
    typo = write_jsonl(tmp_path / "typo.jsonl", [{"question": "q", "anwser": "1"}])
    with pytest.raises(
        DataError, match=r"Found: question, anwser\. Did you mean to name them anwser -> answer\?"
    ):
        load_split({**SECTION, "task": "jsonl", "source": str(typo)}, split="train")


def test_a_mixed_number_answer_is_refused_with_its_improper_fraction(tmp_path):
    """ "3 1/2" loaded as a LaTeX answer that math-verify reads as 3 x 1/2: a completion saying 7/2 or 3.5 was graded
    wrong at every step."""
    data = write_jsonl(
        tmp_path / "train.jsonl", [{"question": "q", "answer": "7/2"}, {"question": "q2", "answer": "-3 1/2"}]
    )
    with pytest.raises(DataError) as raised:
        load_split({**SECTION, "task": "jsonl", "source": str(data)}, split="train")
    assert str(raised.value) == (
        f"{data} line 2: 'answer': gold answer '-3 1/2' is a mixed number, which math-verify reads as a product "
        "(-3 x 1/2); write it as an improper fraction or a decimal: -7/2."
    )


def test_an_answer_the_grader_cannot_read_stops_the_load_naming_its_line(tmp_path):
    """Checked while loading: before, "forty-two" passed and crashed training at the batch that drew it."""
    folder = tmp_path / "task"
    folder.mkdir()
    lines = [json.dumps({"question": f"q{i}", "answer": str(i)}) for i in range(5)]
    lines[3] = json.dumps({"question": "q3", "answer": "forty-two"})
    (folder / "train.jsonl").write_text(
        "\n".join(lines[:2] + ["", ""] + lines[2:]) + "\n"
    )  # blank lines: not rows
    with pytest.raises(DataError) as raised:
        load_split({**SECTION, "task": "jsonl", "source": str(folder)}, split="train")
    assert str(raised.value).startswith(
        f"{folder / 'train.jsonl'} line 6: 'answer': gold answer 'forty-two' is not one number or expression"
    )
    write_jsonl(folder / "train.jsonl", [{"question": "q", "answer": "1"}, {"question": "q2"}])
    with pytest.raises(DataError, match=r"train.jsonl line 2: no 'answer' field; every row needs one\."):
        load_split({**SECTION, "task": "jsonl", "source": str(folder)}, split="train")
    dup = write_jsonl(
        tmp_path / "dup.jsonl", [{"question": f"q{i}", "answer": "1", "id": i % 2} for i in range(3)]
    )
    with pytest.raises(
        DataError, match=r"dup.jsonl line 3: id '0' again, first at \S+dup.jsonl line 1; ids must"
    ):
        load_split({**SECTION, "task": "jsonl", "source": str(dup)}, split="train")


def test_unknown_task_is_refused_at_load_with_a_suggestion():
    with pytest.raises(
        RecipeError,
        match=r"data.task .* must be one of gsm8k, arithmetic, jsonl, math, got 'arithmetc'. "
        r"Did you mean arithmetic\?",
    ):
        load_recipe("gsm8k_tiny", ["data.task=arithmetc"])
    with pytest.raises(DataError, match=r"Unknown data.task 'gsm8'. Did you mean gsm8k\? Available: gsm8k, "):
        get_task("gsm8")


def test_arithmetic_splits_never_overlap_and_ids_are_stable():
    splits = {split: load_split({**SECTION, "task": "arithmetic"}, split=split) for split in SIZES}
    assert {s: len(rows) for s, rows in splits.items()} == SIZES
    questions = {s: set(rows["question"]) for s, rows in splits.items()}
    assert not questions["train"] & questions["test"] and not questions["train"] & questions["heldout"]
    assert not questions["heldout"] & questions["test"]
    assert all(split_of(q) == s for s, qs in questions.items() for q in qs)
    again = load_split({**SECTION, "task": "arithmetic"}, split="test")
    assert again["id"] == splits["test"]["id"] and len(set(again["id"])) == SIZES["test"]
    first = splits["test"][0]
    assert first["solution"].endswith(f"#### {first['gold']}") and first["gold"].isdigit()
    with pytest.raises(DataError, match="has splits train, heldout, test; got 'validation'"):
        load_split({**SECTION, "task": "arithmetic"}, split="validation")


def test_every_task_is_documented_in_the_readme():
    from conftest import REPO

    readme = (REPO / "README.md").read_text()
    assert all(f"`{name}`" in readme for name in TASKS)


@pytest.mark.slow
def test_a_user_task_from_jsonl_trains_and_evaluates_end_to_end(tmp_path):
    from recipes.evaluate import main as evaluate_main
    from recipes.run import main as run_main

    data = tmp_path / "my_task"
    data.mkdir()
    write_jsonl(
        data / "train.jsonl", [{"question": f"What is {i} plus 1?", "answer": i + 1} for i in range(12)]
    )
    write_jsonl(
        data / "test.jsonl",
        [{"question": f"What is {i} plus 2?", "answer": i + 2, "id": f"t{i}"} for i in range(4)],
    )
    out = tmp_path / "run"
    task = ["data.task=jsonl", f"data.source={data}"]
    assert (
        run_main(
            [
                "gsm8k_tiny",
                *task,
                f"trainer.output_dir={out}",
                "trainer.max_steps=2",
                "checkpoint.every_steps=2",
                "heldout.enabled=false",  # 12 training rows: a 5% carve holds out no question
            ]
        )
        == 0
    )
    assert (out / "adapter_model.safetensors").is_file()
    assert "task: jsonl" in (out / "recipe.yaml").read_text()
    records = tmp_path / "tuned.jsonl"
    argv = ["gsm8k_tiny", *task, "--adapter", str(out), "--out", str(records), "--max-new-tokens", "8"]
    assert evaluate_main(argv) == 0
    loaded = [json.loads(line) for line in records.read_text().splitlines()]
    assert sorted(r["id"] for r in loaded) == ["t0", "t1", "t2", "t3"]
    assert {r["gold"] for r in loaded} == {"2", "3", "4", "5"}


def test_a_single_file_is_the_training_data_and_is_never_evaluated_as_another_split(tmp_path):
    from recipes.evaluation.generation import EvaluationError
    from recipes.evaluation.questions import eval_data

    mine = write_jsonl(
        tmp_path / "mine.jsonl", [{"question": f"What is {i} plus 1?", "answer": i + 1} for i in range(60)]
    )
    data = load_recipe("gsm8k_tiny", ["data.task=jsonl", f"data.source={mine}"]).config["data"]
    with pytest.raises(
        EvaluationError, match="--split test would score the questions the model trained on"
    ) as e:
        eval_data(data, "test")
    assert "data.eval_source=<a test .jsonl/.parquet file>, or --split heldout" in str(e.value)
    assert eval_data(data, "train")["source"] == str(mine)  # the training questions, asked for by name
    assert eval_data(data, "heldout")["source"] == str(
        mine
    )  # the questions carved from it, left out of training
    test = write_jsonl(tmp_path / "exam.jsonl", [{"question": "2+2?", "answer": 4}])
    assert eval_data({**data, "eval_source": str(test)}, "test")["source"] == str(test)


@pytest.mark.parametrize(("busy_percent", "threads"), [(0.0, 2), (20.0, 2), (30.0, 1), (60.0, 1), (100.0, 1)])
def test_the_warm_start_takes_a_second_thread_only_when_two_cores_are_idle(
    monkeypatch, busy_percent, threads
):
    import psutil

    from recipes.builtin.tiny_arith import warm_start_threads

    monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: 2)
    monkeypatch.setattr(psutil, "cpu_percent", lambda interval=None: busy_percent)
    assert warm_start_threads() == threads


def test_a_built_in_model_says_what_it_builds_once_then_reuses_it(tmp_path, monkeypatch, caplog):
    import logging
    from pathlib import Path

    from recipes.builtin import resolve_builtin

    monkeypatch.setenv("GRPO_RECIPES_CACHE", str(tmp_path))
    with caplog.at_level(logging.INFO, logger="recipes.builtin"):
        first = resolve_builtin("builtin:tiny-llama")
        assert resolve_builtin("builtin:tiny-llama") == first and Path(first).parent == tmp_path
    assert (
        caplog.text.count("Building builtin:tiny-llama once (a BPE tokenizer and a random 2-layer Llama") == 1
    )
    assert caplog.text.count("Built builtin:tiny-llama in") == 1


def test_a_wrong_path_or_a_csv_file_says_what_is_there(tmp_path):
    folder = tmp_path / "my_task"
    folder.mkdir()
    (folder / "train.csv").write_text("question,answer\nq,1\n")
    with pytest.raises(
        DataError,
        match=r"No train split in .*my_task: .* Found train.csv: convert it to JSON Lines, e.g. python -c ",
    ):
        load_split({**SECTION, "task": "jsonl", "source": str(folder)}, split="train")
    typo = tmp_path / "mytsak"
    (tmp_path / "mytsak.yaml").write_text("base: gsm8k_tiny\n")  # a recipe is no data, whatever its name
    with pytest.raises(DataError, match=rf"'{typo}': no such file or folder\. Did you mean {folder}\?$"):
        load_split({**SECTION, "task": "jsonl", "source": str(typo)}, split="train")
    with pytest.raises(DataError, match=r"no such file or folder \(.*nowhere does not exist either\)"):
        load_split(
            {**SECTION, "task": "jsonl", "source": str(tmp_path / "nowhere" / "t.jsonl")}, split="train"
        )


def test_a_bad_parquet_row_is_named_by_its_file_and_row(tmp_path):
    from datasets import Dataset

    folder = tmp_path / "task"
    folder.mkdir()
    Dataset.from_list([{"question": "a", "answer": "1"}] * 3).to_parquet(
        folder / "train-00000-of-00002.parquet"
    )
    Dataset.from_list([{"question": "b", "answer": "2"}, {"question": "c", "answer": "N/A"}]).to_parquet(
        folder / "train-00001-of-00002.parquet"
    )
    with pytest.raises(DataError, match=r"train-00001-of-00002.parquet row 2: 'answer': gold answer 'N/A'"):
        load_split({**SECTION, "task": "jsonl", "source": str(folder)}, split="train")


def _solve(question: str) -> tuple[int, list[str]]:
    """The answer of a generated question worked out from its words alone, and the operators it uses."""
    first, *operations, _ = re.split(r"(?<=\.) ", question)
    value = int(re.search(r" has (\d+) ", first).group(1))
    ops = []
    for sentence in operations:
        k = int(re.search(r"\d+", sentence).group())
        op = "+" if sentence.endswith(" more.") else "-"
        value = value + k if op == "+" else value - k
        ops.append(op)
    return value, ops


def test_arithmetic_problems_are_small_correct_and_worked_out_line_by_line():
    rows = make_rows("test", 300)
    op_counts, starts, operands, ops_seen = set(), set(), set(), []
    for row in rows:
        gold, ops = _solve(row["question"])
        *lines, final = row["answer"].split("\n")
        assert final == f"#### {gold}" and gold >= 0
        assert len(lines) == len(ops) in (1, 2)
        op_counts.add(len(ops))
        value = int(row["question"].split(" has ")[1].split()[0])
        starts.add(value)
        for line, op in zip(lines, ops):
            a, sign, b, equals, c = line.split()
            assert (int(a), sign, equals) == (value, op, "=")
            operands.add(int(b))
            value = int(a) + int(b) if op == "+" else int(a) - int(b)
            assert int(c) == value >= 0  # never a negative count of apples
        assert row["id"] == "arith-" + hashlib.sha256(row["question"].encode()).hexdigest()[:12]
        ops_seen += ops
    # Whole numbers 1..10 to start from and to add or take away; both operations about equally often.
    assert op_counts == {1, 2} and starts == operands == set(range(1, 11))
    assert 1 / 3 < ops_seen.count("+") / len(ops_seen) < 2 / 3


def test_arithmetic_splits_take_80_10_10_percent_of_the_question_hashes():
    # The module docstring's rule, computed here: the question's SHA-256 as a number, modulo 100.
    buckets = {"train": range(80), "heldout": range(80, 90), "test": range(90, 100)}
    for split, share in buckets.items():
        for row in make_rows(split, 50):
            assert int(hashlib.sha256(row["question"].encode()).hexdigest(), 16) % 100 in share


def test_arithmetic_rows_are_one_seeded_stream_and_write_splits_writes_them(tmp_path):
    assert make_rows("train", 5) == make_rows("train", 12)[:5]  # a larger size only draws further
    assert make_rows("train", 5, seed=1) != make_rows("train", 5)
    with pytest.raises(ValueError, match="split must be one of train, heldout, test, got 'dev'"):
        make_rows("dev", 5)
    folder = tmp_path / "new" / "arith"  # parents are made
    assert write_splits(folder, train=4, heldout=2, test=3, seed=1) == folder
    assert sorted(p.name for p in folder.iterdir()) == ["heldout.jsonl", "test.jsonl", "train.jsonl"]
    for split, n in (("train", 4), ("heldout", 2), ("test", 3)):
        written = [json.loads(line) for line in (folder / f"{split}.jsonl").read_text().splitlines()]
        assert written == make_rows(split, n, seed=1)
    assert (
        write_split(folder, "test", 2) == folder / "test.jsonl"
    )  # the file it wrote, with seed 0 by default
    assert [json.loads(line) for line in (folder / "test.jsonl").read_text().splitlines()] == make_rows(
        "test", 2
    )


def test_the_arithmetic_command_writes_the_problems_a_recipe_reads(tmp_path):
    """python -m recipes.tasks.arithmetic DIR: the built-in task's splits as files, e.g. to train elsewhere."""
    from conftest import REPO

    folder = tmp_path / "arith"
    proc = subprocess.run(
        [sys.executable, "-m", "recipes.tasks.arithmetic", str(folder)],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and proc.stdout == f"{folder}\n"
    for split, n in SIZES.items():
        written = [json.loads(line) for line in (folder / f"{split}.jsonl").read_text().splitlines()]
        assert written == make_rows(split, n)
