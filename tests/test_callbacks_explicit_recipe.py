"""An explicit ``checkpoint.resume`` goes through the same recipe check as ``resume: latest``: a checkpoint made with
another recipe is refused before anything is downloaded or cleared, whatever names it (a checkpoint-N, a run,
a run's best pointer, a local folder)."""

from __future__ import annotations

import pytest
from _callbacks_helpers import commit, make_checkpoint, prepare, publish_rated

from callbacks.best import update_best_pointer
from callbacks.errors import CheckpointError
from callbacks.local import write_marker
from callbacks.manifest import file_entries, seal_checkpoint
from callbacks.recipe_check import RecipeVet, saved_recipe_file
from callbacks.remote import scan_remote
from callbacks.stores import FolderStore


def vet_for(accepted: str):
    """A vet_recipe that accepts only checkpoints made with the recipe text ``accepted``."""
    return lambda saved: None if saved == accepted else f"made with {saved!r}, not {accepted!r}"


def remote(uri: str) -> str:
    return uri if uri.startswith("s3://") else f"file://{uri}"


@pytest.mark.parametrize("names", ["checkpoint-4", "", "best"])
def test_an_explicit_store_checkpoint_made_with_another_recipe_is_refused_before_its_download(
    target, tmp_path, names
):
    """Before, only resume: latest asked vet_recipe: an explicit URI resumed another recipe's checkpoint."""
    uri, endpoint, store = target
    publish_rated(store, tmp_path, 4, 0.5)  # made with recipe "r: 1\n"
    update_best_pointer(store)
    resume = f"{remote(uri)}/{names}".rstrip("/")
    out = tmp_path / "out"

    with pytest.raises(CheckpointError, match=r"made with 'r: 1\\n', not 'r: 2\\n'"):
        prepare(out, None, endpoint, resume=resume, vet_recipe=vet_for("r: 2\n"))
    assert not (out / "checkpoint-4").exists()

    plan = prepare(
        out, None, endpoint, resume=resume, vet_recipe=vet_for("r: 1\n")
    )  # the same recipe: resumed
    assert plan.resume_from == str(out / "checkpoint-4")
    plan.release()


def test_a_refused_explicit_resume_clears_nothing_even_with_overwrite(tmp_path):
    """The check comes before overwrite=true clears the output folder's other run for the resumed one."""
    other = FolderStore(tmp_path / "other")
    commit(other, tmp_path, 4, run_id="rB")  # made with "r: 1\n"
    out = tmp_path / "out"
    mine = seal_checkpoint_in(out, 6, "rA")
    write_marker(out, "rA", None)
    before = file_entries(mine)

    with pytest.raises(CheckpointError, match=r"made with 'r: 1\\n'"):
        prepare(
            out,
            None,
            resume=f"file://{other.root}/checkpoint-4",
            overwrite=True,
            vet_recipe=vet_for("r: 2\n"),
        )
    assert file_entries(mine) == before and not (out / "checkpoint-4").exists()


def seal_checkpoint_in(parent, step, run_id):
    folder = make_checkpoint(parent, step)
    seal_checkpoint(folder, step=step, recipe_name="tiny", run_id=run_id, world_size=1)
    return folder


def test_an_explicit_local_checkpoint_is_vetted_by_its_run_folders_recipe(tmp_path):
    """A local checkpoint holds no recipe.yaml of its own: its run folder's stands for it."""
    run = tmp_path / "run"
    seal_checkpoint_in(run, 2, "r3")
    (run / "recipe.yaml").write_text("r: 1\n")

    with pytest.raises(CheckpointError, match=r"made with 'r: 1\\n'"):
        prepare(tmp_path / "out", None, resume=str(run / "checkpoint-2"), vet_recipe=vet_for("r: 2\n"))
    with pytest.raises(
        CheckpointError, match=r"made with 'r: 1\\n'"
    ):  # the run folder: its newest checkpoint
        prepare(tmp_path / "out", None, resume=str(run), vet_recipe=vet_for("r: 2\n"))

    (run / "checkpoint-2" / "recipe.yaml").write_text("r: 2\n")  # its own copy (a downloaded one) comes first
    plan = prepare(tmp_path / "out", None, resume=str(run / "checkpoint-2"), vet_recipe=vet_for("r: 2\n"))
    assert plan.resume_from == str(run / "checkpoint-2")
    plan.release()


def test_an_explicit_run_skips_a_checkpoint_whose_recipe_is_damaged_and_vets_the_one_it_resumes(tmp_path):
    """A damaged recipe.yaml cannot vouch for its checkpoint (its download would fail): the older one is vetted."""
    store = FolderStore(tmp_path / "drive" / "run")
    commit(store, tmp_path, 2)
    commit(store, tmp_path, 4)
    store.write_bytes("checkpoint-4/recipe.yaml", b"r: 9\n")  # bit rot, the same size

    with pytest.raises(CheckpointError, match=r"made with 'r: 1\\n'"):
        prepare(tmp_path / "out", None, resume=f"file://{store.root}", vet_recipe=vet_for("r: 2\n"))
    assert not (tmp_path / "out" / "checkpoint-2").exists()
    with pytest.raises(CheckpointError, match=r"checkpoint-4: recipe.yaml does not match its SHA-256"):
        prepare(
            tmp_path / "out", None, resume=f"file://{store.root}/checkpoint-4", vet_recipe=vet_for("r: 1\n")
        )

    plan = prepare(tmp_path / "out", None, resume=f"file://{store.root}", vet_recipe=vet_for("r: 1\n"))
    assert plan.resume_from == str(tmp_path / "out" / "checkpoint-2")
    plan.release()


def test_a_local_runs_best_pointer_is_vetted_and_resumed_in_place(tmp_path):
    """A plain path to a run folder's best pointer names its checkpoint in that folder, used without a copy."""
    run = FolderStore(tmp_path / "run")
    publish_rated(run, tmp_path, 2, 0.9)
    publish_rated(run, tmp_path, 4, 0.5)
    update_best_pointer(run)  # checkpoint-2, the better rated
    out = tmp_path / "out"

    with pytest.raises(CheckpointError, match=r"made with 'r: 1\\n', not 'r: 2\\n'"):
        prepare(out, None, resume=str(run.root / "best"), vet_recipe=vet_for("r: 2\n"))
    plan = prepare(out, None, resume=str(run.root / "best"), vet_recipe=vet_for("r: 1\n"))
    assert plan.resume_from == str(run.root / "checkpoint-2")
    assert not (out / "checkpoint-2").exists()
    plan.release()


def test_saved_recipe_file_prefers_the_checkpoints_own_copy_then_its_run_folders(tmp_path):
    run = tmp_path / "run"
    checkpoint = make_checkpoint(run, 2)
    assert saved_recipe_file(checkpoint) is None  # neither: nothing to compare
    (run / "recipe.yaml").write_text("r: 1\n")
    assert saved_recipe_file(checkpoint) == run / "recipe.yaml"  # the run folder: by default the one above
    assert saved_recipe_file(checkpoint, tmp_path / "elsewhere") is None
    (checkpoint / "recipe.yaml").write_text("r: 2\n")
    assert saved_recipe_file(checkpoint) == checkpoint / "recipe.yaml"


def test_recipe_vet_refuses_only_a_known_recipe_its_rule_refuses():
    RecipeVet(None).check("r: 1\n")  # no rule: every checkpoint passes
    vet = RecipeVet(vet_for("r: 2\n"))
    vet.check(None)  # no recipe.yaml: unknown, nothing to compare
    vet.check("r: 2\n")
    with pytest.raises(CheckpointError, match=r"^made with 'r: 1\\n', not 'r: 2\\n'$"):
        vet.check("r: 1\n")


def test_a_store_checkpoint_without_a_recipe_is_vetted_by_the_run_folder_standing_for_it(tmp_path, caplog):
    """A checkpoint our sync did not write has no recipe.yaml in its manifest: the fallback run folder's recipe
    (or its local copy's own) is vetted; without a fallback it passes unchecked, said in the log."""
    store = FolderStore(tmp_path / "drive")
    commit(store, tmp_path, 4)
    [c] = scan_remote(store)
    del c.manifest["files"]["recipe.yaml"]
    vet, run = RecipeVet(vet_for("r: 2\n")), tmp_path / "out"

    with caplog.at_level("INFO", logger="callbacks.recipe_check"):
        assert vet.remote(store, c) is True
    assert f"{store.root}/checkpoint-4 holds no recipe.yaml: its recipe is not checked" in caplog.text
    run.mkdir()
    assert vet.remote(store, c, fallback=run) is True  # nothing there either
    (run / "recipe.yaml").write_text("r: 1\n")
    with pytest.raises(CheckpointError, match=r"made with 'r: 1\\n'"):
        vet.remote(store, c, fallback=run)
    (run / "checkpoint-4").mkdir()
    (run / "checkpoint-4" / "recipe.yaml").write_text("r: 2\n")  # the local copy's own comes first
    assert vet.remote(store, c, fallback=run) is True and not c.problems


def test_a_store_checkpoints_recipe_is_read_alone_and_checked_against_its_manifest(tmp_path):
    store = FolderStore(tmp_path / "drive")
    commit(store, tmp_path, 4)  # made with "r: 1\n"
    [c] = scan_remote(store)
    assert RecipeVet(vet_for("r: 1\n")).remote(store, c) is True and not c.problems
    with pytest.raises(CheckpointError, match=r"made with 'r: 1\\n'"):
        RecipeVet(vet_for("r: 2\n")).remote(store, c)

    store.write_bytes("checkpoint-4/recipe.yaml", b"r: 2\n")  # the same size, other bytes
    assert RecipeVet(vet_for("r: 2\n")).remote(store, c) is False
    assert c.problems == ["recipe.yaml does not match its SHA-256 in the manifest (altered or corrupt)"]
    store.delete(["checkpoint-4/recipe.yaml"])
    assert RecipeVet(None).remote(store, scan_remote(store)[0]) is False  # gone: nothing matches its SHA-256


def test_an_older_checkpoint_reached_after_a_failed_download_is_vetted_before_its_own(tmp_path):
    """Only the newest candidate is vetted before the launch; an older one the download falls back to (the newer
    one's bytes are corrupt) is vetted then, so another recipe's checkpoint is never resumed that way."""
    from callbacks.publish import RunInfo, publish_staged, stage_checkpoint

    store = FolderStore(tmp_path / "drive" / "run")
    older = make_checkpoint(tmp_path / "src", 2)
    publish_staged(
        store, stage_checkpoint(older, tmp_path / "staging", "r: 0\n"), 2, RunInfo("tiny", "", "r1")
    )
    commit(store, tmp_path, 4)  # made with "r: 1\n", the recipe the vet accepts
    size = len(store.read_bytes("checkpoint-4/adapter_model.safetensors"))
    store.write_bytes("checkpoint-4/adapter_model.safetensors", b"\0" * size)  # bit rot, the same size

    with pytest.raises(CheckpointError, match=r"made with 'r: 0\\n', not 'r: 1\\n'"):
        prepare(tmp_path / "out", None, resume=f"file://{store.root}", vet_recipe=vet_for("r: 1\n"))
    assert not (tmp_path / "out" / "checkpoint-2").exists()
