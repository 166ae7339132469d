"""Find and read the training log (`trainer_state.json`) of a training output folder.

The Hugging Face Trainer writes ``checkpoint-<step>/trainer_state.json`` at every save and
``<output_dir>/trainer_state.json`` at the end; each holds the whole ``log_history`` up to its step.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from stats.records import InputError

_CHECKPOINT = re.compile(r"checkpoint-(\d+)")


def is_checkpoint(folder: str | Path) -> bool:
    """Whether ``folder`` is one of a run's ``checkpoint-<step>`` folders."""
    return bool(_CHECKPOINT.fullmatch(Path(folder).name))


def checkpoint_steps(output_dir: str | Path) -> list[int]:
    """Steps of the ``checkpoint-<step>`` folders in ``output_dir``, ascending."""
    return sorted(
        int(m.group(1))
        for p in Path(output_dir).iterdir()
        if p.is_dir() and (m := _CHECKPOINT.fullmatch(p.name))
    )


def _read_state(path: Path) -> dict:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: cannot read it as JSON ({err}).") from None
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise InputError(f"{path}: expected a Trainer state object with a 'log_history' list.")
    return state


def load_trainer_state(output_dir: str | Path) -> tuple[Path, dict]:
    """Load the most advanced ``trainer_state.json`` of a training run.

    Candidates are ``output_dir/trainer_state.json`` and the newest ``checkpoint-*/trainer_state.json`` that reads
    (highest step number, not newest file time): a checkpoint being saved, or cut off by a kill during its save,
    has none yet or a partial one, and the one before it still holds the log. The one with the larger
    ``global_step`` wins, the top-level file on a tie.

    Args:
        output_dir: The training output folder (or a single checkpoint folder).

    Returns:
        The chosen path and its parsed content.

    Raises:
        InputError: The folder is missing, or no trainer_state.json there reads (the message names the first).
    """
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        raise InputError(f"{output_dir} is not a folder: expected a training output_dir.")
    newest_first = [
        output_dir / f"checkpoint-{step}" / "trainer_state.json"
        for step in reversed(checkpoint_steps(output_dir))
    ]
    found, problems = [], []
    for paths in ([output_dir / "trainer_state.json"], newest_first):  # the first of each that reads
        for path in (path for path in paths if path.is_file()):
            try:
                found.append((path, _read_state(path)))
                break
            except InputError as e:
                problems.append(e)
    if not found and problems:
        raise problems[0]
    if not found:
        raise InputError(
            f"No trainer_state.json in {output_dir} or its checkpoint-* folders: is this a training "
            "output_dir? The Trainer writes it at every checkpoint save and at the end of training."
        )
    return max(found, key=lambda item: item[1].get("global_step") or 0)


def metric_series(log_history: list[dict], key: str) -> dict[int, float]:
    """Step -> value for one logged key, keeping only finite numbers (TRL logs None when a metric is NaN).

    Args:
        log_history: ``trainer_state["log_history"]``.
        key: A logged key such as ``"reward"`` or ``"rewards/correctness/mean"``.

    Returns:
        The finite values by step (a later entry for the same step wins).
    """
    series: dict[int, float] = {}
    for entry in log_history:
        value, step = entry.get(key), entry.get("step")
        if isinstance(step, int) and isinstance(value, (int, float)) and math.isfinite(value):
            series[step] = float(value)
    return series


def reward_names(log_history: list[dict]) -> list[str]:
    """Names of the rewards TRL logged as ``rewards/<name>/mean``, in first-seen order."""
    names: dict[str, None] = {}
    for entry in log_history:
        for key in entry:
            if key.startswith("rewards/") and key.endswith("/mean"):
                names.setdefault(key[len("rewards/") : -len("/mean")], None)
    return list(names)
