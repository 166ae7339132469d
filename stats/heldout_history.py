"""Read the held-out evaluations of a training run and summarise them as a text table.

The held-out callback writes ``OUTPUT_DIR/heldout/history.json`` after every evaluation and a copy holding the
evaluations up to step N into each ``checkpoint-N/heldout.json`` (format 1: ``evaluations``, ``alarms``,
``stopped``, ``resumed_stops``). The most advanced of these files is read; without any, the ``heldout/*`` metrics
the callback logged into the trainer's ``log_history`` are used (no alarms or stop then).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

from common.ranking import accuracy_text, best_by_accuracy, best_text
from stats.records import InputError
from stats.trainer_state import checkpoint_steps, metric_series

_FIX = (
    "The held-out callback writes this file; if it was edited or cut short, delete it and the curves fall "
    "back to the heldout/* metrics in trainer_state.json."
)


@dataclass(frozen=True)
class Evaluation:
    """One held-out evaluation; ``low``/``high`` (the 95% interval), ``unparseable`` and ``reward`` (the mean
    training reward logged since the previous evaluation) may be unknown, and ``accuracy`` is None when the grader
    settled none of its samples (nothing was measured: shown as n/a and a gap, never as 0%)."""

    step: int
    accuracy: float | None
    low: float | None = None
    high: float | None = None
    unparseable: float | None = None
    reward: float | None = None
    saved: bool = True  # a checkpoint was saved at this step (held-out evaluations may come more often)


@dataclass(frozen=True)
class Alarm:
    """A held-out alarm: ``steps`` are the steps it compares, the last one where it fired."""

    kind: str
    steps: tuple[int, ...]
    message: str


@dataclass(frozen=True)
class HeldoutHistory:
    """The held-out evaluations of one run in step order, its alarms, and why it stopped early (if it did)."""

    source: str
    evaluations: tuple[Evaluation, ...]
    alarms: tuple[Alarm, ...] = ()
    stopped: tuple[int, str] | None = None
    resumed_stops: tuple[tuple[int, str], ...] = ()  # stops a later launch resumed past


def _number(value, path: Path, where: str, optional: bool = True) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        expected = "a finite number or null" if optional else "a finite number"
        raise InputError(f"{path}: {where} is {value!r}, expected {expected}. {_FIX}")
    return float(value)


def _step(value, path: Path, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{path}: {where} is {value!r}, expected a step number (an integer). {_FIX}")
    return value


def _evaluation(entry, path: Path, i: int) -> Evaluation:
    where = f"evaluations[{i}]"
    if not isinstance(entry, dict):
        raise InputError(f"{path}: {where} is not an object with 'step' and 'accuracy'. {_FIX}")
    values = {
        k: _number(entry.get(k), path, f"{where}.{k}") for k in ("low", "high", "unparseable", "reward")
    }
    # null: the grader settled none of the step's samples (callbacks/heldout.py); a missing accuracy is no evaluation.
    accuracy = _number(entry.get("accuracy"), path, f"{where}.accuracy", optional="accuracy" in entry)
    saved = entry.get("saved", True)
    if not isinstance(saved, bool):
        raise InputError(f"{path}: {where}.saved is {saved!r}, expected true or false. {_FIX}")
    return Evaluation(_step(entry.get("step"), path, f"{where}.step"), accuracy, **values, saved=saved)


def _alarm(entry, path: Path, i: int) -> Alarm:
    where = f"alarms[{i}]"
    steps = entry.get("steps") if isinstance(entry, dict) else None
    if not isinstance(steps, list) or len(steps) < 2 or not isinstance(entry.get("kind"), str):
        raise InputError(f"{path}: {where} needs a 'kind' string and a 'steps' list of two steps. {_FIX}")
    return Alarm(
        entry["kind"], tuple(_step(s, path, f"{where}.steps") for s in steps), str(entry.get("message", ""))
    )


def _stop(entry, path: Path, where: str, expected: str = "") -> tuple[int, str]:
    if not (isinstance(entry, dict) and isinstance(entry.get("reason"), str)):
        raise InputError(f'{path}: \'{where}\' must be {expected}{{"step": N, "reason": "..."}}. {_FIX}')
    return _step(entry.get("step"), path, f"{where}.step"), entry["reason"]


def read_heldout_history(path: str | Path) -> HeldoutHistory:
    """Read and check one held-out history file (``heldout/history.json`` or ``checkpoint-N/heldout.json``).

    Args:
        path: The file.

    Returns:
        Its evaluations (sorted by step), alarms and stop.

    Raises:
        InputError: Unreadable, not JSON, not format 1, or a field of the wrong type (the message names the
            file).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: cannot read it as JSON ({err}). {_FIX}") from None
    if not isinstance(data, dict) or data.get("format") != 1:
        raise InputError(f'{path}: expected a held-out history object with "format": 1. {_FIX}')
    evaluations, alarms, stopped = data.get("evaluations"), data.get("alarms", []), data.get("stopped")
    if not isinstance(evaluations, list) or not isinstance(alarms, list):
        raise InputError(f"{path}: 'evaluations' and 'alarms' must be lists. {_FIX}")
    resumed = data.get("resumed_stops", [])
    if not isinstance(resumed, list):
        raise InputError(f"{path}: 'resumed_stops' must be a list. {_FIX}")
    stopped = None if stopped is None else _stop(stopped, path, "stopped", "null or ")
    resumed = tuple(_stop(stop, path, f"resumed_stops[{i}]") for i, stop in enumerate(resumed))
    checked = [_evaluation(entry, path, i) for i, entry in enumerate(evaluations)]
    return HeldoutHistory(
        source=str(path),
        evaluations=tuple(sorted(checked, key=lambda e: e.step)),
        alarms=tuple(_alarm(entry, path, i) for i, entry in enumerate(alarms)),
        stopped=stopped,
        resumed_stops=resumed,
    )


def _from_log(log_history: list[dict], source: str) -> HeldoutHistory | None:
    """The evaluations from the ``heldout/*`` metrics of a trainer log; None when there are none."""
    names = ("accuracy", "accuracy_low", "accuracy_high", "unparseable")
    accuracy, low, high, unparseable = (metric_series(log_history, f"heldout/{name}") for name in names)
    reward = metric_series(log_history, "reward")
    # An evaluation that graded nothing logged no heldout/accuracy, only heldout/unparseable.
    steps = sorted(accuracy.keys() | unparseable.keys())
    if not steps:
        return None
    evaluations, previous = [], -1
    for step in steps:
        since = [value for s, value in reward.items() if previous < s <= step]
        mean = sum(since) / len(since) if since else None
        values = (accuracy.get(step), low.get(step), high.get(step), unparseable.get(step), mean)
        evaluations.append(Evaluation(step, *values, saved=step > 0))  # step 0: the model before training
        previous = step
    return HeldoutHistory(source=f"{source} (heldout/* metrics)", evaluations=tuple(evaluations))


def load_heldout(output_dir: str | Path, log_history: list[dict], log_source: str) -> HeldoutHistory | None:
    """The held-out history of a training output folder (or of one checkpoint folder).

    Candidates are ``heldout/history.json``, ``heldout.json`` (in a checkpoint folder) and the newest
    ``checkpoint-*/heldout.json``; the one whose last evaluation is furthest along wins, the first of them on
    a tie.

    Args:
        output_dir: The training output folder.
        log_history: ``trainer_state["log_history"]``, used when no history file exists.
        log_source: The trainer_state.json it came from, for ``source``.

    Returns:
        The history, or None when the run logged no held-out evaluation.

    Raises:
        InputError: A history file exists but is malformed (the message names it).
    """
    output_dir = Path(output_dir)
    candidates = [output_dir / "heldout" / "history.json", output_dir / "heldout.json"]
    if steps := checkpoint_steps(output_dir):
        candidates.append(output_dir / f"checkpoint-{steps[-1]}" / "heldout.json")
    found = [read_heldout_history(path) for path in candidates if path.is_file()]
    if not found:
        return _from_log(log_history, log_source)
    # max() keeps the first of equals: the order above breaks ties.
    return max(found, key=lambda h: h.evaluations[-1].step if h.evaluations else -1)


def best_evaluation(evaluations: tuple[Evaluation, ...] | list[Evaluation]) -> Evaluation | None:
    """The evaluation with the highest accuracy, the earliest step on ties; None when none has an accuracy."""
    return best_by_accuracy(evaluations, lambda e: (e.accuracy, e.step))


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def heldout_table(heldout: HeldoutHistory | None) -> str:
    """A short text summary: one row per evaluation, the best step, the alarms and the early stop."""
    if heldout is None or not heldout.evaluations:
        return "held-out accuracy: not logged (recipe section heldout)"
    lines = [
        f"held-out accuracy ({heldout.source}; train reward: the mean logged since the previous evaluation):",
        f"{'step':>7}  {'accuracy':>8}  {'95% interval':>15}  {'unparseable':>11}  {'train reward':>12}",
    ]
    for e in heldout.evaluations:
        interval = "-" if e.low is None or e.high is None else f"{_percent(e.low)}-{_percent(e.high)}"
        reward = "-" if e.reward is None else f"{e.reward:.3f}"
        cells = (accuracy_text(e.accuracy), interval, _percent(e.unparseable), reward)
        lines.append(f"{e.step:>7}  {cells[0]:>8}  {cells[1]:>15}  {cells[2]:>11}  {cells[3]:>12}")
    lines.append(best_text([dataclasses.asdict(e) for e in heldout.evaluations]))
    if any(e.accuracy is None for e in heldout.evaluations):
        lines.append(
            "n/a: the grader settled none of that step's samples (a busy machine?), so it has no accuracy; python "
            "recipes/regrade.py OUTPUT_DIR/heldout/step-N.jsonl grades them again for python -m stats.compare"
        )
    lines += [f"alarm {a.kind} at step {a.steps[1]}: {a.message}" for a in heldout.alarms]
    lines += [
        f"stopped at step {step}, then resumed past it: {reason}" for step, reason in heldout.resumed_stops
    ]
    if heldout.stopped:
        lines.append(f"stopped at step {heldout.stopped[0]}: {heldout.stopped[1]}")
    return "\n".join(lines)
