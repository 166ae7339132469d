"""The held-out history file: its format, and reading it back (one place for the checkpoint's manifest, resume
and the runner). callbacks/heldout.py writes it: ``OUTPUT_DIR/heldout/history.json`` after every evaluation, and
``checkpoint-N/heldout.json`` (the evaluations up to step N) in every checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

from callbacks.errors import CheckpointError

FORMAT = 1
HISTORY_NAME = "heldout.json"  # inside each checkpoint-N folder


def empty_history() -> dict:
    """The history of a run that has not evaluated yet."""
    return {"format": FORMAT, "evaluations": [], "alarms": [], "stopped": None, "resumed_stops": []}


def read_history(path: Path) -> dict | None:
    """A history file (None when absent); CheckpointError naming the file when it is not one."""
    if not path.is_file():
        return None
    try:
        history = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path} is not a held-out history (invalid JSON: {e}).") from None
    evaluations = history.get("evaluations") if isinstance(history, dict) else None
    if (
        not isinstance(evaluations, list)
        or history.get("format") != FORMAT
        or not all(isinstance(e, dict) and type(e.get("step")) is int for e in evaluations)
    ):
        raise CheckpointError(
            f'{path} is not a held-out history of format {FORMAT} ({{"format": 1, "evaluations": [{{"step": N, '
            "...}], ...}); it was not written by the held-out evaluation (recipe section heldout)."
        )
    return {"alarms": [], "stopped": None, "resumed_stops": [], **history}


def resume_past_stop(history: dict) -> dict:
    """The history a launch resuming a stopped run goes on with: resuming is a deliberate choice to go on, so the
    stop is no longer in force, but it stays on record in ``resumed_stops`` (for the model card and the curves)."""
    if not history["stopped"]:
        return history
    return {**history, "stopped": None, "resumed_stops": [*history["resumed_stops"], history["stopped"]]}


def resumed_at(history: dict) -> int | None:
    """The step of the last stop a launch resumed past (None if none): the alarms and the patience that
    stopped the run start counting afresh from there."""
    return max((stop["step"] for stop in history.get("resumed_stops") or []), default=None)


def history_until(history: dict, step: int) -> dict:
    """The history as it stood at ``step``: a resumed run forgets what came after its checkpoint."""
    return {
        **history,
        "evaluations": [e for e in history["evaluations"] if e["step"] <= step],
        "alarms": [a for a in history["alarms"] if a["steps"][1] <= step],
        "stopped": history["stopped"] if history["stopped"] and history["stopped"]["step"] <= step else None,
        "resumed_stops": [s for s in history["resumed_stops"] if s["step"] <= step],
    }


def restore_records(history: dict, checkpoint: Path, output_dir: Path) -> None:
    """Put back a resumed history's records (``heldout/step-N.jsonl``) from its checkpoint: a run resumed from the
    store on another machine (a new Colab runtime) has none of its own to compare. A local file is kept: it is this
    machine's record of that evaluation, possibly graded again since (recipes/regrade.py), which the checkpoint's
    older copy would undo."""
    from recipes.atomic import copy_file_atomically

    for entry in history["evaluations"]:
        saved, here = checkpoint / entry["records"], output_dir / entry["records"]
        if saved.is_file() and not here.exists():
            here.parent.mkdir(parents=True, exist_ok=True)
            copy_file_atomically(saved, here)
