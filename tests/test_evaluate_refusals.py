"""recipes/evaluate.py refusals: bad arguments, unwritable outputs, folders without an adapter, other data."""

from __future__ import annotations

import importlib.util
import logging
import shutil
import subprocess
import sys

import pytest
from conftest import REPO

from recipes.evaluation import generation
from recipes.evaluation.generation import EvaluationError
from recipes.recipe import load_recipe
from tests._evaluate_helpers import ARGS, run


def test_an_out_path_that_cannot_be_written_is_refused_before_a_model_loads(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(generation, "load_generator", lambda *a, **k: pytest.fail("loaded a model"))
    code, _, err = run(capsys, *ARGS, "--out", tmp_path)
    assert code == 2 and f"--out {tmp_path} is a folder; give a .jsonl file path" in err
    (tmp_path / "file").write_text("mine")
    code, _, err = run(capsys, *ARGS, "--out", tmp_path / "file" / "x.jsonl")
    assert code == 2 and f"{tmp_path / 'file'} is a file, not a folder" in err
    assert (tmp_path / "file").read_text() == "mine"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["gsm8k_tiy"], "Unknown recipe 'gsm8k_tiy'. Did you mean gsm8k_tiny?"),
        (["gsm8k_tiny", "trainer.learnin_rate=1"], "Did you mean trainer.learning_rate?"),
        (["gsm8k_tiny", "--adapter", "/no/such/adapter"], "/no/such/adapter is not a folder"),
        (["gsm8k_tiny", "--adapter", "s3:/bucket"], "names no bucket"),
        (
            ["gsm8k_tiny", "--samples", "3", "--temperature", "0"],
            "greedy decoding: all 3 samples would be the same",
        ),
        (["gsm8k_tiny", "--top-p", "0"], "--top-p 0: expected above 0 and at most 1"),
        (["gsm8k_tiny", f"data.source={REPO / 'recipes' / 'accelerate'}"], "No test split in"),
        (["gsm8k_tiny", "--questions", "500"], "--questions 500 but the split has 100 questions"),
        (
            ["gsm8k_tiny", "--questions", "1", "--max-new-tokens", "5000"],
            "but builtin:tiny-llama holds at most 1024: use",
        ),
    ],
)
def test_user_errors_exit_2_with_a_message(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.setattr(generation, "load_generator", lambda *a, **k: pytest.fail("loaded a model"))
    code, _, err = run(capsys, *argv, "--out", tmp_path / "x.jsonl")
    assert code == 2
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "x.jsonl").exists()


def test_folders_without_an_adapter_are_refused(tmp_path, tiny_model_dir, capsys):
    run_folder, checkpoint = tmp_path / "full", tmp_path / "checkpoint-5"
    shutil.copytree(tiny_model_dir, run_folder)
    shutil.copytree(tiny_model_dir, checkpoint)  # a full model's checkpoint: weights, but no LoRA adapter
    code, _, err = run(capsys, "gsm8k_tiny", "--adapter", run_folder, "--out", tmp_path / "x.jsonl")
    assert code == 2 and "holds no adapter and no usable checkpoint-N folder" in err
    # A whole model (an export.py folder) is evaluated as the base: the refusal says how.
    assert (
        f"it holds a whole model (config.json), a merged export say: use it as model.name_or_path={run_folder}"
        in err
    )
    code, _, err = run(capsys, "gsm8k_tiny", "--adapter", checkpoint, "--out", tmp_path / "x.jsonl")
    assert (
        code == 2 and "holds no LoRA adapter (no adapter_config.json)" in err and "model.name_or_path=" in err
    )


def test_vllm_engine_without_vllm_is_a_clear_error(capsys, tmp_path):
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    code, _, err = run(capsys, "gsm8k_tiny", "--engine", "vllm", "--out", tmp_path / "x.jsonl")
    assert code == 2 and "--engine vllm needs vLLM, which is not installed" in err


@pytest.mark.slow
def test_the_script_prints_errors_without_a_traceback(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "recipes" / "evaluate.py"),
            "gsm8k_tiy",
            "--out",
            str(tmp_path / "x.jsonl"),
        ],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "Did you mean gsm8k_tiny?" in result.stderr and "Traceback" not in result.stderr


def test_an_adapter_evaluated_on_other_data_than_its_run_trained_on_is_warned(tmp_path, caplog):
    from recipes.evaluation.trained_on import warn_if_other_data

    mine = tmp_path / "mine.jsonl"
    mine.write_text('{"question": "1+1?", "answer": 2}\n')
    trained = load_recipe("gsm8k_tiny", ["data.task=jsonl", f"data.source={mine}"])
    run = tmp_path / "run"
    (run / "checkpoint-2").mkdir(parents=True)
    (run / "recipe.yaml").write_text(trained.to_yaml())  # as recipes/run.py writes it
    with caplog.at_level(logging.WARNING, logger="recipes.evaluate"):
        assert warn_if_other_data(run, trained.config["data"]) == []
        assert warn_if_other_data(run / "checkpoint-2", trained.config["data"]) == []
        assert not caplog.records
        # The run's data.* overrides forgotten: the bundled GSM8K sample instead of the user's file.
        assert warn_if_other_data(run / "checkpoint-2", load_recipe("gsm8k_tiny").config["data"]) == [
            "task",
            "source",
        ]
    assert f"data.task='jsonl', data.source='{mine}' ({run / 'recipe.yaml'})" in caplog.text
    assert "pass the run's data.* overrides" in caplog.text
    assert (
        warn_if_other_data(tmp_path / "downloaded", trained.config["data"]) == []
    )  # no recipe.yaml beside it


def test_resuming_checks_the_system_prompt_but_resumes_files_written_before_it_was_recorded(tmp_path):
    from recipes.evaluation.generation import decoding_for
    from recipes.evaluation.resume import check_resumable, record_settings

    recipe = load_recipe("gsm8k_tiny")
    decoding = decoding_for(recipe.config["trainer"], None, None, 16, samples=2)
    settings = record_settings(recipe, None, 0, "test", "samples/gsm8k_test_sample.jsonl", decoding)
    written = [{"id": "gsm8k-test-00001", "sample": 0, "correct": False, **settings}]
    check_resumable(written, settings, tmp_path / "base.jsonl")
    older = [{k: v for k, v in record.items() if k != "prompt_sha"} for record in written]
    check_resumable(older, settings, tmp_path / "base.jsonl")  # no prompt recorded: nothing to compare
    other = load_recipe("gsm8k_tiny", ['data.system_prompt="Answer in French. End with #### <number>."'])
    other_settings = record_settings(other, None, 0, "test", "samples/gsm8k_test_sample.jsonl", decoding)
    with pytest.raises(EvaluationError, match=r"refusing to append \(prompt_sha: file has '[0-9a-f]{12}'"):
        check_resumable(written, other_settings, tmp_path / "base.jsonl")


def test_records_carry_the_answer_style_and_resuming_checks_it(tmp_path):
    """format_ok and the strict grade depend on the recipe's answer style: recipes/regrade.py reads it back."""
    from recipes.evaluation.generation import decoding_for
    from recipes.evaluation.records import format_style
    from recipes.evaluation.resume import check_resumable, record_settings

    recipe = load_recipe("gsm8k_tiny")
    decoding = decoding_for(recipe.config["trainer"], None, None, 16, samples=2)
    settings = record_settings(recipe, None, 0, "test", "samples/gsm8k_test_sample.jsonl", decoding)
    assert settings["answer_style"] == format_style(recipe.config["rewards"]) == "hash"
    written = [{"id": "gsm8k-test-00001", "sample": 0, "correct": False, **settings, "answer_style": "tags"}]
    with pytest.raises(EvaluationError, match=r"answer_style: file has 'tags', this run 'hash'"):
        check_resumable(written, settings, tmp_path / "base.jsonl")
    older = [{k: v for k, v in record.items() if k != "answer_style"} for record in written]
    check_resumable(older, settings, tmp_path / "base.jsonl")  # written before it was recorded


def test_an_adapter_of_another_base_model_is_refused_naming_that_base(tmp_path, capsys):
    """The refusal said only "Set model.name_or_path to the adapter's base model", not which one that is."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
    other = LlamaForCausalLM(
        LlamaConfig(vocab_size=512, num_key_value_heads=4, **shape)
    )  # gsm8k_tiny's has 2
    adapter = tmp_path / "adapter"
    get_peft_model(other, LoraConfig(r=4, target_modules=["k_proj"])).save_pretrained(adapter)
    (adapter / "recipe.yaml").write_text("model:\n  name_or_path: org/other-base\n")
    code, _, err = run(capsys, "gsm8k_tiny", "--adapter", adapter, "--out", tmp_path / "x.jsonl")
    assert code == 2 and "Cannot apply the adapter" in err
    assert "It was trained from org/other-base: set model.name_or_path to that" in err
    # One line: torch's list of mismatched weights, a line each, came before the fix.
    (said,) = [line for line in err.splitlines() if "Cannot apply the adapter" in line]
    assert (
        said.startswith("error: ") and "2 of its weights have other shapes than this model's (first: " in said
    )
    assert "\tsize mismatch" not in err and not any(
        line.startswith("size mismatch") for line in err.splitlines()
    )


def test_a_prompt_that_fills_the_context_alone_is_named_not_answered_with_a_fix_that_cannot_work():
    """It suggested --max-new-tokens 1, which is refused just the same."""
    from recipes.evaluation.generation import check_context

    model = load_recipe("gsm8k_tiny").config["model"]  # builtin:tiny-llama, a context of 1024 tokens
    with pytest.raises(
        EvaluationError,
        match=r"prompt \(1100 tokens\) is 1105 tokens, but .* 1024: the prompt alone fills it: use shorter",
    ):
        check_context(model, [[1] * 10, [1] * 1100], 5)
    with pytest.raises(EvaluationError, match="use --max-new-tokens 24 or fewer"):
        check_context(model, [[1] * 1000], 25)
    check_context(model, [[1] * 1000], 24)  # fits exactly
    with pytest.raises(
        EvaluationError, match=r"the longest prompt \(question mine-test-00001, 1100 tokens\)"
    ):
        check_context(
            model, [[1] * 10, [1] * 1100], 5, ["mine-test-00000", "mine-test-00001"]
        )  # which was it?
