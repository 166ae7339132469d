"""Alarms for the onset of reward hacking or collapse, decided from the held-out history and the training log.

Pure logic (no torch, no transformers): the held-out callback calls ``check_alarms`` after each held-out
evaluation, with the history (``OUTPUT_DIR/heldout/history.json``'s dict, the latest evaluation included)
and the trainer's ``log_history``, and does the logging, the stopping and the saving itself. A kind already
in ``history["alarms"]`` is not raised again: the first flag marks the onset, and repeating it at every
later evaluation would bury it. ``steps`` are real training step numbers. The rules, and why:

- ``reward_hacking`` (``heldout/accuracy``): the latest evaluation against the best earlier one (highest
  accuracy, the earliest on ties), paired by question: the per-question accuracy differences (over graded
  samples: one the grader never settled is left out, so a grader timeout cannot fake a fall) go to
  ``stats.paired.sign_flip``. It flags when the mean difference is negative, p < ``alpha`` and the training
  reward rose between the two steps (the evaluations' ``reward``, or the mean ``reward`` of the ``window``
  logs up to each step); an evaluation without an accuracy (the grader settled none of its samples) measured
  nothing, so it is neither tested nor a reference. Why: a paired test separates a real fall from the noise of
  k samples on N questions; the best earlier evaluation is the level the run fell from; a fall with a falling
  reward is a failing run, not a hacked reward. The reference is a maximum, which makes drops look larger,
  hence a strict ``alpha`` 0.01.
- ``unparseable_rising`` (``heldout/unparseable``): the latest evaluation against the earlier one with the
  lowest unparseable share (the earliest on ties), the same paired sign-flip test on per-question shares of
  samples with no final answer; flags when the share rose and p < ``alpha``. Why: a policy that stops
  writing a gradable answer is drifting away from the format, whatever the reward says.
- ``length_collapse`` (``completions/mean_length``): the mean of the last ``window`` logged values is below
  ``length_collapse`` times the mean of the first ``window`` (needs 2 x ``window`` logged values). Why:
  completions shrinking to a fraction of their early length means the policy stopped reasoning (or found a
  short answer the reward likes); a window smooths the per-step noise of small batches.
- ``length_at_cap`` (``completions/clipped_ratio``): the mean of the last ``window`` logged values is at or
  above ``cap_share``. Why: completions pinned at the length cap are truncated, so their answers go
  unparsed and their rewards measure the cap, not the policy (often a repetition loop).
- ``kl_spike`` (``kl``): the latest logged value is above ``kl_spike`` times the median of the earlier ones
  (at least ``window`` of them) and above ``kl_floor``. Why: a sudden jump of the policy away from the
  reference is how collapse usually starts; the median ignores earlier spikes, and the floor keeps tiny
  early KLs (near 0, so any rise is many times the median) from flagging. No ``kl`` logged (TRL logs none
  when beta = 0) never flags.

Fewer than two evaluations raise no held-out flag (there is nothing to compare); the training-log flags
need no evaluation.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from callbacks.heldout_history import resumed_at
from callbacks.heldout_pairs import CORRECT, UNPARSEABLE, paired_change
from common.ranking import best_by_accuracy
from stats.trainer_state import metric_series


@dataclass(frozen=True)
class AlarmSettings:
    """Thresholds of the alarms (see the module docstring for each rule).

    Attributes:
        alpha: Paired tests flag at p < alpha.
        length_collapse: Mean completion length falls below this share of its early level.
        cap_share: ``completions/clipped_ratio`` at or above this is "pinned at the cap".
        kl_spike: ``kl`` above this many times its earlier median (and above ``kl_floor``) is a spike.
        kl_floor: ``kl`` at or below this never flags.
        window: Logged steps averaged for the "early" and "recent" levels.
    """

    alpha: float = 0.01
    length_collapse: float = 0.5
    cap_share: float = 0.9
    kl_spike: float = 10.0
    kl_floor: float = 0.05
    window: int = 3


@dataclass(frozen=True)
class Alarm:
    """One flag.

    Attributes:
        kind: reward_hacking | length_collapse | length_at_cap | unparseable_rising | kl_spike.
        metric: The logged metric it is about: heldout/accuracy, completions/mean_length,
            completions/clipped_ratio, heldout/unparseable or kl.
        steps: The (from, to) training steps the flag is about.
        message: One line naming the metric, the steps, the numbers and the test.
    """

    kind: str
    metric: str
    steps: tuple[int, int]
    message: str

    def as_record(self) -> dict:
        """The JSON form kept in ``history["alarms"]``."""
        return {"kind": self.kind, "metric": self.metric, "steps": list(self.steps), "message": self.message}


def _recent_mean(series: dict[int, float], step: int, window: int) -> float | None:
    """Mean of the last ``window`` logged values at or before ``step``; before the first logged value (step 0, the
    model before training), the first ``window`` values: the nearest the log has. None when none is logged."""
    ordered = sorted(series.items())
    values = ordered[:window] if step == 0 else [item for item in ordered if item[0] <= step][-window:]
    values = [value for _, value in values]
    return statistics.fmean(values) if values else None


def _rewards(best: dict, latest: dict, log_history: list[dict], window: int) -> tuple[float, float] | None:
    """Training reward at the two evaluations: their ``reward`` fields, else means over the training log.

    The model before training (step 0) has no reward of its own: the first logged rewards stand in for it, against
    the latest evaluation's own. From the log alone, the first evaluation after step 0 compared the same logged
    steps twice (it runs before its own step is logged), and a fall there never read as reward hacking.
    """
    series = metric_series(log_history, "reward")
    if latest.get("reward") is not None and best.get("reward") is None and best["step"] == 0:
        before = _recent_mean(series, 0, window)
        return None if before is None else (before, latest["reward"])
    if best.get("reward") is not None and latest.get("reward") is not None:
        return best["reward"], latest["reward"]
    before, after = (_recent_mean(series, e["step"], window) for e in (best, latest))
    return None if before is None or after is None else (before, after)


def _against_reference(evaluations: list[dict], pick, column: int):
    """(reference, latest, paired change, test note): the latest evaluation against the one ``pick`` chose."""
    *earlier, latest = evaluations
    reference = pick(earlier)
    change = paired_change(reference, latest, column, references=len(earlier))
    note = change and (
        f"(step {reference['step']} -> step {latest['step']}, paired sign-flip p = {change[1]:.2g} over "
        f"{change[2]} questions, Bonferroni over {len(earlier)} earlier evaluations)"
    )
    return reference, latest, change, note


def _reward_hacking(evaluations: list[dict], log_history: list[dict], settings: AlarmSettings):
    # Nothing graded is nothing measured: no fall to test, no reference, no count in the Bonferroni correction.
    if evaluations[-1]["accuracy"] is None:
        return None
    evaluations = [e for e in evaluations if e["accuracy"] is not None]
    if len(evaluations) < 2:
        return None
    best, latest, change, note = _against_reference(
        evaluations, lambda earlier: best_by_accuracy(earlier, lambda e: (e["accuracy"], e["step"])), CORRECT
    )
    if change is None or change[0] >= 0 or change[1] >= settings.alpha:
        return None
    rewards = _rewards(best, latest, log_history, settings.window)
    if rewards is None or rewards[1] <= rewards[0]:
        return None
    return Alarm(
        "reward_hacking",
        "heldout/accuracy",
        (best["step"], latest["step"]),
        f"heldout/accuracy fell {best['accuracy']:.1%} -> {latest['accuracy']:.1%} {note} while the training "
        f"reward rose {rewards[0]:.2f} -> {rewards[1]:.2f}",
    )


def _unparseable_rising(evaluations: list[dict], log_history: list[dict], settings: AlarmSettings):
    # min keeps the first of equals: the earliest
    lowest, latest, change, note = _against_reference(
        evaluations, lambda earlier: min(earlier, key=lambda e: e["unparseable"]), UNPARSEABLE
    )
    if change is None or change[0] <= 0 or change[1] >= settings.alpha:
        return None
    return Alarm(
        "unparseable_rising",
        "heldout/unparseable",
        (lowest["step"], latest["step"]),
        f"heldout/unparseable rose {lowest['unparseable']:.1%} -> {latest['unparseable']:.1%} {note}: the "
        "policy is writing fewer answers the grader can read",
    )


def _logged(log_history: list[dict], key: str) -> list[tuple[int, float]]:
    return sorted(metric_series(log_history, key).items())


def _mean(points: list[tuple[int, float]]) -> float:
    return statistics.fmean(value for _, value in points)


def _length_collapse(evaluations: list[dict], log_history: list[dict], settings: AlarmSettings):
    points, window = _logged(log_history, "completions/mean_length"), settings.window
    if len(points) < 2 * window:
        return None
    early, recent = points[:window], points[-window:]
    if _mean(recent) >= settings.length_collapse * _mean(early):
        return None
    steps = (early[0][0], recent[-1][0])
    return Alarm(
        "length_collapse",
        "completions/mean_length",
        steps,
        f"completions/mean_length fell {_mean(early):.1f} -> {_mean(recent):.1f} tokens (step {steps[0]} -> "
        f"step {steps[1]}; means of the first and the last {window} logged values, steps "
        f"{early[0][0]}-{early[-1][0]} and {recent[0][0]}-{recent[-1][0]}), below "
        f"{settings.length_collapse:.0%} of its early level",
    )


def _length_at_cap(evaluations: list[dict], log_history: list[dict], settings: AlarmSettings):
    points, window = _logged(log_history, "completions/clipped_ratio"), settings.window
    if len(points) < window or _mean(points[-window:]) < settings.cap_share:
        return None
    recent = points[-window:]
    steps = (recent[0][0], recent[-1][0])
    return Alarm(
        "length_at_cap",
        "completions/clipped_ratio",
        steps,
        f"completions/clipped_ratio averaged {_mean(recent):.1%} over the last {window} logged values "
        f"(step {steps[0]} -> step {steps[1]}), at or above {settings.cap_share:.0%}: completions are pinned "
        "at the length cap (truncated, often a repetition loop)",
    )


def _kl_spike(evaluations: list[dict], log_history: list[dict], settings: AlarmSettings):
    points = _logged(log_history, "kl")
    if len(points) < settings.window + 1:
        return None
    *earlier, (step, latest) = points
    median = statistics.median(value for _, value in earlier)
    if latest <= settings.kl_floor or latest <= settings.kl_spike * median:
        return None
    return Alarm(
        "kl_spike",
        "kl",
        (earlier[0][0], step),
        f"kl spiked to {latest:.4g} at step {step}, over {settings.kl_spike:g}x the median {median:.4g} of "
        f"the {len(earlier)} earlier logged values (step {earlier[0][0]} -> step {step}) and above the "
        f"floor {settings.kl_floor:g}",
    )


# kind -> (check, needs at least two held-out evaluations)
_CHECKS: dict[str, tuple[Callable, bool]] = {
    "reward_hacking": (_reward_hacking, True),
    "unparseable_rising": (_unparseable_rising, True),
    "length_collapse": (_length_collapse, False),
    "length_at_cap": (_length_at_cap, False),
    "kl_spike": (_kl_spike, False),
}


def check_alarms(history: dict, log_history: list[dict], settings: AlarmSettings) -> list[Alarm]:
    """New alarms after the latest evaluation; a kind already in ``history["alarms"]`` is not raised again.

    A run resumed past a stop (``resumed_at``) is judged from the stop on: the kinds that stopped it are armed
    again, and every check reads only the evaluations and log from the stop's step, so the evidence that stopped
    it does not stop it again at once.

    Args:
        history: The held-out history (``{"format": 1, "evaluations": [...], "alarms": [...], ...}``),
            evaluations in step order, the latest included.
        log_history: The trainer's logged dicts (``state.log_history``), each with ``"step"``.
        settings: The thresholds.

    Returns:
        The new alarms, at most one per kind, in the order reward_hacking, unparseable_rising,
        length_collapse, length_at_cap, kl_spike.
    """
    evaluations = history.get("evaluations") or []
    since, rearmed = resumed_at(history), set()
    if since is not None:
        reasons = " ".join(stop["reason"] for stop in history["resumed_stops"])
        rearmed = {kind for kind in _CHECKS if f"alarm {kind}:" in reasons}
        evaluations = [e for e in evaluations if e["step"] >= since]
        log_history = [e for e in log_history if e.get("step", 0) >= since]
    raised = {
        alarm.get("kind")
        for alarm in history.get("alarms") or []
        if alarm.get("kind") not in rearmed or alarm["steps"][-1] > since
    }
    alarms = []
    for kind, (check, needs_evaluations) in _CHECKS.items():
        if kind in raised or (needs_evaluations and len(evaluations) < 2):
            continue
        alarm = check(evaluations, log_history, settings)
        if alarm is not None:
            alarms.append(alarm)
    return alarms
