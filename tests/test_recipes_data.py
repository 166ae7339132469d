"""GSM8K loading from local files and folders: columns, gold answers, ids, length filter, errors."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import REPO
from datasets import Dataset

from recipes.data import DataError, gold_number, load_split

SECTION = {
    "source": "samples/gsm8k_train_sample.jsonl",
    "config": None,
    "split": "train",
    "system_prompt": "Be brief.",
    "limit": None,
    "max_prompt_tokens": None,
}


def test_bundled_sample_becomes_chat_prompts_with_gold_and_ids():
    rows = load_split(SECTION)
    assert len(rows) == 195  # the other 5 of the 200 rows are the held-out split (test_recipes_heldout.py)
    first = rows[0]
    assert first["id"] == "gsm8k-train-00000" and rows[194]["id"] == "gsm8k-train-00199"
    assert "gsm8k-train-00015" not in rows["id"]  # a held-out row; the others keep the source's ids
    assert first["prompt"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": first["question"]},
    ]
    assert first["gold"] == "72" and first["solution"].endswith("#### 72")


@pytest.mark.parametrize(
    ("solution", "gold"),
    [
        ("so 5\n#### 1,080", "1080"),
        ("#### -3", "-3"),
        ("x #### 2\n#### 7", "7"),
        ("no marker", None),
        ("####  ", None),
    ],
)
def test_gold_number(solution, gold):
    assert gold_number(solution) == gold


def test_folder_with_split_files_and_parquet(tmp_path):
    lines = [{"question": f"What is {i}+1?", "answer": f"{i}+1={i + 1}\n#### {i + 1}"} for i in range(5)]
    (tmp_path / "train.jsonl").write_text("\n".join(map(json.dumps, lines[:3])))
    (tmp_path / "test.jsonl").write_text("\n".join(map(json.dumps, lines[3:])))
    test = load_split({**SECTION, "source": str(tmp_path)}, split="test")
    assert test["gold"] == ["4", "5"] and test["id"] == ["gsm8k-test-00000", "gsm8k-test-00001"]
    parquet = tmp_path / "pq" / "train-00000.parquet"
    parquet.parent.mkdir()
    Dataset.from_list(lines).to_parquet(str(parquet))
    # "What is 0+1?" is a held-out question, so the first two training rows are the next two.
    assert load_split({**SECTION, "source": str(parquet.parent), "limit": 2})["gold"] == ["2", "3"]


def test_a_data_file_no_split_names_is_said_once_not_left_out_silently(tmp_path, caplog):
    lines = [{"question": f"What is {i}+1?", "answer": f"#### {i + 1}"} for i in range(4)]
    for name in ("train.jsonl", "test.jsonl", "heldout.jsonl", "train2.jsonl", "sub/validation.jsonl"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(
            "\n".join(map(json.dumps, lines[:2] if name == "heldout.jsonl" else lines[2:]))
        )
    (tmp_path / "notes.txt").write_text("not data")
    section = {**SECTION, "source": str(tmp_path)}
    with caplog.at_level("WARNING", logger="recipes.data"):
        assert load_split(section)["gold"] == ["3", "4"]
        load_split(section)
        load_split(section, split="test")
    said = [r.getMessage() for r in caplog.records if r.name == "recipes.data"]
    assert len(said) == 1, said
    assert "sub/validation.jsonl, train2.jsonl left out" in said[0]
    assert "splits train/heldout/test" in said[0] and "notes.txt" not in said[0]


def test_many_unread_files_are_named_five_at_most(tmp_path, caplog):
    from recipes.data import _say_unread_files

    for name in ("train.jsonl", "test.parquet", *(f"extra{i}.jsonl" for i in range(6)), "extra.json"):
        (tmp_path / name).write_text("{}")
    with caplog.at_level("WARNING", logger="recipes.data"):
        _say_unread_files({"source": str(tmp_path), "split": "train"})
    (said,) = [r.getMessage() for r in caplog.records if r.name == "recipes.data"]
    assert ": extra.json, extra0.jsonl, extra1.jsonl, extra2.jsonl, extra3.jsonl ... left out" in said
    assert "(e.g. train.jsonl, or shards train-00000-of-00002.jsonl)" in said


@pytest.mark.parametrize("where", ["a later process", "a Hub layout", "a file", "every file a split's"])
def test_unread_files_are_not_said_where_they_need_not_be(tmp_path, caplog, monkeypatch, where):
    from recipes.data import _say_unread_files

    for name in ("train.jsonl", "train2.jsonl"):
        (tmp_path / name).write_text("{}")
    source = tmp_path
    if where == "a later process":
        monkeypatch.setenv("RANK", "1")  # the first process says it
    elif where == "a Hub layout":  # its README's configs name the files of each split
        (tmp_path / "README.md").write_text("---\nconfigs:\n- config_name: default\n---\n")
    elif where == "a file":
        source = tmp_path / "train2.jsonl"
    else:
        (tmp_path / "train2.jsonl").rename(tmp_path / "heldout.jsonl")
    with caplog.at_level("WARNING", logger="recipes.data"):
        _say_unread_files({"source": str(source), "split": "train"})
    assert not [r for r in caplog.records if r.name == "recipes.data"]


def test_real_gsm8k_test_split(gsm8k_dir):
    rows = load_split({**SECTION, "source": str(gsm8k_dir)}, split="test")
    assert len(rows) == 1319 and len(set(rows["id"])) == 1319
    assert all(g.lstrip("-").replace(".", "", 1).isdigit() for g in rows["gold"])


def test_malformed_rows_and_missing_files_are_named(tmp_path):
    bad = tmp_path / "train.jsonl"
    bad.write_text(
        json.dumps({"question": "q", "answer": "#### 1"})
        + "\n"
        + json.dumps({"question": "q", "answer": "2"})
    )
    with pytest.raises(DataError, match=r"train.jsonl line 2: the answer has no '#### <number>' final line"):
        load_split({**SECTION, "source": str(bad)})
    with pytest.raises(DataError, match="No validation split in"):
        load_split({**SECTION, "source": str(tmp_path)}, split="validation")
    with pytest.raises(DataError, match="no such file or folder"):
        load_split({**SECTION, "source": str(tmp_path / "nope.jsonl")})
    (tmp_path / "other.jsonl").write_text(json.dumps({"q": "x"}))
    with pytest.raises(
        DataError, match=r"rows need question and answer fields; missing \['answer', 'question'\]"
    ):
        load_split({**SECTION, "source": str(tmp_path / "other.jsonl")})


def test_prompt_budget_filter_then_limit(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    everything = load_split(SECTION)
    lengths = [
        len(tokenizer.apply_chat_template(p, add_generation_prompt=True, return_dict=False))
        for p in everything["prompt"]
    ]
    budget = sorted(lengths)[100]
    kept = load_split({**SECTION, "max_prompt_tokens": budget}, tokenizer=tokenizer)
    assert len(kept) == sum(n <= budget for n in lengths) < len(everything)
    assert all(
        len(tokenizer.apply_chat_template(p, add_generation_prompt=True, return_dict=False)) <= budget
        for p in kept["prompt"]
    )
    assert len(load_split({**SECTION, "max_prompt_tokens": budget, "limit": 10}, tokenizer=tokenizer)) == 10
    with pytest.raises(
        DataError, match=r"data.max_prompt_tokens=\d+ needs the tokenizer .* tokenizer=recipes"
    ):
        load_split(
            {**SECTION, "max_prompt_tokens": budget}
        )  # a ValueError: the contract promises a UserError
    shortest = min(lengths)
    message = (
        rf"Every prompt of data.source .* is longer than data.max_prompt_tokens={shortest - 1}; the shortest"
    )
    with pytest.raises(
        DataError, match=message + rf" has {shortest} tokens. Raise .* to at least {shortest}"
    ):
        load_split({**SECTION, "max_prompt_tokens": shortest - 1}, tokenizer=tokenizer)


def test_split_is_a_whole_word_of_the_file_name(tmp_path):
    for name in ("gsm8k_train_sample.jsonl", "gsm8k_test_sample.jsonl"):  # the bundled GSM8K files only
        shutil.copy(REPO / "recipes" / "samples" / name, tmp_path / name)
    rows = load_split({**SECTION, "source": str(tmp_path)}, split="test")
    assert len(rows) == 100 and rows[0]["id"] == "gsm8k-test-00000"
    with pytest.raises(DataError, match="No est split"):
        load_split({**SECTION, "source": str(tmp_path)}, split="est")


@pytest.mark.parametrize(
    ("text", "task", "message"),
    [
        ("", "gsm8k", "is empty: a JSONL data file holds one JSON object per line."),
        (
            '{"question": "q", "answer": "a #### 1"}\nnot json\n',
            "gsm8k",
            "line 2 is not valid JSON (Expecting value at column 1)",
        ),
        (
            '{"question": "q", "answer": "a #### 1"}\n{"question": "r", "answer": "a #### \n',
            "gsm8k",
            "line 2 is not valid JSON (Unterminated string starting at column 29)",
        ),
        ('["q", "a"]\n', "jsonl", "line 1 is not a JSON object with named fields"),
        (
            '{"question": "q", "answer": "a #### 1"}\n{"question": "r"}\n',
            "gsm8k",
            "line 2: no 'answer' field; every row needs one.",
        ),
        (
            '{"question": "q", "answer": "a #### 1"}\n{"question": "r", "answer": null}\n',
            "gsm8k",
            "line 2: the 'answer' field is null; every row needs one.",  # was "no 'answer' field"
        ),
        (
            '{"question": "q", "answer": "a #### 1"}\n{"question": "r", "Answer": "a #### 2"}\n',
            "jsonl",
            "line 2: no 'answer' field (it has 'Answer': rename it to 'answer'); every row needs one.",
        ),
        (
            '{"question": "q", "answer": "a #### 1"}\n{"question": "r", "answer": "  "}\n',
            "gsm8k",
            "line 2: the 'answer' field is empty.",
        ),
        (
            '{"question": "r", "answer": 18}\n',
            "gsm8k",
            "line 1: the answer has no '#### <number>' final line",
        ),
        (
            '{"question": "q", "answer": 1, "id": "a"}\n\n{"question": "r", "answer": "3.10", "id": "007"}\n',
            "jsonl",
            (
                "'answer' is text on line 3 but 1 on line 1; read together, text such as \"007\" would become 7. "
                'Write every \'answer\' as text, e.g. "answer": "1" on line 1.'
            ),
        ),
        (
            '{"question": "q", "answer": "1", "id": "x"}\n{"question": "r", "answer": "2", "id": 5}\n',
            "jsonl",
            "'id' is text on line 1 but 5 on line 2",
        ),
    ],
    ids=[
        "empty",
        "bad-line",
        "cut-short-line",
        "not-an-object",
        "row-without-answer",
        "null-answer",
        "misspelt-answer-key",
        "blank-answer",
        "number-answer",
        "text-and-number-answers",
        "text-and-number-ids",
    ],
)
def test_a_bad_data_file_is_one_error_naming_the_file_and_line(tmp_path, text, task, message):
    source = tmp_path / "train.jsonl"
    source.write_text(text)
    with pytest.raises(DataError) as raised:
        load_split({"task": task, "source": str(source), "system_prompt": "s"})
    assert str(source) in str(raised.value) and message in str(raised.value)
