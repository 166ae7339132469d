"""A finished run whose checkpoints are in a store, launched again from another output folder: nothing trained,
and the way to a new run named in full (another output folder alone resumes the store's run again)."""

from __future__ import annotations

import json
import subprocess

import pytest
from _in_process import run_recipe

pytestmark = pytest.mark.slow


def run(out, store) -> subprocess.CompletedProcess:
    overrides = [f"trainer.output_dir={out}", f"checkpoint.uri={store}", "trainer.max_steps=4"]
    return run_recipe("gsm8k_tiny", *overrides)


def test_a_finished_stored_run_says_a_new_run_needs_a_new_store_too(tmp_path):
    store = tmp_path / "store"
    first = run(tmp_path / "first", store)
    assert first.returncode == 0, first.stderr[-3000:]
    again = run(tmp_path / "second", store)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (
        f"gsm8k_tiny already finished at step 4 (trainer.max_steps=4): nothing to train. The final adapter is in "
        f"{tmp_path / 'second'}. To train longer, raise trainer.max_steps; for a new run, set trainer.output_dir and "
        f"checkpoint.uri to new places ({store} holds this run, resumed from any output folder).\n"
    ) in again.stderr
    # The held-out results came along: before, `stats.compare SECOND/heldout/step-0.jsonl ...` found no file there.
    first_history = json.loads((tmp_path / "first" / "heldout" / "history.json").read_text())
    second_history = json.loads((tmp_path / "second" / "heldout" / "history.json").read_text())
    assert [e["step"] for e in second_history["evaluations"]] == [
        e["step"] for e in first_history["evaluations"]
    ]
    for entry in first_history["evaluations"]:
        records = entry["records"]
        assert (tmp_path / "second" / records).read_bytes() == (tmp_path / "first" / records).read_bytes(), (
            records
        )
