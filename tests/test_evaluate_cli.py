"""recipes/evaluate.py on the tiny model: question choice, record schema, resuming and the records file."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from conftest import REPO

from recipes.evaluate import main
from recipes.evaluation import generation
from recipes.evaluation.generation import EvaluationError
from recipes.evaluation.questions import eval_data, select_questions
from recipes.evaluation.records import read_records
from recipes.evaluation.resume import prompt_sha
from recipes.evaluation.summary import summary
from recipes.recipe import load_recipe
from rewards.answers import extract_answer, format_ok, is_correct, lenient_correct, strict_correct
from stats.records import load_records
from tests._evaluate_helpers import ARGS, lines, run

TEST_SAMPLE = REPO / "recipes" / "samples" / "gsm8k_test_sample.jsonl"
SCHEMA = {
    "id": str,
    "sample": int,
    "correct": bool,
    "correct_strict": bool,
    "correct_lenient": bool,
    "format_ok": bool,
    "gold": str,
    "n_tokens": int,
    "question": str,
    "completion": str,
    "model": str,
    "seed": int,
    "split": str,
    "source": str,
    "temperature": float,
    "top_p": float,
    "max_new_tokens": int,
    "engine": str,
    "prompt_sha": str,
}


@pytest.fixture
def count_generate(monkeypatch):
    """Counts HFGenerator.generate calls; ``fail_on`` makes call number N raise KeyboardInterrupt."""
    calls = {"n": 0, "fail_on": None}
    real = generation.HFGenerator.generate

    def counted(self, prompts, seeds):
        calls["n"] += 1
        if calls["n"] == calls["fail_on"]:
            raise KeyboardInterrupt
        return real(self, prompts, seeds)

    monkeypatch.setattr(generation.HFGenerator, "generate", counted)
    return calls


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """An uninterrupted run of ARGS: the reference the resumed runs must reproduce byte for byte."""
    out = tmp_path_factory.mktemp("eval") / "base.jsonl"
    assert main([*ARGS, "--out", str(out)]) == 0
    return out


def test_question_draw_depends_on_seed_only_and_grows_by_prefix():
    ids = [f"gsm8k-test-{i:05d}" for i in range(100)]
    assert select_questions(ids, 10, seed=0) == select_questions(list(ids), 10, seed=0)
    assert select_questions(ids, 10, seed=0) != select_questions(ids, 10, seed=1)
    assert select_questions(ids, 20, seed=0)[:10] == select_questions(ids, 10, seed=0)
    assert sorted(select_questions(ids, None, seed=3)) == list(range(100))
    with pytest.raises(EvaluationError, match="--questions 101 but the split has 100 questions"):
        select_questions(ids, 101, seed=0)


def test_records_match_the_schema_and_the_training_grader(baseline):
    records = lines(baseline)
    assert [(r["id"], r["sample"]) for r in records] == [
        (f"gsm8k-test-{i:05d}", k)
        for i in select_questions([f"gsm8k-test-{i:05d}" for i in range(100)], 4, 0)
        for k in (0, 1)
    ]
    rows = [json.loads(line) for line in TEST_SAMPLE.read_text().splitlines()]
    for r in records:
        for key, kind in SCHEMA.items():
            assert isinstance(r[key], kind), (key, r[key])
        assert r["adapter"] is None and r["adapter_path"] is None and r["seed"] == 0 and r["split"] == "test"
        assert r["model"] == "builtin:tiny-llama" and r["source"] == "samples/gsm8k_test_sample.jsonl"
        row = rows[int(r["id"].rsplit("-", 1)[1])]
        assert r["question"] == row["question"] and row["answer"].endswith(f"#### {r['gold']}")
        assert r["correct"] == is_correct(r["completion"], r["gold"])
        assert r["correct_strict"] == strict_correct(r["completion"], r["gold"], "hash")
        assert r["correct_lenient"] == lenient_correct(r["completion"], r["gold"])
        assert r["pred"] == extract_answer(r["completion"])
        assert r["format_ok"] == format_ok(r["completion"], "hash")  # gsm8k_tiny's format reward style
        assert 1 <= r["n_tokens"] <= 16 and r["max_new_tokens"] == 16 and r["temperature"] == 1.0
        assert (r["planned_questions"], r["planned_samples"]) == (4, 2)  # what a finished file holds
        assert r["prompt_sha"] == prompt_sha(load_recipe("gsm8k_tiny").config["data"]["system_prompt"])
    assert load_records(baseline).counts.keys() == {r["id"] for r in records}


def test_rerun_generates_nothing_and_leaves_the_file_unchanged(baseline, tmp_path, capsys, monkeypatch):
    out = shutil.copy(baseline, tmp_path / "base.jsonl")
    monkeypatch.setattr(
        generation, "load_generator", lambda *a, **k: pytest.fail("loaded a model for no work")
    )
    code, stdout, _ = run(capsys, *ARGS, "--out", out)
    assert code == 0
    assert (tmp_path / "base.jsonl").read_bytes() == baseline.read_bytes()
    assert "4 questions x 2 samples = 8 records" in stdout
    assert re.search(r"strict-match +\d+/8 .*\n +flexible-extract +\d+/8", stdout)
    assert "lm-eval's GSM8K scoring (what published GSM8K numbers use)" in stdout
    math = [{**r, "id": f"math-test/algebra/{i}"} for i, r in enumerate(lines(baseline))]
    assert "(not this task's published scoring)" in summary(
        math, 4, tmp_path / "m.jsonl"
    )  # MATH said GSM8K's
    assert "python -m stats.compare" in stdout and "--adapter ADAPTER" in stdout
    assert f"--out {tmp_path / 'tuned.jsonl'}" in stdout  # beside this file, named for the other side


def test_truncated_last_line_is_dropped_and_redone_identically(baseline, tmp_path, capsys, count_generate):
    out = tmp_path / "base.jsonl"
    text = baseline.read_text().splitlines(keepends=True)
    out.write_text("".join(text[:4]) + text[4][:30])  # a crash in the middle of the fifth line
    code, _, _ = run(capsys, *ARGS, "--out", out)
    assert code == 0
    assert count_generate["n"] == 2  # batches 2 (samples 3-5, partly done) and 3; batch 1 is complete
    assert out.read_bytes() == baseline.read_bytes()


def test_interrupted_run_resumes_to_what_an_uninterrupted_run_writes(
    baseline, tmp_path, capsys, count_generate
):
    out = tmp_path / "base.jsonl"
    count_generate["fail_on"] = 2
    code, _, err = run(capsys, *ARGS, "--out", out)
    assert code == 130 and "rerun the same command to resume" in err
    assert len(lines(out)) == 3  # the first batch, complete and on disk
    count_generate.update(n=0, fail_on=None)
    assert run(capsys, *ARGS, "--out", out)[0] == 0
    assert count_generate["n"] == 2
    assert out.read_bytes() == baseline.read_bytes()
    assert len(load_records(out).records) == 8  # stats refuses duplicate (id, sample) pairs


def test_more_questions_extend_the_file_without_redoing_the_first(baseline, tmp_path, capsys, count_generate):
    out = shutil.copy(baseline, tmp_path / "base.jsonl")
    code, _, _ = run(capsys, *ARGS[:2], "6", *ARGS[3:], "--out", out)
    assert code == 0
    records = lines(tmp_path / "base.jsonl")
    assert records[:8] == lines(baseline) and len(records) == 12
    assert count_generate["n"] == 2  # the partly done third batch again, and the fourth


def test_refuses_to_append_records_made_with_other_settings(baseline, tmp_path, capsys):
    out = shutil.copy(baseline, tmp_path / "base.jsonl")
    code, _, err = run(capsys, *ARGS, "--out", out, "--temperature", "0.5", "--seed", "1")
    assert code == 2
    assert "refusing to append" in err and "temperature: file has 1.0, this run 0.5" in err
    assert "seed: file has 0, this run 1" in err and "Use a new --out file" in err
    assert (tmp_path / "base.jsonl").read_bytes() == baseline.read_bytes()


def test_fewer_questions_or_samples_than_the_file_holds_are_refused(baseline, tmp_path, capsys):
    """The summary would cover the subset asked for, while stats.compare reads the whole file."""
    out = shutil.copy(baseline, tmp_path / "base.jsonl")
    code, _, err = run(capsys, *ARGS[:2], "2", *ARGS[3:], "--out", out)
    assert code == 2
    assert (
        "holds 8 samples (4 questions, up to 2 samples each), 4 of them beyond what this run asks for" in err
    )
    assert (
        "(--questions 2 --samples 2)" in err
        and (tmp_path / "base.jsonl").read_bytes() == baseline.read_bytes()
    )


def test_a_heldout_records_file_is_never_extended_as_another_evaluation(baseline, tmp_path, capsys):
    """Held-out records carry the base model's settings (no adapter folder), but grade a training step's policy."""
    out = tmp_path / "step-40.jsonl"
    out.write_text("".join(json.dumps({**record, "step": 40}) + "\n" for record in lines(baseline)[:4]))
    before = out.read_bytes()
    code, _, err = run(capsys, *ARGS, "--out", out)
    assert (
        code == 2 and "holds the held-out records of training step 40" in err and out.read_bytes() == before
    )


def test_greedy_batched_generation_equals_one_prompt_at_a_time(tmp_path, capsys):
    greedy = ["gsm8k_tiny", "--questions", "4", "--temperature", "0", "--max-new-tokens", "16"]
    for size in (1, 4):
        assert run(capsys, *greedy, "--batch-size", size, "--out", tmp_path / f"b{size}.jsonl")[0] == 0
    one, batched = lines(tmp_path / "b1.jsonl"), lines(tmp_path / "b4.jsonl")
    assert [r["id"] for r in one] == [r["id"] for r in batched]  # the draw ignores the batch size
    assert [r["completion"] for r in one] == [
        r["completion"] for r in batched
    ]  # left padding changes nothing


def test_a_folder_source_and_an_explicit_test_file_work(gsm8k_dir, tmp_path, capsys):
    folder = tmp_path / "data"
    folder.mkdir()
    shutil.copy(gsm8k_dir / "test.jsonl", folder / "test.jsonl")
    base = ["--questions", "2", "--max-new-tokens", "4", "--temperature", "0"]
    assert run(capsys, "gsm8k_tiny", f"data.source={folder}", *base, "--out", tmp_path / "a.jsonl")[0] == 0
    assert (
        run(
            capsys, "gsm8k_tiny", f"data.source={folder / 'test.jsonl'}", *base, "--out", tmp_path / "b.jsonl"
        )[0]
        == 0
    )
    a, b = lines(tmp_path / "a.jsonl"), lines(tmp_path / "b.jsonl")
    assert [r["id"] for r in a] == [r["id"] for r in b] and int(a[0]["id"].rsplit("-", 1)[1]) < 1319


def test_resuming_after_the_data_moved_its_rows_is_refused(tmp_path, capsys):
    """A JSONL without ids numbers its rows: reordered, the same ids name other questions."""
    folder = tmp_path / "data"
    folder.mkdir()
    rows = TEST_SAMPLE.read_text().splitlines()
    (folder / "test.jsonl").write_text("\n".join(rows) + "\n")
    args = [
        "gsm8k_tiny",
        f"data.source={folder}",
        "--questions",
        "2",
        "--samples",
        "1",
        "--max-new-tokens",
        "4",
    ]
    out = tmp_path / "base.jsonl"
    assert run(capsys, *args, "--out", out)[0] == 0
    written = out.read_bytes()
    (folder / "test.jsonl").write_text("\n".join(reversed(rows)) + "\n")
    code, _, err = run(capsys, *args[:3], "4", *args[4:], "--out", out)
    assert code == 2 and out.read_bytes() == written
    assert (
        f"{out} holds 2 record(s) whose question or gold differs from what {folder} gives under the same id"
        in err
    )
    assert "Give your rows an `id` column" in err


def test_eval_data_finds_the_split_file_and_drops_training_filters(tmp_path):
    data = {"source": "samples/gsm8k_train_sample.jsonl", "limit": 5, "max_prompt_tokens": 10}
    assert eval_data(data, "test") == {
        "source": "samples/gsm8k_test_sample.jsonl",
        "limit": None,
        "max_prompt_tokens": None,
    }
    assert eval_data(data, "train")["source"] == "samples/gsm8k_train_sample.jsonl"
    (tmp_path / "mine.jsonl").write_text("")
    with pytest.raises(EvaluationError, match="is a single file, the one training reads"):
        eval_data({"source": str(tmp_path / "mine.jsonl")}, "test")  # no split named: the training data
    assert eval_data({"source": "openai/gsm8k"}, "test")["source"] == "openai/gsm8k"
    (tmp_path / "train.jsonl").write_text("")
    with pytest.raises(EvaluationError, match=r"train split's file and has no test sibling .*--split train"):
        eval_data({"source": str(tmp_path / "train.jsonl")}, "test")


def test_a_corrupt_line_inside_the_file_is_an_error_naming_it(tmp_path):
    out = tmp_path / "x.jsonl"
    record = '{"id": "a", "sample": 0, "correct": true}\n'
    out.write_text(record + "not json\n" + record)
    with pytest.raises(EvaluationError, match="x.jsonl line 2 is not valid JSON"):
        read_records(out)
    out.write_text(record + '{"id": "b"}\n')
    with pytest.raises(
        EvaluationError, match=r"line 2 is not an evaluation record \(a JSON object with id, sample"
    ):
        read_records(out)


@pytest.mark.parametrize(
    "text",
    ["my notes", "my notes\n", '{"id": "a", "sample": 0}', "\u00ff".encode("latin-1"), "ok\n" + "x" * 9],
    ids=["one-line", "one-line-ended", "json-not-a-record", "not-utf8", "two-lines"],
)
def test_a_file_this_evaluator_did_not_write_is_refused_and_left_untouched(
    tmp_path, capsys, text, monkeypatch
):
    out = tmp_path / "notes.jsonl"
    out.write_bytes(text if isinstance(text, bytes) else text.encode())
    before = out.read_bytes()
    monkeypatch.setattr(generation, "load_generator", lambda *a, **k: pytest.fail("loaded a model"))
    code, _, err = run(capsys, *ARGS, "--out", out)
    assert code == 2 and "Traceback" not in err
    assert "it was not written by this evaluator, and it is left untouched. Use a new --out file." in err
    assert out.read_bytes() == before


def test_a_complete_last_record_without_a_newline_is_kept(baseline, tmp_path, capsys, count_generate):
    out = tmp_path / "base.jsonl"
    whole = baseline.read_text()
    out.write_text(whole.rstrip("\n"))  # every record there, the final newline lost
    assert run(capsys, *ARGS, "--out", out)[0] == 0
    assert count_generate["n"] == 0 and out.read_text() == whole.rstrip(
        "\n"
    )  # nothing to do, nothing written
    out.write_text("".join(whole.splitlines(keepends=True)[:6]).rstrip("\n"))  # batches 1-2, unterminated
    assert run(capsys, *ARGS, "--out", out)[0] == 0
    assert count_generate["n"] == 1  # only the third batch; the sixth record was kept
    assert out.read_bytes() == baseline.read_bytes()


def test_python_api_takes_values_and_returns_the_records_the_cli_wrote(baseline, tmp_path):
    from recipes.evaluate import evaluate

    out = tmp_path / "api.jsonl"
    out.write_bytes(baseline.read_bytes())  # the same run: the API resumes it and generates nothing
    result = evaluate(load_recipe("gsm8k_tiny"), out, questions=4, samples=2, max_new_tokens=16, batch_size=3)
    assert result.records == lines(baseline) and result.questions == 4
    assert result.accuracy == sum(r["correct"] for r in result.records) / 8
    assert result.decoding.max_new_tokens == 16
