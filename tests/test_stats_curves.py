"""Training curves from trainer_state.json (stats.trainer_state, `python -m stats.curves`)."""

from __future__ import annotations

import math

import pytest
from _callbacks_helpers import make_checkpoint
from _stats_helpers import run_cli, write_trainer_state

from callbacks.publish import RunInfo, publish_staged, stage_checkpoint
from callbacks.stores import FolderStore
from stats.curves import draw_curves, main
from stats.records import InputError
from stats.trainer_state import checkpoint_steps, load_trainer_state, metric_series, reward_names


@pytest.fixture
def run_dir(tmp_path):
    """checkpoint-3 and checkpoint-10 (newer by step, older by name order); KL never logged."""
    write_trainer_state(tmp_path / "checkpoint-3" / "trainer_state.json", [1, 2, 3])
    write_trainer_state(tmp_path / "checkpoint-10" / "trainer_state.json", list(range(1, 11)), kl=False)
    (tmp_path / "checkpoint-notes").mkdir()  # not a checkpoint: no step number
    return tmp_path


def test_newest_checkpoint_by_step_number_is_read(run_dir):
    assert checkpoint_steps(run_dir) == [3, 10]
    path, state = load_trainer_state(run_dir)
    assert path == run_dir / "checkpoint-10" / "trainer_state.json"
    assert state["global_step"] == 10


def test_top_level_state_wins_when_it_is_further_along(run_dir):
    write_trainer_state(run_dir / "trainer_state.json", list(range(1, 13)))
    assert load_trainer_state(run_dir)[0] == run_dir / "trainer_state.json"


def test_a_checkpoint_cut_off_in_its_save_gives_way_to_the_one_before(run_dir):
    """Before, a run killed while saving checkpoint-12 (no trainer_state.json yet) or checkpoint-11 (a partial one)
    had no curves: the newest checkpoint folder was the only one read."""
    (run_dir / "checkpoint-11").mkdir()
    (run_dir / "checkpoint-11" / "trainer_state.json").write_text('{"log_history": [')
    (run_dir / "checkpoint-12").mkdir()
    (run_dir / "checkpoint-12" / "adapter_model.safetensors").write_bytes(b"\0" * 8)
    assert load_trainer_state(run_dir)[0] == run_dir / "checkpoint-10" / "trainer_state.json"


def test_series_drop_nan_none_and_missing_values(run_dir):
    history = load_trainer_state(run_dir)[1]["log_history"]
    reward = metric_series(history, "reward")
    assert 2 not in reward and reward[1] == pytest.approx(1.1) and len(reward) == 9
    assert 3 not in metric_series(history, "rewards/format/mean")
    assert 1 not in metric_series(history, "completions/clipped_ratio")
    assert metric_series(history, "kl") == {}
    assert all(math.isfinite(v) for v in metric_series(history, "loss").values())
    assert reward_names(history) == ["correctness", "format"]


def test_panels_show_data_bands_checkpoints_and_not_logged(run_dir):
    history = load_trainer_state(run_dir)[1]["log_history"]
    fig, missing = draw_curves(history, [3, 10], "run")
    axes = {ax.get_title(): ax for ax in fig.axes}
    assert missing == ["heldout/accuracy", "kl"]
    kl = axes["KL to the reference model"]
    assert not kl.lines and [t.get_text() for t in kl.texts] == ["kl\nnot logged"]
    heldout = axes["Held-out accuracy"]
    assert not heldout.lines
    assert [t.get_text() for t in heldout.texts] == ["held-out accuracy\nnot logged (recipe section heldout)"]
    reward = axes["Reward"]
    labels = [t.get_text() for t in reward.get_legend().get_texts()]
    assert "mean ± std over the step's completions (TRL logs no per-step min/max)" in labels
    assert "checkpoint" in labels
    for ax in fig.axes:
        if ax.lines:  # every panel with data marks both checkpoints
            assert sorted(line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == ":") == [3, 10]
    per_reward = axes["Reward by function (mean, before weights)"]
    assert {"correctness", "format"} <= {line.get_label() for line in per_reward.lines}
    length_labels = [t.get_text() for t in axes["Completion length (tokens)"].get_legend().get_texts()]
    assert "min-max of a step's completions (averaged per log)" in length_labels
    low, high = axes["Share of completions clipped at max length"].get_ylim()
    assert low == 0 and 0.05 <= high <= 1  # a share is read from 0, not from its own smallest value


def test_reward_without_std_says_so(run_dir):
    history = [
        {k: v for k, v in e.items() if k != "reward_std"}
        for e in load_trainer_state(run_dir)[1]["log_history"]
    ]
    fig, missing = draw_curves(history, [], "run")
    reward = next(ax for ax in fig.axes if ax.get_title() == "Reward")
    assert reward.lines[0].get_label() == "reward mean (reward_std not logged)"
    assert "reward_std" in missing


def test_cli_writes_png_and_reports(capsys, run_dir, tmp_path):
    out = tmp_path / "curves.png"
    assert main([str(run_dir), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = capsys.readouterr().out
    assert "checkpoint-10/trainer_state.json (11 log entries); checkpoints at steps: 3, 10" in text
    assert "not logged (panels say so): heldout/accuracy, kl" in text
    assert "held-out accuracy: not logged (recipe section heldout)" in text
    assert main([str(run_dir)]) == 0 and (run_dir / "curves.png").is_file()  # default: OUTPUT_DIR/curves.png


def test_a_checkpoints_curves_go_beside_it_not_into_it(capsys, run_dir):
    """They went into checkpoint-10/, among the files its manifest lists, where retention deletes them."""
    before = sorted(p.name for p in (run_dir / "checkpoint-10").iterdir())
    assert main([str(run_dir / "checkpoint-10")]) == 0
    assert sorted(p.name for p in (run_dir / "checkpoint-10").iterdir()) == before
    assert (run_dir / "curves-checkpoint-10.png").is_file()
    assert f"wrote {run_dir / 'curves-checkpoint-10.png'}" in capsys.readouterr().out


def test_a_run_uri_is_fetched_and_its_curves_land_in_the_current_folder(capsys, tmp_path, monkeypatch):
    """Before, a run URI was "not a folder": notebook 4 fetched the checkpoint first, the command line could not."""
    monkeypatch.setenv("GRPO_RECIPES_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    store = FolderStore(tmp_path / "drive" / "llama")
    for step in (3, 6):
        folder = make_checkpoint(tmp_path / "src", step)
        write_trainer_state(folder / "trainer_state.json", list(range(1, step + 1)))
        publish_staged(
            store, stage_checkpoint(folder, tmp_path / "staging", "r: 1\n"), step, RunInfo("t", "", "r1")
        )
    run = f"file://{tmp_path}/drive/llama"
    assert main([run]) == 0
    text = capsys.readouterr().out
    # The URI is named, not the cache folder; the marks are the store's checkpoints.
    assert f"read {run}: checkpoint-6/trainer_state.json (7 log entries); checkpoints at steps: 3, 6" in text
    assert "wrote curves-llama.png" in text and (tmp_path / "curves-llama.png").read_bytes()[:4] == b"\x89PNG"
    whole = (tmp_path / "curves-llama.png").read_bytes()
    assert main([f"{run}/checkpoint-3"]) == 0  # beside the whole run's image, not over it
    text = capsys.readouterr().out
    assert "checkpoint-3/trainer_state.json (4 log entries); checkpoints at steps: 3\n" in text
    assert (
        "wrote curves-llama-checkpoint-3.png" in text
        and (tmp_path / "curves-llama.png").read_bytes() == whole
    )
    # The store's folder given as a path is read as the store it is: curves.png went into the store's prefix.
    (tmp_path / "curves-llama.png").unlink()
    store_files = sorted(p.relative_to(store.root) for p in store.root.rglob("*"))
    assert main([str(tmp_path / "drive" / "llama")]) == 0
    assert (
        "checkpoints at steps: 3, 6" in capsys.readouterr().out and (tmp_path / "curves-llama.png").is_file()
    )
    assert sorted(p.relative_to(store.root) for p in store.root.rglob("*")) == store_files
    assert main([f"file://{tmp_path}/drive/llama/checkpoint-9"]) == 2
    assert "no complete checkpoint there" in capsys.readouterr().err
    assert main([str(tmp_path / "src"), "--endpoint-url", "http://127.0.0.1:9"]) == 2
    assert "--endpoint-url is for an s3:// URI" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        (lambda d: None, "No trainer_state.json in"),
        (lambda d: (d / "trainer_state.json").write_text("{not json"), "cannot read it as JSON"),
        (lambda d: (d / "trainer_state.json").write_text('{"global_step": 1}'), "with a 'log_history' list"),
        (lambda d: (d / "trainer_state.json").write_text('{"log_history": []}'), "no logged step yet"),
    ],
    ids=["missing", "malformed", "no-history", "empty-history"],
)
def test_unusable_output_dirs_are_input_errors(capsys, tmp_path, setup, expected):
    setup(tmp_path)
    assert main([str(tmp_path)]) == 2
    assert expected in capsys.readouterr().err


def test_missing_folder_is_an_error(tmp_path):
    with pytest.raises(InputError, match="is not a folder"):
        load_trainer_state(tmp_path / "nope")


def test_cli_subprocess_error_has_no_traceback(tmp_path):
    proc = run_cli("stats.curves", tmp_path / "nope", "--out", tmp_path / "c.png")
    assert proc.returncode == 2
    assert "is not a folder" in proc.stderr and "Traceback" not in proc.stderr
