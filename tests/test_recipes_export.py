"""recipes/export.py: an adapter merged into its base loads as a plain transformers model and computes the same."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys

import pytest
import torch
from conftest import REPO

from recipes.builtin import resolve_builtin
from recipes.export import ExportError, export


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    """A LoRA adapter with random (non-zero) B matrices, so merging visibly changes the base."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(resolve_builtin("builtin:tiny-llama"))
    model = get_peft_model(base, LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False))
    folder = tmp_path_factory.mktemp("adapter") / "out"
    model.save_pretrained(folder)
    return folder


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_the_merged_model_loads_without_peft_and_matches_base_plus_adapter(adapter, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    out = export(adapter, tmp_path / "merged")
    assert (out / "config.json").is_file() and not (out / "adapter_config.json").exists()
    assert "merged into" in (out / "README.md").read_text()
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~mask  # shareable, not mkdtemp's 0700
    assert stat.S_IMODE((out / "model.safetensors").stat().st_mode) == 0o666 & ~mask
    merged = AutoModelForCausalLM.from_pretrained(out)
    assert not hasattr(merged, "peft_config")
    ids = torch.tensor([[1, 5, 9, 13, 17, 21]])
    base = AutoModelForCausalLM.from_pretrained(resolve_builtin("builtin:tiny-llama"))
    base_logits = logits(base, ids)
    with_adapter = logits(PeftModel.from_pretrained(base, str(adapter)), ids)
    assert torch.allclose(logits(merged, ids), with_adapter, atol=1e-4)
    assert not torch.allclose(logits(merged, ids), base_logits, atol=1e-3)  # the adapter is in the weights


def test_export_never_writes_into_an_existing_folder_or_from_a_folder_without_adapter(adapter, tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("keep")
    (tmp_path / "taken-2").mkdir()
    fix = f"name a new one (e.g. --out {tmp_path / 'taken-3'}), or move {tmp_path / 'taken'} away first."
    with pytest.raises(ExportError, match=re.escape(f"never into an existing one: {fix}")):
        export(adapter, tmp_path / "taken")  # it named no fix
    assert (tmp_path / "taken" / "mine.txt").read_text() == "keep"
    result = subprocess.run(
        [sys.executable, "recipes/export.py", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2 and "is not a folder" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "x").exists()


def test_export_to_a_uri_is_refused_not_written_to_a_local_folder_named_after_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        ExportError, match=r"^--out s3://bucket/merged: export writes a local folder, not to a URI"
    ):
        export(tmp_path / "no-adapter", "s3://bucket/merged")
    assert list(tmp_path.iterdir()) == []


def test_export_of_a_run_without_a_final_adapter_says_which_checkpoint_it_merged(adapter, tmp_path, caplog):
    """An interrupted run's folder resolves to its newest checkpoint: the log and the model card name it."""
    import logging
    import shutil

    from callbacks.manifest import seal_checkpoint

    run = tmp_path / "interrupted"
    checkpoint = shutil.copytree(adapter, run / "checkpoint-2")
    seal_checkpoint(checkpoint, step=2, recipe_name="gsm8k_tiny", run_id="r1", world_size=1)
    caplog.set_level(logging.INFO, logger="recipes.export")
    out = export(run, tmp_path / "merged")
    assert f"Merging the adapter in {checkpoint} (from {run})" in caplog.text
    assert f"The LoRA adapter at `{checkpoint}` (from `{run}`) merged into" in (out / "README.md").read_text()


def _checkpoint_with_history(folder, step: int, accuracies: dict[int, float], entry: dict, **extra) -> None:
    """A checkpoint folder's trainer_state.json (its step) and heldout.json (held-out accuracy by step)."""
    import json

    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    evaluations = [{**entry, "step": s, "accuracy": a} for s, a in accuracies.items()]
    (folder / "heldout.json").write_text(json.dumps({"format": 1, "evaluations": evaluations, **extra}))


def test_the_merged_card_names_its_base_and_the_merged_steps_heldout_accuracy(tmp_path):
    from recipes.export import merged_card

    _checkpoint_with_history(tmp_path, 20, {0: 0.2, 20: 0.3}, {"questions": 50, "samples": 4})
    card = merged_card("merged", "`run/checkpoint-20`", "meta-llama/Llama-3.1-8B-Instruct", tmp_path)
    assert card.startswith("---\nbase_model: meta-llama/Llama-3.1-8B-Instruct\n")
    assert "base_model" not in merged_card("merged", "`run`", "builtin:tiny-llama", tmp_path)  # not a Hub id
    assert "base_model: gpt2\n" in merged_card("merged", "`run`", "gpt2", tmp_path)  # an id without an owner
    assert (
        "Held-out accuracy at step 20 (50 questions x 4 samples, never trained on): 30.0%; the model before "
        "training: 20.0%." in card
    )
    (tmp_path / "heldout.json").write_text("{not json")  # a corrupt history costs the line, not the export
    assert "Held-out" not in merged_card("merged", "`run`", "builtin:tiny-llama", tmp_path)
    (tmp_path / "heldout.json").unlink()
    assert "Held-out" not in merged_card(
        "merged", "`run`", "builtin:tiny-llama", tmp_path
    )  # no history: no line


def test_evaluating_a_merged_export_names_its_base_as_the_other_side(adapter, tmp_path, capsys, monkeypatch):
    """Before, a merged export evaluated without --adapter was taken for a base model: the suggested command added
    --adapter ADAPTER to the merged model itself, and stats.compare put the merged file first, as the baseline.
    The adapter given by a relative path is recorded absolute: merged_from.json is read from anywhere."""
    import json
    import shlex

    from recipes.evaluate import main as evaluate

    monkeypatch.chdir(adapter.parent)
    merged = export(adapter.name, tmp_path / "merged")
    origin = json.loads((merged / "merged_from.json").read_text())
    base = resolve_builtin("builtin:tiny-llama")
    assert (
        origin["base_model"] == base
        and origin["adapter"] == str(adapter)
        and len(origin["adapter_sha"]) == 16
    )
    out = tmp_path / "merged.jsonl"
    argv = [
        "gsm8k_tiny",
        f"model.name_or_path={merged}",
        "--out",
        out,
        "--questions",
        "2",
        "--max-new-tokens",
        "4",
    ]
    assert evaluate([str(a) for a in argv]) == 0
    commands = [
        shlex.split(line) for line in capsys.readouterr().out.splitlines() if line.startswith("  python")
    ]
    other, compare = commands
    assert f"model.name_or_path={base}" in other and f"model.name_or_path={merged}" not in other
    assert "--adapter" not in other and other[other.index("--out") + 1] == str(tmp_path / "merged-base.jsonl")
    assert compare[-2:] == [str(tmp_path / "merged-base.jsonl"), str(out)]  # the base is the baseline
    (merged / "merged_from.json").write_text("{}")
    assert evaluate([str(a) for a in argv]) == 2
    assert (
        "merged_from.json: expected the JSON export.py writes, with a base_model key"
        in capsys.readouterr().err
    )


def test_the_merged_card_keeps_the_runs_alarms_and_early_stop(tmp_path):
    """The adapter's card named a reward-hacking alarm and the stop it caused; the merged model's card dropped both."""
    from recipes.export import merged_card

    _checkpoint_with_history(
        tmp_path, 50, {0: 0.155, 50: 0.0}, {"questions": 200, "samples": 1},
        alarms=[{"kind": "reward_hacking", "steps": [0, 50], "message": "reward rose while accuracy fell"}],
        stopped={"step": 50, "reason": "alarm reward_hacking"},
    )  # fmt: skip
    card = merged_card("merged", "`run`", "builtin:tiny-llama", tmp_path)
    assert "Alarm reward_hacking at step 50: reward rose while accuracy fell" in card
    assert "The run ended early at step 50: alarm reward_hacking." in card
