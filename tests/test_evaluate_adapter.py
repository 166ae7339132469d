"""Baseline against adapter on the tiny model, read back by ``python -m stats.compare`` (the paired workflow)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from _evaluate_helpers import run as evaluate_cli
from _in_process import run_recipe
from conftest import REPO

from callbacks.best import update_best_pointer
from callbacks.manifest import seal_checkpoint
from callbacks.stores import FolderStore
from recipes.evaluate import main

ARGS = ["gsm8k_tiny", "--questions", "4", "--samples", "2", "--max-new-tokens", "16"]


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def compare(base, tuned) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "stats.compare", str(base), str(tuned)],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
    )


@pytest.fixture(scope="module")
def adapter_dir(tmp_path_factory, tiny_model_dir):
    """A LoRA adapter on the tiny model with random (not zero) B matrices, so it changes what the model writes."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        LoraConfig(
            r=8, lora_alpha=16, target_modules="all-linear", init_lora_weights=False, task_type="CAUSAL_LM"
        ),
    )
    folder = tmp_path_factory.mktemp("adapter") / "final"
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def base_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("eval") / "base.jsonl"
    assert main([*ARGS, "--out", str(out)]) == 0
    return out


def test_adapter_run_sees_the_baseline_questions_and_compares(base_file, adapter_dir, tmp_path, capsys):
    tuned = tmp_path / "tuned.jsonl"
    assert main([*ARGS, "--adapter", str(adapter_dir), "--out", str(tuned)]) == 0
    stdout = capsys.readouterr().out
    base, records = lines(base_file), lines(tuned)
    assert [(r["id"], r["sample"]) for r in records] == [(r["id"], r["sample"]) for r in base]
    assert all(
        r["adapter"] == str(adapter_dir) and r["adapter_path"] == str(adapter_dir.resolve()) for r in records
    )
    assert [r["completion"] for r in records] != [r["completion"] for r in base]  # the adapter is applied
    assert (
        f"python -m stats.compare {tuned.with_name('base.jsonl')} {tuned}" in stdout
    )  # the base's file beside it
    result = compare(base_file, tuned)
    assert result.returncode == 0, result.stderr
    assert "Paired comparison by question" in result.stdout and "4 questions" in result.stdout


def test_merged_generation_writes_the_same_records_as_peft_branch(adapter_dir, tmp_path, caplog):
    caplog.set_level("INFO", logger="recipes.merged_lora")
    greedy = [*ARGS, "--samples", "1", "--temperature", "0", "--adapter", str(adapter_dir)]
    merged, branch = tmp_path / "merged.jsonl", tmp_path / "branch.jsonl"
    assert main([*greedy, "--out", str(merged)]) == 0  # the recipe's auto: merged on a CPU
    assert "lora.merged_generation=auto: generating with the adapter merged" in caplog.text
    assert main([*greedy, "--out", str(branch), "lora.merged_generation=false"]) == 0
    assert [r["completion"] for r in lines(merged)] == [r["completion"] for r in lines(branch)]


def test_resuming_with_another_adapter_is_refused(base_file, adapter_dir, tmp_path, capsys):
    out = shutil.copy(base_file, tmp_path / "base.jsonl")
    assert main([*ARGS, "--adapter", str(adapter_dir), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"adapter_path: file has None, this run '{adapter_dir.resolve()}'" in err
    assert "): the file evaluated the base model. Use a new --out file" in err


def test_resuming_after_the_adapter_changed_at_its_path_is_refused(adapter_dir, tmp_path, capsys):
    """After more training a run's output_dir holds another adapter at the same path: its records must not join."""
    from safetensors.torch import load_file, save_file

    folder = shutil.copytree(adapter_dir, tmp_path / "run")
    out = tmp_path / "tuned.jsonl"
    two = [*ARGS[:2], "2", *ARGS[3:], "--adapter", str(folder), "--out", str(out)]
    assert main(two) == 0
    [first] = {r["adapter_sha"] for r in lines(out)}
    assert len(first) == 16 and int(first, 16) >= 0
    weights = folder / "adapter_model.safetensors"
    save_file({name: 2 * tensor for name, tensor in load_file(weights).items()}, weights)
    written = out.read_bytes()
    assert main([*ARGS, "--adapter", str(folder), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"adapter_sha: file has '{first}', this run '" in err
    assert "the folder holds another adapter than when the file was written (trained further" in err
    assert out.read_bytes() == written


def test_the_same_adapter_at_another_path_resumes(adapter_dir, tmp_path, capsys):
    """A moved run folder, RUN/best or a store's copy: the weights, not the path, say which adapter it is."""
    out = tmp_path / "tuned.jsonl"
    assert main([*ARGS[:2], "2", *ARGS[3:], "--adapter", str(adapter_dir), "--out", str(out)]) == 0
    moved = shutil.copytree(adapter_dir, tmp_path / "moved")
    assert main([*ARGS, "--adapter", str(moved), "--out", str(out)]) == 0, capsys.readouterr().err
    records = lines(out)
    assert len({r["id"] for r in records}) == 4 and len({r["adapter_sha"] for r in records}) == 1


@pytest.mark.slow
def test_trained_adapter_synced_to_a_store_evaluates_by_uri(base_file, tmp_path, capsys):
    remote = f"file://{tmp_path / 'remote'}"
    train = run_recipe(
        "gsm8k_tiny", f"trainer.output_dir={tmp_path / 'run'}", "trainer.max_steps=2", "checkpoint.every_steps=2",
        f"checkpoint.uri={remote}",
    )  # fmt: skip
    assert train.returncode == 0, train.stderr[-3000:]
    tuned = tmp_path / "tuned.jsonl"
    code, out, err = evaluate_cli(capsys, *ARGS, "--adapter", remote, "--out", tuned)
    assert code == 0, err[-3000:]
    assert f"python -m stats.compare {tuned.with_name('base.jsonl')} {tuned}" in out
    records = lines(tuned)
    assert {r["adapter"] for r in records} == {remote}
    fetched = {r["adapter_path"] for r in records}
    assert len(fetched) == 1 and fetched.pop().endswith(
        "checkpoint-2"
    )  # the run's newest complete checkpoint
    comparison = compare(base_file, tuned)
    assert comparison.returncode == 0, comparison.stderr


def test_a_runs_best_pointer_names_the_adapter_to_evaluate(adapter_dir, tmp_path):
    run = tmp_path / "run"
    for step, accuracy in ((2, 0.6), (4, 0.4)):
        folder = run / f"checkpoint-{step}"
        shutil.copytree(adapter_dir, folder)
        for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
            (folder / name).write_bytes(os.urandom(64))
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
        evaluation = {
            "step": step,
            "accuracy": accuracy,
            "low": None,
            "high": None,
            "questions": 4,
            "samples": 2,
        }
        (folder / "heldout.json").write_text(json.dumps({"format": 1, "evaluations": [evaluation]}))
        seal_checkpoint(folder, step=step, recipe_name="gsm8k_tiny", run_id="r1", world_size=1)
    assert update_best_pointer(FolderStore(run))["checkpoint"] == "checkpoint-2"
    direct, local, remote = tmp_path / "direct.jsonl", tmp_path / "local.jsonl", tmp_path / "remote.jsonl"
    assert main([*ARGS, "--adapter", str(adapter_dir), "--out", str(direct)]) == 0
    assert main([*ARGS, "--adapter", str(run / "best"), "--out", str(local)]) == 0
    assert main([*ARGS, "--adapter", f"file://{run}/best", "--out", str(remote)]) == 0
    assert {r["adapter_path"] for r in lines(local)} == {str((run / "checkpoint-2").resolve())}
    [fetched] = {r["adapter_path"] for r in lines(remote)}
    assert fetched.endswith("checkpoint-2") and fetched != str((run / "checkpoint-2").resolve())  # a copy
    completions = [r["completion"] for r in lines(direct)]
    assert [r["completion"] for r in lines(local)] == completions == [r["completion"] for r in lines(remote)]
