"""Loading, validating and pairing evaluation records (stats.records)."""

from __future__ import annotations

import json
import os
import re

import pytest
from _stats_helpers import outcomes_from_counts, run_compare, write_records

from stats.records import InputError, load_records, pair_questions
from stats.samples import describe_samples, uneven_samples_warning, unfinished_warning


def _write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_counts_per_question_and_blank_lines_skipped(tmp_path):
    path = _write_lines(
        tmp_path / "r.jsonl",
        [
            '{"id": "a", "sample": 0, "correct": true}',
            "",
            '{"id": "a", "sample": 1, "correct": false, "pred": "3"}',
            '{"id": "b", "sample": 0, "correct": true}',
        ],
    )
    model = load_records(path)
    assert model.counts == {"a": (1, 2), "b": (1, 1)}
    assert [r["sample"] for r in model.records] == [0, 1, 0]
    assert model.records[1]["pred"] == "3"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"id": "a", "sample": 0, "correct": tru}', "line 2: not valid JSON"),
        (
            '{"id": "a", "sample": 0, "pred": "3',
            "line 2: not valid JSON (Unterminated string starting at column 34)",
        ),
        ('["a", 0, true]', "line 2: expected a JSON object"),
        ('{"id": "a", "sample": 1, "is_correct": true}', "missing required key 'correct'"),
        ('{"id": 7, "sample": 1, "correct": true}', '"id" must be a non-empty string'),
        ('{"id": "a", "sample": "1", "correct": true}', '"sample" must be an integer >= 0'),
        ('{"id": "a", "sample": -1, "correct": true}', '"sample" must be an integer >= 0'),
        ('{"id": "a", "sample": 1, "correct": 1}', '"correct" must be true or false, got 1'),
        (
            '{"id": "a", "sample": 0, "correct": false}',
            "duplicate (id, sample) = ('a', 0), first seen on line 1",
        ),
    ],
)
def test_invalid_lines_name_file_line_and_problem(tmp_path, line, expected):
    path = _write_lines(tmp_path / "bad.jsonl", ['{"id": "a", "sample": 0, "correct": true}', line])
    with pytest.raises(InputError) as err:
        load_records(path)
    assert expected in str(err.value)
    assert f"{path} line 2" in str(err.value)


def test_missing_key_suggests_the_close_name(tmp_path):
    path = _write_lines(tmp_path / "r.jsonl", ['{"question_id": "a", "sample": 0, "correct": true}'])
    with pytest.raises(InputError, match=r"missing required key 'id'.*found: question_id, sample, correct"):
        load_records(path)
    path = _write_lines(tmp_path / "r.jsonl", ['{"id": "a", "samples": 0, "correct": true}'])
    with pytest.raises(InputError, match="Did you mean 'samples'"):
        load_records(path)


def test_many_bad_lines_are_summarised(tmp_path):
    path = _write_lines(tmp_path / "r.jsonl", ["not json"] * 8)
    with pytest.raises(InputError) as err:
        load_records(path)
    message = str(err.value)
    assert "line 5:" in message and "line 6:" not in message
    assert "... and 3 more invalid lines." in message


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        (lambda p: None, "does not exist"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: p.write_text("\n\n"), "no records (the file is empty)"),
        (lambda p: p.write_bytes(b"\xff\xfe{"), "cannot read the file as UTF-8"),
        (lambda p: os.mkfifo(p), "is not a regular file (a device or a pipe)"),  # it said "does not exist"
    ],
    ids=["missing", "directory", "empty", "not-utf8", "pipe"],
)
def test_unusable_files(tmp_path, setup, expected):
    path = tmp_path / "x.jsonl"
    setup(path)
    with pytest.raises(InputError, match=re.escape(expected)):
        load_records(path)


def test_pairing_refuses_different_question_sets_and_counts_them(tmp_path):
    base = load_records(write_records(tmp_path / "b.jsonl", outcomes_from_counts([1, 1, 1, 1], 1)))
    tuned_outcomes = outcomes_from_counts([1, 1, 1], 1)
    tuned_outcomes["extra"] = [True]
    tuned = load_records(write_records(tmp_path / "t.jsonl", tuned_outcomes))
    with pytest.raises(InputError) as err:
        pair_questions(base, tuned)
    message = str(err.value)
    assert "cover different questions: 2 of 5 differ" in message
    assert "1 only in the baseline file: 'q03'" in message and "1 only in the tuned file: 'extra'" in message
    assert "--intersect to compare the 3 shared questions" in message

    pairing = pair_questions(base, tuned, intersect=True)
    assert pairing.ids == ["q00", "q01", "q02"]
    assert pairing.baseline_only == ["q03"] and pairing.tuned_only == ["extra"]


def test_pairing_with_nothing_in_common_is_an_error_even_with_intersect(tmp_path):
    base = load_records(write_records(tmp_path / "b.jsonl", outcomes_from_counts([1], 1, prefix="a")))
    tuned = load_records(write_records(tmp_path / "t.jsonl", outcomes_from_counts([1], 1, prefix="b")))
    with pytest.raises(InputError, match="no question id in common"):
        pair_questions(base, tuned, intersect=True)


def test_the_same_questions_under_other_ids_name_how_ids_are_made(tmp_path):
    """A folder and a file in it as data.source make other ids for the same rows: say so, not 'same split?'."""

    def evaluated(path, stem):
        rows = [{"id": f"{stem}-test-{i:05d}", "sample": 0, "correct": True, "question": f"What is {i} + 1?"}
                for i in range(3)]  # fmt: skip
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return load_records(path)

    with pytest.raises(InputError) as err:
        pair_questions(evaluated(tmp_path / "b.jsonl", "my_task"), evaluated(tmp_path / "t.jsonl", "test"))
    assert str(err.value).endswith(
        "yet 3 questions are in both under other ids ('my_task-test-00000' in the baseline is 'test-test-00000' "
        "in the tuned file). Ids of rows without an 'id' field are made from the name data.source gives (a folder "
        "and a file in it make different ids): evaluate both models with the same data.source, or give the rows "
        "an 'id' field."
    )


def test_pairing_refuses_different_gold_for_the_same_question(tmp_path):
    base = load_records(write_records(tmp_path / "b.jsonl", outcomes_from_counts([1, 0], 1)))
    lines = (tmp_path / "b.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    rec["gold"] = "999"
    (tmp_path / "t.jsonl").write_text(lines[0] + "\n" + json.dumps(rec) + "\n")
    tuned = load_records(tmp_path / "t.jsonl")
    with pytest.raises(
        InputError, match="'q01' has gold '1' in .* but '999' in .*graded against different data"
    ):
        pair_questions(base, tuned)


def test_describe_samples_names_uneven_questions(tmp_path):
    even = load_records(write_records(tmp_path / "e.jsonl", outcomes_from_counts([1, 2], 5)))
    assert describe_samples(even, ["q00", "q01"]) == "5 samples per question"
    uneven = load_records(write_records(tmp_path / "u.jsonl", outcomes_from_counts([1, 2, 0], [5, 3, 4])))
    assert describe_samples(uneven, ["q00", "q01", "q02"]) == (
        "3 to 5 samples per question (2 questions have fewer than 5: 'q01' (3), 'q02' (4))"
    )


def test_a_cut_off_last_line_says_to_rerun_the_evaluation(tmp_path):
    path = tmp_path / "tuned.jsonl"
    path.write_text('{"id": "a", "sample": 0, "correct": true}\n{"id": "a", "sample": 1, "corr')  # no newline
    with pytest.raises(
        InputError, match=rf"{path} line 2: the last line is cut off .* Re-running recipes/evaluate.py"
    ):
        load_records(path)
    path.write_text(
        '{"id": "a", "sample": 0, "correct": true}\n{"id": "a", "sample": 1, "corr\n'
    )  # a whole bad line
    with pytest.raises(InputError, match=r"line 2: not valid JSON"):
        load_records(path)


def _with_questions(path, questions: list[str], source: str):
    """Records of ids q00.. with golds "0", "1", ... (write_records's), each asking ``questions[i]``."""
    write_records(path, outcomes_from_counts([1] * len(questions), 2))
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for rec in records:
        rec.update(question=questions[int(rec["id"][1:])], source=source)
    return _write_lines(path, [json.dumps(r) for r in records])


def test_pairing_refuses_an_id_that_names_another_question_in_the_other_file(tmp_path, capsys):
    """Two datasets numbering their rows alike give the same ids, and here the same golds: only the text tells."""
    numbers = ["What is 0 + 0?", "Is 2 even? Answer 1 for yes.", "What is 1 + 1?"]
    animals = ["What is 0 + 0?", "Do cats meow? Answer 1 for yes.", "What is 1 + 1?"]
    base = _with_questions(tmp_path / "b.jsonl", numbers, "data/numbers_test.jsonl")
    tuned = _with_questions(tmp_path / "t.jsonl", animals, "data/animals_test.jsonl")
    code, out, err = run_compare(capsys, base, tuned)
    assert code == 2 and out == ""
    assert f"Question id 'q01' names different questions: 'Is 2 even? Answer 1 for yes.' in {base}" in err
    assert f"but 'Do cats meow? Answer 1 for yes.' in {tuned}" in err
    assert "(source data/numbers_test.jsonl vs data/animals_test.jsonl)" in err
    assert "Evaluate both models on the same data" in err
    long = _with_questions(tmp_path / "l.jsonl", [numbers[0], "Do cats meow? " * 20, numbers[2]], "x")
    with pytest.raises(InputError, match=r"'Do cats meow\? Do cats .{50,70}\.\.\.' in"):
        pair_questions(load_records(base), load_records(long))


def test_pairing_accepts_the_same_questions_however_spaced_and_wherever_read(tmp_path):
    """A copy of the data elsewhere, or a question re-wrapped, is the same question; so is one without text."""
    questions = ["What is 0 + 0?", "Is 2\neven?", "What is 1 + 1?"]
    base = load_records(_with_questions(tmp_path / "b.jsonl", questions, "data/test.jsonl"))
    spaced = ["What is 0 + 0?", "Is  2 even? ", "What is 1 + 1?"]
    tuned = load_records(_with_questions(tmp_path / "t.jsonl", spaced, "/mnt/copy/test.jsonl"))
    assert pair_questions(base, tuned).ids == ["q00", "q01", "q02"]
    bare = load_records(write_records(tmp_path / "n.jsonl", outcomes_from_counts([1, 1, 1], 2)))
    for rec in bare.records:
        del rec["question"]  # records from another tool: nothing to check
    assert pair_questions(base, bare).ids == ["q00", "q01", "q02"]


def test_describe_samples_names_one_uneven_question_and_at_most_three(tmp_path):
    one = load_records(write_records(tmp_path / "o.jsonl", outcomes_from_counts([1, 0], 1)))
    assert describe_samples(one, ["q00", "q01"]) == "1 sample per question"
    single = load_records(write_records(tmp_path / "s.jsonl", outcomes_from_counts([1, 2], [2, 3])))
    assert describe_samples(single, ["q00", "q01"]) == (
        "2 to 3 samples per question (1 question has fewer than 3: 'q00' (2))"
    )
    many = load_records(write_records(tmp_path / "m.jsonl", outcomes_from_counts([0] * 5, [4, 2, 3, 1, 5])))
    assert describe_samples(many, ["q00", "q01", "q02", "q03", "q04"]) == (
        "1 to 5 samples per question (4 questions have fewer than 5: 'q03' (1), 'q01' (2), 'q02' (3), ...)"
    )


def test_uneven_samples_warning_names_the_count_and_the_smallest_question(tmp_path):
    even = load_records(write_records(tmp_path / "e.jsonl", outcomes_from_counts([1, 2], 3)))
    assert uneven_samples_warning(even, ["q00", "q01"]) is None
    path = write_records(tmp_path / "u.jsonl", outcomes_from_counts([1, 2, 0], [5, 3, 4]))
    warning = uneven_samples_warning(load_records(path), ["q00", "q01", "q02"])
    assert warning.startswith(
        f"{path}: 2 of 3 questions have fewer samples than the others (3 to 5 per question; e.g. 'q01' has 3 of 5)."
    )
    assert uneven_samples_warning(load_records(path), ["q00", "q02"]).startswith(
        f"{path}: 1 of 2 questions has fewer samples than the others (4 to 5 per question; e.g. 'q02' has 4 of 5)."
    )


def test_a_file_short_of_its_planned_questions_or_samples_is_unfinished(tmp_path):
    def model(counts, samples, **planned):
        return load_records(
            write_records(tmp_path / "r.jsonl", outcomes_from_counts(counts, samples), extra=planned)
        )

    assert unfinished_warning(model([1, 0], 2)) is None  # nothing planned on record
    assert unfinished_warning(model([1, 0], 2, planned_questions=2, planned_samples=2)) is None
    short = model([1, 0], 2, planned_questions=2, planned_samples=4)
    assert unfinished_warning(short) == (
        f"{short.path} holds 2 of the 2 questions (up to 2 of 4 samples each) its recipes/evaluate.py run "
        "planned: was it interrupted? Re-running it with the same arguments completes it."
    )
    assert unfinished_warning(model([1, 0], 2, planned_questions=3, planned_samples=2)).startswith(
        f"{short.path} holds 2 of the 3 questions (up to 2 of 2 samples each)"
    )


def test_a_data_file_named_by_mistake_says_how_to_get_records(tmp_path):
    """It said "missing required key 'id'" on every line, and nothing of what to run instead."""
    path = _write_lines(tmp_path / "train.jsonl", ['{"question": "What is 1 + 1?", "answer": "2"}'] * 2)
    with pytest.raises(InputError) as err:
        load_records(path)
    assert str(err.value).endswith(
        f"{path} holds data rows (question, answer), not graded samples: evaluate a model on that data with "
        "recipes/evaluate.py RECIPE --out FILE (data.source=... to name the data), then compare two such files."
    )
    records = _write_lines(tmp_path / "r.jsonl", ['{"question_id": "a", "sample": 0, "correct": true}'])
    with pytest.raises(InputError) as err:
        load_records(records)
    assert "holds data rows" not in str(err.value)  # a record with a misnamed key is still a record
