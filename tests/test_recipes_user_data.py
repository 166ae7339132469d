"""A user's own data files: what would pass silently and change results is refused, naming the file and line."""

from __future__ import annotations

import json
import logging

import pytest

from recipes.data import DataError, load_split

SECTION = {"system_prompt": "Be brief.", "config": None}


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def load(source, task="jsonl", split="train"):
    return load_split({**SECTION, "task": task, "source": str(source)}, split=split)


def rows(n, **extra):
    return [{"question": f"What is {i} + 1?", "answer": i + 1, **extra} for i in range(n)]


def test_integer_ids_are_text_and_a_row_without_one_is_named(tmp_path):
    """Integer ids stayed integers, and the evaluation records they made were refused only at stats.compare."""
    file = write_jsonl(tmp_path / "train.jsonl", [{**r, "id": i} for i, r in enumerate(rows(3))])
    assert load(file)["id"] == ["0", "1", "2"]
    partial = [{**r, "id": f"q{i}"} for i, r in enumerate(rows(3))]
    del partial[1]["id"]
    write_jsonl(file, partial)  # was "the id column repeats ids": the missing ones became "None"
    with pytest.raises(DataError, match=r"train.jsonl line 2: no 'id' field, though other rows have an id"):
        load(file)
    partial[1]["id"] = None  # was "no 'id' field", though the line has one, written as null
    write_jsonl(file, partial)
    with pytest.raises(
        DataError, match=r"train.jsonl line 2: the 'id' field is null, though other rows have an id"
    ):
        load(file)


@pytest.mark.parametrize(
    ("question", "found"),
    [
        (None, "the 'question' field is null"),  # was "is missing", though the line has it, as null
        ("  ", "the 'question' field is blank"),
        (7, "the 'question' field is 7"),
        ({"Question": "q2?"}, r"no 'question' field \(it has 'Question': rename it to 'question'\)"),
        ({}, "no 'question' field"),
    ],
)
@pytest.mark.parametrize("task", ["jsonl", "gsm8k"])
def test_a_row_without_a_question_is_named(tmp_path, question, found, task):
    """A null question crashed with AttributeError in the held-out hash; a blank one trained on nothing."""
    data = [{"question": f"q{i}?", "answer": f"#### {i}"} for i in range(4)]
    if isinstance(question, dict):  # the key left out, and the row's own keys instead
        del data[2]["question"]
        data[2].update(question)
    else:
        data[2]["question"] = question
    file = write_jsonl(tmp_path / "train.jsonl", data)
    with pytest.raises(DataError, match=rf"train.jsonl line 3: {found}; every row"):
        load(file, task)


@pytest.mark.parametrize("indent", [None, 2])
def test_a_json_array_file_is_named_as_one_with_the_conversion(tmp_path, indent):
    """Before: "line 1 is not a JSON object with named fields", or pretty-printed, "line 1 is not valid JSON"."""
    file = tmp_path / "train.json"
    file.write_text(json.dumps(rows(3), indent=indent))
    with pytest.raises(
        DataError, match=r"train.json holds a JSON array .*JSON Lines.*to_json\('train.jsonl'"
    ):
        load(file)


def test_text_that_is_not_utf8_is_named_and_a_bom_is_read(tmp_path):
    file = tmp_path / "train.jsonl"
    file.write_bytes('{"question": "Caf\u00e9 bill: 2 + 2?", "answer": 4}\n'.encode("latin-1") * 2)
    with pytest.raises(
        DataError, match=r"train.jsonl line 1 is not UTF-8 text \(.*\): save the file as UTF-8"
    ):
        load(file)
    file.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(r) + "\n" for r in rows(3)).encode())
    assert load(file)["gold"] == ["1", "2", "3"]


def test_answers_that_reading_would_change_are_refused(tmp_path):
    """2**70 became 1.1805916207174113e+21 (every such gold alike), and true became the gold 'True'."""
    file = write_jsonl(tmp_path / "train.jsonl", [*rows(2), {"question": "2**70?", "answer": 2**70}])
    with pytest.raises(
        DataError, match=rf"line 3: 'answer' is the number {2**70}, which .* \"answer\": \"{2**70}\""
    ):
        load(file)
    # Integers alone are read as int64, exactly; beside a float they become floats and lose digits.
    exact = [*rows(2), {"question": "2**60?", "answer": 2**60}]
    write_jsonl(file, exact)
    assert load(file)["gold"][2:] == [str(2**60)]
    write_jsonl(file, [{"question": "big?", "answer": "1" * 30}, {"question": "small?", "answer": "007"}])
    assert load(file)["gold"] == ["1" * 30, "007"]
    write_jsonl(file, [*exact[:3], {"question": "half?", "answer": 0.5}])
    with pytest.raises(
        DataError, match=rf"line 3: 'answer' is the number {2**60}, which this file's 'answer' col"
    ):
        load(file)
    for bad in (True, [1, 2], {"value": 5}):
        write_jsonl(file, [*rows(2), {"question": "odd?", "answer": bad}])
        with pytest.raises(
            DataError, match=r"line 3: the 'answer' field is (bool|list|dict) .*; a gold answer"
        ):
            load(file)


def test_several_files_of_one_split_are_refused_but_shards_are_one_file(tmp_path):
    """train_backup.jsonl and old/train.jsonl were read with train.jsonl: 170 rows, 118 questions."""
    write_jsonl(tmp_path / "train.jsonl", rows(4))
    write_jsonl(tmp_path / "train_backup.jsonl", rows(2))
    write_jsonl(tmp_path / "old" / "train.jsonl", rows(2))
    with pytest.raises(
        DataError, match=r"3 files hold a train split \(old/train.jsonl, train.jsonl, train_b"
    ):
        load(tmp_path)
    shards = tmp_path / "shards"
    write_jsonl(shards / "train-00000-of-00002.jsonl", rows(4)[:2])
    write_jsonl(shards / "train-00001-of-00002.jsonl", rows(4)[2:])
    assert load(shards)["gold"] == ["1", "2", "3", "4"]
    hashed = tmp_path / "hashed"  # push_to_hub's older names end in the data's fingerprint
    write_jsonl(hashed / "train-00000-of-00002-1a2b3c4d.jsonl", rows(4)[:2])
    write_jsonl(hashed / "train-00001-of-00002-1a2b3c4d.jsonl", rows(4)[2:])
    assert load(hashed)["gold"] == ["1", "2", "3", "4"]


def test_a_question_twice_is_refused_naming_both_lines(tmp_path):
    """The same question with golds 115 and 999 loaded silently: one of the two always graded wrong."""
    data = rows(5)
    data[4] = {"question": "What  is 1 + 1?", "answer": 999}  # line 2's question, other spacing
    file = write_jsonl(tmp_path / "test.jsonl", data)
    with pytest.raises(DataError, match=r"test.jsonl line 5: the same question as .*test.jsonl line 2"):
        load(file, split="test")


@pytest.mark.parametrize(
    "readme",
    [
        "# My questions\n\nconfigs: none here\n",  # no YAML header at all
        "---\nlicense: mit\n---\n# My questions\n",  # a header without configs
        "---\nconfigs: default\n---\n",  # configs, but not the Hub's list of them
        "---\nconfigs: [\n---\n",  # a header that is not YAML
    ],
    ids=["no-header", "no-configs", "configs-not-a-list", "bad-yaml"],
)
def test_a_readme_without_a_hub_configs_header_leaves_the_folder_read_as_split_files(tmp_path, readme):
    """Only a Hub dataset card (a YAML header with a configs: list) makes datasets read the folder its way."""
    from recipes.tasks.sources import config_names, has_split_files, hub_layout

    write_jsonl(tmp_path / "train.jsonl", rows(3))
    (tmp_path / "README.md").write_text(readme)
    assert not hub_layout(tmp_path) and config_names(str(tmp_path)) is None
    assert has_split_files(str(tmp_path), "train") and not has_split_files(str(tmp_path), "test")
    assert load(tmp_path)["gold"] == ["1", "2", "3"]


def test_the_largest_numbers_read_exactly_pass_and_one_more_is_refused(tmp_path):
    """A float64 holds every integer up to 2**53 exactly, an int64 up to 2**63 - 1: those bounds are allowed."""
    file = tmp_path / "train.jsonl"
    cases = [
        ([0.5, 2**53], str(2**53)),  # beside a float, read as a float: 2**53 keeps its digits
        ([0.5, -(2**53)], str(-(2**53))),
        ([0.5, 5], "5"),  # read as 5.0, written as the grader reads it
        ([1, 2**63 - 1], str(2**63 - 1)),  # integers alone: int64
    ]
    for answers, gold in cases:
        write_jsonl(file, [{"question": f"q{i}?", "answer": a} for i, a in enumerate(answers)])
        assert load(file)["gold"][-1] == gold
    for answers in ([0.5, 2**53 + 1], [0.5, -(2**53) - 1], [1, 2**63]):
        write_jsonl(file, [{"question": f"q{i}?", "answer": a} for i, a in enumerate(answers)])
        with pytest.raises(DataError, match=rf"line 2: 'answer' is the number {answers[1]}, which"):
            load(file)


def test_a_bad_row_in_a_later_jsonl_shard_is_named_by_that_file_and_line(tmp_path):
    """Rows run through the shards in order; blank lines are not rows, but they count in line numbers."""
    texts = [{**r, "answer": str(r["answer"])} for r in rows(6)]  # one type per column, as datasets needs
    first = tmp_path / "train-00000-of-00002.jsonl"
    first.write_text("\n".join(json.dumps(r) for r in texts[:3]) + "\n\n\n")
    second = texts[3:]
    second[1]["answer"] = "forty-two"
    (tmp_path / "train-00001-of-00002.jsonl").write_text(
        "\n" + "\n\n".join(json.dumps(r) for r in second) + "\n"
    )  # lines 2, 4 and 6 hold its rows: the bad one is line 4
    with pytest.raises(
        DataError, match=r"train-00001-of-00002.jsonl line 4: 'answer': gold answer 'forty-two'"
    ):
        load(tmp_path)


def test_a_solution_column_is_kept_and_without_one_the_solution_is_the_answer(tmp_path):
    worked = [{**r, "solution": f"Add one: {r['answer']}."} for r in rows(3)]
    file = write_jsonl(tmp_path / "test.jsonl", worked)
    assert load(file, split="test")["solution"] == ["Add one: 1.", "Add one: 2.", "Add one: 3."]
    write_jsonl(file, [{"question": "Half of 3?", "answer": " 3/2 "}])
    assert load(file, split="test")["solution"] == ["3/2"]


def test_ids_made_for_a_folder_given_as_dot_fall_back_to_the_task_name(tmp_path, monkeypatch):
    """A source without a file stem (the current folder, ".") still makes ids with a readable prefix."""
    write_jsonl(tmp_path / "test.jsonl", rows(2))
    monkeypatch.chdir(tmp_path)
    assert load(".", split="test")["id"] == ["jsonl-test-00000", "jsonl-test-00001"]


def test_a_one_line_array_of_rows_is_named_as_a_json_array_and_other_arrays_as_lines(tmp_path):
    """The JSON-array message names a file of rows; a line that is an array of something else is not one."""
    from recipes.tasks.jsonl_check import _opens_rows_array

    assert _opens_rows_array('[{"question": "q", "answer": "1"}]\n') and _opens_rows_array("[\n")
    assert _opens_rows_array('[{"question": "q",\n')  # a pretty-printed array goes on past its first line
    assert not _opens_rows_array('["q", "a"]\n') and not _opens_rows_array("[]\n")
    assert not _opens_rows_array('{"question": "q"}\n')


def test_a_csv_file_is_answered_with_its_conversion(tmp_path):
    """Named as data.source, a CSV file was "expected .jsonl or .parquet files (one kind), got ['train.csv']";
    saved as .jsonl, its header line was "line 1 is not valid JSON" alone."""
    csv = tmp_path / "train.csv"
    csv.write_text("question,answer\nq,1\n")
    convert = r"p.read_csv\('train.csv', dtype=str\).to_json\('train.jsonl', orient='records', lines=True\)"
    with pytest.raises(
        DataError, match=rf"train.csv is not a .jsonl or .parquet file: .*{convert}.*then set data"
    ):
        load(csv)
    csv.rename(tmp_path / "train.jsonl")
    with pytest.raises(
        DataError, match=rf"line 1 is not valid JSON .*'question,answer'; it looks like CSV: .*{convert}"
    ):
        load(tmp_path)


def test_a_missing_eval_source_is_named_before_training_and_by_its_key(tmp_path):
    """A typo in data.eval_source trained without a word, and evaluate.py then called it data.source."""
    from recipes.evaluation.generation import EvaluationError
    from recipes.evaluation.questions import eval_data

    write_jsonl(tmp_path / "train.jsonl", rows(3))
    write_jsonl(tmp_path / "test.jsonl", rows(2))
    data = {**SECTION, "task": "jsonl", "source": str(tmp_path), "eval_source": str(tmp_path / "tst.jsonl")}
    typo, near = tmp_path / "tst.jsonl", tmp_path / "test.jsonl"
    said = rf"^data.eval_source '{typo}': no such file or folder\. Did you mean {near}\?"
    with pytest.raises(DataError, match=said + r" \(evaluate.py reads its questions there"):
        load_split(data, split="train")
    with pytest.raises(EvaluationError, match=said + "$"):
        eval_data(data, "test")
    assert (
        len(load_split({**data, "eval_source": "some/hub-id"}, split="train")) == 3
    )  # a Hub id is not checked


def test_answers_that_may_be_decimal_commas_are_warned_about_naming_the_first_line(tmp_path, caplog):
    """A decimal-comma 12,5 was graded silently as the list {12, 5}: the model's 12.5 scored wrong."""
    data = [{**row, "answer": str(row["answer"])} for row in rows(3)]
    data[1]["answer"], data[2]["answer"] = "12,5", "0,25"
    file = write_jsonl(tmp_path / "train.jsonl", data)
    with caplog.at_level(logging.WARNING, logger="recipes.tasks.user_jsonl"):
        assert load(file)["gold"] == ["1", "12,5", "0,25"]
        load(file)  # read again (training, then its held-out questions): said once
    warnings = [r.getMessage() for r in caplog.records]
    said = (
        f"{file} line 2: answer '12,5' is read as a list of two answers (12 and 5), as MATH writes several answers; "
        "if it is the decimal 12.5, write it with a point. 2 of 3 answers of this split look like this."
    )
    assert warnings == [said]
    caplog.clear()
    data[1]["answer"], data[2]["answer"] = (
        "1,500",
        "\\frac{3}{4}",
    )  # a thousands separator, LaTeX: nothing to say
    with caplog.at_level(logging.WARNING, logger="recipes.tasks.user_jsonl"):
        assert load(write_jsonl(tmp_path / "other" / "train.jsonl", data))["gold"] == [
            "1",
            "1,500",
            "\\frac{3}{4}",
        ]
    assert caplog.records == []
