"""A second launch on a finished run: nothing trained, nothing overwritten; a changed recipe is refused."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import yaml
from _in_process import run_recipe

from callbacks.manifest import MANIFEST_NAME, local_checkpoint_problems
from recipes.recipe import RecipeError, load_recipe
from recipes.rerun import changed_keys, finished_step, keep_final_adapter

pytestmark = pytest.mark.slow
# CardAtSave: what README.md held at each checkpoint, the card of a run stopped there.
ARGS = ["trainer.max_steps=4", "checkpoint.every_steps=2", "callbacks=[{path: '_plugins:CardAtSave'}]"]
STEP_LINE = re.compile(r"^step \d+/\d+  reward ", re.MULTILINE)  # one per logged training step


def run(out, *overrides) -> subprocess.CompletedProcess:
    return run_recipe("gsm8k_tiny", f"trainer.output_dir={out}", *ARGS, *overrides)


def snapshot(folder) -> dict:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("rerun") / "run"
    result = run(out)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def test_the_model_card_names_the_base_recipe_data_and_final_metrics(finished):
    card = (finished / "README.md").read_text()
    # The Hub takes a model id as base_model, not builtin:tiny-llama: the body names it, the front matter does not.
    assert "- Base model: `builtin:tiny-llama`" in card and "base_model:" not in card and "[None]" not in card
    assert "the grpo-recipes recipe `gsm8k_tiny`" in card
    assert "source `samples/gsm8k_train_sample.jsonl`, split `train`" in card
    assert "- Training: 4 of 4 steps" in card and "Final training metrics (step 4):" in card
    assert "mean correctness reward:" in card and f"python recipes/export.py {finished}" in card
    assert "Held-out accuracy (4 questions x 2 samples, never trained on): " in card
    # Mid-run there was no card: TRL's draft named the base model [None].
    assert json.loads((finished / "cards-at-save.json").read_text()) == {"2": None, "4": None}


def test_every_saved_checkpoint_is_sealed_with_a_manifest_that_verifies(finished):
    for step in (2, 4):
        folder = finished / f"checkpoint-{step}"
        assert (folder / MANIFEST_NAME).is_file() and local_checkpoint_problems(folder) == []


def test_a_finished_run_rerun_trains_nothing_and_changes_nothing(finished):
    before = snapshot(finished)
    result = run(finished)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "gsm8k_tiny already finished at step 4 (trainer.max_steps=4): nothing to train" in result.stderr
    assert not STEP_LINE.search(result.stdout + result.stderr)  # no training step logged
    assert snapshot(finished) == before
    assert not (finished / "checkpoint-5").exists()


def test_a_changed_recipe_is_refused_naming_the_changed_keys(finished):
    before = snapshot(finished)
    result = run(finished, "trainer.learning_rate=0.5", "lora.r=4")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"error: {finished} holds a run made with a different recipe (")
    made = load_recipe("gsm8k_tiny").config
    assert f"trainer.learning_rate: {made['trainer']['learning_rate']!r} -> 0.5" in error
    assert f"lora.r: {made['lora']['r']!r} -> 4" in error
    assert f"trainer.output_dir={finished}-2" in error
    assert snapshot(finished) == before


def test_an_explicit_resume_with_a_changed_recipe_branches_a_new_run_and_says_what_changed(
    finished, tmp_path
):
    """A lower learning rate from a chosen checkpoint is a new run branched from it: trained, with a warning naming
    the changed keys; the checkpoint's own run is left as it was."""
    out, checkpoint, before = tmp_path / "fork", finished / "checkpoint-2", snapshot(finished)
    result = run(out, f"checkpoint.resume={checkpoint}", "trainer.learning_rate=0.5")
    assert result.returncode == 0, result.stderr[-3000:]
    made = load_recipe("gsm8k_tiny").config
    assert f"checkpoint.resume={checkpoint} was made with a different recipe (" in result.stderr
    assert f"trainer.learning_rate: {made['trainer']['learning_rate']!r} -> 0.5" in result.stderr
    assert "this run branches from it with this launch's settings" in result.stderr
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 4  # from step 2 to ARGS' 4
    assert yaml.safe_load((out / "recipe.yaml").read_text())["trainer"]["learning_rate"] == 0.5
    # Trained at 0.5 too: the checkpoint's scheduler state kept the old rate, the weights matched an unbranched run.
    rates = {e["step"]: e["learning_rate"] for e in state["log_history"] if "learning_rate" in e}
    assert rates == {1: made["trainer"]["learning_rate"], 2: made["trainer"]["learning_rate"], 3: 0.5, 4: 0.5}
    assert f"Learning rate from this launch: 0.5 ({checkpoint} was trained with 0.001)" in result.stderr
    weights = "checkpoint-4/adapter_model.safetensors"
    assert (out / weights).read_bytes() != (finished / weights).read_bytes()
    assert snapshot(finished) == before


def test_a_branch_keeps_the_adapters_shape_and_a_checkpoint_copied_alone_is_still_checked(finished, tmp_path):
    """lora.r 8 -> 4 was allowed as a branch and died loading the adapter (a 70-line traceback); a checkpoint
    folder copied alone held no recipe.yaml, so nothing was checked and no branch was said."""
    alone = tmp_path / "copy" / "checkpoint-2"
    alone.parent.mkdir()
    shutil.copytree(finished / "checkpoint-2", alone)  # without the run folder's recipe.yaml beside it
    assert (alone / "recipe.yaml").read_text() == (finished / "recipe.yaml").read_text()
    result = run(tmp_path / "fork", f"checkpoint.resume={alone}", "lora.r=4")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    made = load_recipe("gsm8k_tiny").config["lora"]["r"]
    assert (
        f"error: checkpoint.resume={alone} cannot branch with another lora.r: {made} -> 4: its adapter"
        in (result.stderr)
    )
    assert not (tmp_path / "fork" / "checkpoint-4").exists()
    result = run(tmp_path / "fork2", f"checkpoint.resume={alone}", "trainer.learning_rate=0.5")
    assert (
        result.returncode == 0 and "was made with a different recipe (trainer.learning_rate" in result.stderr
    )


def test_an_explicit_resume_may_raise_max_steps(finished, tmp_path):
    """What a continued run may change (MAY_CHANGE) passes the explicit resume's check as it does latest's."""
    out = tmp_path / "fork"
    result = run(out, f"checkpoint.resume={finished / 'checkpoint-4'}", "trainer.max_steps=6")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 6
    assert len(STEP_LINE.findall(result.stdout + result.stderr)) == 2  # steps 5 and 6 only


def _no_final_save(out):
    for name in ("adapter_model.safetensors", "adapter_config.json", "trainer_state.json", "recipe.yaml"):
        (out / name).unlink()


def _killed_mid_save(out):  # the adapter half written, the state not yet: the final save writes in place
    adapter = out / "adapter_model.safetensors"
    adapter.write_bytes(adapter.read_bytes()[: adapter.stat().st_size // 2])
    (out / "trainer_state.json").unlink()


def _an_earlier_steps_adapter(
    out,
):  # the run went on from the store on another machine; this folder stayed behind
    for name in ("adapter_model.safetensors", "trainer_state.json"):
        (out / name).write_bytes((out / "checkpoint-2" / name).read_bytes())


def _copy(finished, tmp_path):
    out = tmp_path / "run"
    subprocess.run(["cp", "-r", str(finished), str(out)], check=True)
    return out


@pytest.mark.parametrize("damage", [_no_final_save, _killed_mid_save, _an_earlier_steps_adapter])
def test_a_final_folder_that_is_not_the_last_checkpoints_is_restored_from_it(finished, tmp_path, damage):
    """Before, only a missing adapter was restored: a half-written one, or step 2's, was called the final adapter."""
    out = _copy(finished, tmp_path)
    damage(out)
    recipe, last = load_recipe("gsm8k_tiny", [f"trainer.output_dir={out}", *ARGS]), out / "checkpoint-4"
    assert keep_final_adapter(recipe, last, out)
    for name in ("adapter_model.safetensors", "adapter_config.json", "trainer_state.json"):
        assert (out / name).read_bytes() == (last / name).read_bytes()
    assert not (out / "optimizer.pt").exists() and (out / "recipe.yaml").is_file()
    card = (out / "README.md").read_text()  # the project's card, not the checkpoint's peft template
    assert "- Training: 4 of 4 steps" in card and "Held-out accuracy (4 questions x 2 samples" in card
    again = snapshot(out)
    assert not keep_final_adapter(recipe, last, out) and snapshot(out) == again  # complete now: left as it is


def test_a_rerun_after_a_kill_during_the_final_save_finishes_it(finished, tmp_path):
    out = _copy(finished, tmp_path)
    _killed_mid_save(out)
    result = run(out)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Final adapter restored in {out} from {out / 'checkpoint-4'} (step 4)" in result.stderr
    assert "already finished at step 4" in result.stderr
    adapter = "adapter_model.safetensors"
    assert (out / adapter).read_bytes() == (out / "checkpoint-4" / adapter).read_bytes()


def test_raising_max_steps_continues_the_run(finished, tmp_path):
    out = _copy(finished, tmp_path)
    result = run(out, "trainer.max_steps=6")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 6
    assert (out / "checkpoint-6").is_dir()
    assert len(STEP_LINE.findall(result.stdout + result.stderr)) == 2  # steps 5 and 6 only


def test_a_continued_run_logs_and_saves_at_its_new_intervals(finished, tmp_path):
    """Before, the trainer took both intervals from the checkpoint's trainer_state.json: the run logged every step
    and saved checkpoint-6, though checkpoint.every_steps and trainer.logging_steps may change (MAY_CHANGE)."""
    out = _copy(finished, tmp_path)
    result = run(out, "trainer.max_steps=8", "checkpoint.every_steps=4", "trainer.logging_steps=2")
    assert result.returncode == 0, result.stderr[-3000:]
    state = json.loads((out / "trainer_state.json").read_text())
    assert (state["save_steps"], state["logging_steps"]) == (4, 2)
    assert len(STEP_LINE.findall(result.stdout + result.stderr)) == 2  # steps 6 and 8 only
    assert "checkpoint-6" not in result.stderr


@pytest.mark.parametrize(("step", "finished"), [(2, None), (4, 4)])
def test_a_run_trained_by_epochs_is_finished_at_its_last_step_not_at_any(tmp_path, step, finished):
    """With trainer.max_steps=-1, a run stopped at checkpoint-2 of 4 was "already finished at step 2"."""
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": step, "max_steps": 4}))
    recipe = load_recipe("gsm8k_tiny", ["trainer.max_steps=-1", "trainer.num_train_epochs=1"])
    assert finished_step(recipe, str(tmp_path)) == finished


def test_changed_keys_ignore_what_a_continued_run_may_change():
    before = load_recipe("gsm8k_tiny").config
    after = load_recipe(
        "gsm8k_tiny",
        [
            "trainer.max_steps=99",
            "trainer.beta=0.1",
            "trainer.output_dir=elsewhere",
            "checkpoint.uri=/mnt/drive",
            "checkpoint.every_steps=8",  # before, refused as trainer.save_steps, the runner's copy of it
        ],
    ).config
    assert changed_keys(before, after) == ["trainer.beta: 0.0 -> 0.1"]


@pytest.mark.parametrize(
    "override",
    [
        "trainer.project=mine",
        "trainer.run_name=second",
        "trainer.log_completions=true",
        "trainer.ddp_timeout=300",
    ],
)
def test_logging_and_waiting_may_change_too(override):
    """Before, these were refused, though the README lets a continued run change how it logs (trainer.project is
    its advice for Trackio) and suggests trainer.ddp_timeout after a hang, which is when a run is launched again."""
    assert changed_keys(load_recipe("gsm8k_tiny").config, load_recipe("gsm8k_tiny", [override]).config) == []


def test_a_recipe_saved_by_an_earlier_version_still_matches():
    """recipe.yaml files written before renamed trainer keys were left out hold their old names (at GRPOConfig's
    defaults), and a run resolved without a base recipe had activation_checkpointing null: both continue."""
    now = load_recipe("gsm8k_tiny").config
    old_names = {
        "gradient_checkpointing": True,
        "gradient_checkpointing_kwargs": None,
        "use_transformers_paged": False,
    }
    saved = {**now, "trainer": {**now["trainer"], **old_names}}
    assert changed_keys(saved, now) == []
    saved["trainer"]["activation_checkpointing"] = True
    assert changed_keys(saved, now) == ["trainer.activation_checkpointing: True -> False"]
    base_less = load_recipe("gsm8k_tiny", ["trainer.activation_checkpointing=true"]).config
    saved = {**base_less, "trainer": {**base_less["trainer"], **old_names, "activation_checkpointing": None}}
    assert changed_keys(saved, base_less) == []


def test_a_token_saved_by_an_earlier_version_is_neither_printed_nor_blocks_the_run():
    now = load_recipe("gsm8k_tiny").config
    saved = {**now, "trainer": {**now["trainer"], "hub_token": "hf_SavedSecret"}}
    assert changed_keys(saved, now) == []


def test_a_changed_recipe_resumed_from_a_store_names_the_store():
    """A new output folder resuming a store's run: the store holds that run, not the (new, empty) folder."""
    from recipes.rerun import changed_recipe_refusal

    made = load_recipe("gsm8k_tiny", ["trainer.learning_rate=0.5"]).to_yaml()
    recipe = load_recipe("gsm8k_tiny", ["trainer.output_dir=new", "checkpoint.uri=s3://b/runs/x"])
    assert re.match(
        r"^s3://b/runs/x holds a run made with a different recipe \(trainer.learning_rate: 0.5",
        changed_recipe_refusal(recipe, made),
    )
    assert changed_recipe_refusal(recipe, recipe.to_yaml()) is None


def test_a_changed_recipe_is_refused_before_the_stores_checkpoint_is_downloaded(tmp_path):
    """Before, the store's checkpoint was downloaded and the run marker written, and only then the launch refused."""
    from _callbacks_helpers import make_checkpoint

    from callbacks.publish import RunInfo, publish_staged, stage_checkpoint
    from callbacks.stores import FolderStore
    from common.errors import UserError
    from recipes.run import train

    made = load_recipe("gsm8k_tiny", ["trainer.learning_rate=0.5", *ARGS]).to_yaml()
    staged = stage_checkpoint(make_checkpoint(tmp_path / "src", 2), tmp_path / "staging", made)
    publish_staged(FolderStore(tmp_path / "drive"), staged, 2, RunInfo("gsm8k_tiny", made, "r1"))
    out = tmp_path / "new"
    recipe = load_recipe(
        "gsm8k_tiny", [f"trainer.output_dir={out}", f"checkpoint.uri={tmp_path / 'drive'}", *ARGS]
    )
    with pytest.raises(UserError, match=r"a different recipe \(trainer.learning_rate: 0.5 -> [^;]*\), and"):
        train(recipe)
    assert not out.exists()  # nothing downloaded, no run marker, no recipe.yaml


def test_a_resume_with_another_number_of_processes_is_said_or_under_deepspeed_refused(
    tmp_path, monkeypatch, caplog
):
    """DeepSpeed cannot load 2 ranks' optimizer shards in 1 process (a traceback after the model loaded); DDP can,
    but each step then takes half the completions."""
    from _callbacks_helpers import make_checkpoint

    from callbacks.manifest import seal_checkpoint
    from recipes.rerun import check_process_count

    folder = make_checkpoint(tmp_path, 4, world_size=2)
    seal_checkpoint(folder, step=4, recipe_name="gsm8k_tiny", run_id="r1", world_size=2)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    with pytest.raises(
        RecipeError, match=r"written by 2 processes and this launch has 1: DeepSpeed .* --num_processes 2"
    ):
        check_process_count(str(folder))
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "false")
    check_process_count(str(folder))
    assert "written by 2 processes, with 1: each step now takes 1/2 as many completions" in caplog.text
    caplog.clear()
    monkeypatch.setenv("WORLD_SIZE", "2")
    check_process_count(str(folder))
    assert caplog.text == ""
