"""Held-out accuracy during training: evaluate, log, keep the history, mark the best checkpoint, raise alarms.

    heldout: {enabled: true, questions: 100, samples: 2}      # in a recipe; recipes/run.py builds the callback

Before the first step (step 0: the model before training, the baseline every later step is read against), every
``every_steps`` steps and at the end, the policy answers the same held-out questions with the same seeds
(recipes/evaluation/live.py). Records go to ``OUTPUT_DIR/heldout/step-N.jsonl`` (evaluate.py's schema, so
``python -m stats.compare`` compares any two steps; every checkpoint carries the records so far, and resume puts
them back); ``heldout/accuracy`` and its 95% interval go to the trainer's log (trainer_state.json, and any
``report_to`` tracker); the history (``heldout/history.json``, and a copy in every checkpoint as ``heldout.json``,
which its manifest covers and which resume reads back) keeps each evaluation's per-question counts for the alarm's
paired tests and for ``python -m stats.curves``.

The best evaluation that falls on a checkpoint becomes the Trainer's ``best_model_checkpoint`` (local
rotation keeps it); the ``best`` pointer is derived from the manifests (callbacks/best.py).
"""

from __future__ import annotations

import json
import logging
import math
import time
from fractions import Fraction
from pathlib import Path

from transformers import Trainer, TrainerCallback

from callbacks.alarms import AlarmSettings, check_alarms
from callbacks.heldout_history import HISTORY_NAME, empty_history, history_until, restore_records
from callbacks.plateau import plateaued
from common.ranking import accuracy_text, best_text
from common.wording import questions_by_samples
from recipes.atomic import copy_file_atomically, write_text_atomically
from recipes.evaluation.live import HeldoutPlan, evaluate_live
from stats.intervals import accuracy_interval
from stats.trainer_state import metric_series

logger = logging.getLogger(__name__)


def summarize(records: list[dict], step: int, reward: float | None) -> dict:
    """One history entry: accuracy, its 95% Wilson interval over questions, unparseable share, unsettled samples,
    per-question counts ``[correct, samples, unparseable, unsettled]``.

    A sample whose grade the grader never settled (``"unsettled": true``: it ran out of time, even on the patient
    second pass of recipes/evaluation/live.py) is left out of the accuracy and its interval, which are over the
    graded samples, rather than counted wrong: a grader timeout must not cost a checkpoint the ``best`` pointer or
    the early stop's best, nor fake a fall for the alarm (which tests the same per-question shares). ``unsettled``
    says how many were left out. When none was graded, ``accuracy`` (and its interval) is None: 0.0 would pass for
    a measured collapse, in the trainer's log, the best choice, the early stop and the alarms.
    """
    per_question: dict[str, list[int]] = {}
    for r in records:
        counts = per_question.setdefault(r["id"], [0, 0, 0, 0])
        counts[0] += bool(r["correct"])
        counts[1] += 1
        counts[2] += r["pred"] is None
        counts[3] += bool(r.get("unsettled"))
    graded = [(c, n - u) for c, n, _, u in per_question.values() if n > u]
    interval = accuracy_interval(graded)  # stats.compare's, in [0, 1]
    return {
        "step": step,
        # The mean of per-question accuracies, as stats.compare's; with every sample graded, correct / samples.
        "accuracy": float(sum(Fraction(c, n) for c, n in graded) / len(graded)) if graded else None,
        "low": interval[0] if interval else None,
        "high": interval[1] if interval else None,
        "questions": len(per_question),
        "samples": len(records) // len(per_question),
        "unparseable": sum(r["pred"] is None for r in records) / len(records),
        # Samples whose grade the grader never settled (records.py): left out of the accuracy.
        "unsettled": sum(u for *_, u in per_question.values()),
        "mean_tokens": sum(r["n_tokens"] for r in records) / len(records),
        "reward": reward,
        "records": f"heldout/step-{step}.jsonl",
        "per_question": per_question,
    }


class HeldoutCallback(TrainerCallback):
    """Run the held-out plan every ``every_steps`` steps and at the end; see the module docstring.

    Args:
        plan: The questions, samples, seeds and decoding of every evaluation.
        output_dir: The trainer's output_dir (records, history, checkpoints).
        every_steps: Steps between evaluations.
        alarms: Alarm thresholds.
        stop_on_alarm: End the run (saving a checkpoint first) when an alarm fires.
        patience: End the run after this many evaluations without a new best (None: never).
        history: The resumed run's history (None: a new run).
        records_from: The resumed checkpoint, whose ``heldout/`` folder holds the records of that history.
    """

    def __init__(
        self,
        plan: HeldoutPlan,
        output_dir: str | Path,
        every_steps: int,
        alarms: AlarmSettings,
        *,
        stop_on_alarm: bool = False,
        patience: int | None = None,
        history: dict | None = None,
        records_from: str | Path | None = None,
    ):
        self.plan, self.output_dir, self.every_steps = plan, Path(output_dir), every_steps
        self.alarms, self.stop_on_alarm, self.patience = alarms, stop_on_alarm, patience
        self.history = history or empty_history()
        self.records_from = Path(records_from) if records_from else None
        self.trainer: Trainer | None = None

    def attach(self, trainer: Trainer) -> None:
        """Give the callback the trainer it evaluates (its model, accelerator and log)."""
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        """Evaluate the model before training (step 0) in a new run, after moving aside the records of evaluations
        this run's history does not hold (a crashed launch evaluated past the checkpoint this one resumes from,
        and its ``step-N.jsonl`` would pass for this run's)."""
        self._move_stale_records(state)
        self._restore_records(state)
        if state.global_step == 0 and not self.history["evaluations"]:
            entry = self._evaluate(state, 0)
            entry["saved"] = False  # the base model: no checkpoint, never OUTPUT_DIR/best
            self._log(entry, control, state.is_world_process_zero)
            if state.is_world_process_zero:
                write_text_atomically(self.output_dir / "heldout" / "history.json", json.dumps(self.history))
        return control

    def _move_stale_records(self, state) -> None:
        folder, kept = self.output_dir / "heldout", {e["records"] for e in self.history["evaluations"]}
        stale = [f for f in folder.glob("step-*.jsonl") if f"heldout/{f.name}" not in kept]
        if not state.is_world_process_zero or not stale:
            return
        aside = folder / "superseded" / time.strftime("%Y%m%d-%H%M%S")
        aside.mkdir(parents=True)
        for file in stale:
            file.rename(aside / file.name)
        logger.info(
            "Moved %d held-out records file(s) of evaluations past the resumed step to %s: %s",
            len(stale), aside, ", ".join(sorted(f.name for f in stale)),
        )  # fmt: skip

    def _restore_records(self, state) -> None:
        if state.is_world_process_zero and self.records_from:
            restore_records(self.history, self.records_from, self.output_dir)

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        # DefaultFlowCallback ran first: should_training_stop is set at max_steps, so "the end" is known here.
        if step % self.every_steps and not control.should_training_stop:
            return
        if any(e["step"] == step for e in self.history["evaluations"]):
            return
        entry = self._evaluate(state, step)
        alarms = check_alarms(self.history, state.log_history, self.alarms)
        self.history["alarms"] += [alarm.as_record() for alarm in alarms]
        reasons = [f"alarm {a.kind}: {a.message}" for a in alarms if self.stop_on_alarm] + self._plateau()
        stopping = bool(reasons) and not self.history["stopped"]
        entry["saved"] = bool(control.should_save) or stopping  # a stop saves the step it stops at
        self._log(entry, control, state.is_world_process_zero)
        for alarm in alarms if state.is_world_process_zero else []:
            logger.warning("ALARM %s (%s): %s", alarm.kind, alarm.metric, alarm.message)
        if entry["saved"]:
            self._mark_best(state, entry)
        if stopping:
            self.history["stopped"] = {"step": step, "reason": "; ".join(reasons)}
            if state.is_world_process_zero:
                logger.warning(
                    "Ending the run at step %d, saving checkpoint-%d first: %s", step, step, reasons[0]
                )
            control.should_training_stop = True
            control.should_save = True
        if state.is_world_process_zero:
            write_text_atomically(self.output_dir / "heldout" / "history.json", json.dumps(self.history))
        return control

    def _evaluate(self, state, step: int) -> dict:
        """Evaluate the policy now; its entry goes into the history and its records to ``heldout/step-N.jsonl``."""
        start = time.monotonic()
        records = evaluate_live(self.trainer, self.plan, step)
        entry = summarize(records, step, self._reward_since(state.log_history))
        entry["seconds"] = round(
            time.monotonic() - start, 3
        )  # what it costs the run (benchmarks/heldout_cost.py)
        self.history["evaluations"].append(entry)
        if state.is_world_process_zero:
            text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
            write_text_atomically(self.output_dir / entry["records"], text)
            if entry["accuracy"] is None:
                logger.warning(
                    "held-out step %d has no accuracy: the grader settled none of its %d samples, patient second "
                    "grade included (a busy machine?). It is left out of the trainer's log, the best checkpoint's "
                    "choice, the early stop and the alarms. Grade its records again once the machine is less busy: "
                    "python recipes/regrade.py %s",
                    step, len(records), self.output_dir / entry["records"],
                )  # fmt: skip
            elif entry["unsettled"]:
                logger.warning(
                    "held-out step %d: the grader ran out of time on %d of %d samples, patient second grade "
                    "included (a busy machine?); they are left out of this step's accuracy, the best checkpoint's "
                    "choice and the alarms' tests.",
                    step, entry["unsettled"], len(records),
                )  # fmt: skip
        return entry

    def on_save(self, args, state, control, **kwargs):
        # Runs before SealCallback: the checkpoint's manifest covers its history, which resume reads back.
        if state.is_world_process_zero:
            folder = self.output_dir / f"checkpoint-{state.global_step}"
            history = history_until(self.history, state.global_step)
            write_text_atomically(folder / HISTORY_NAME, json.dumps(history))
            # And its records, so that a run resumed elsewhere can still compare any two steps (stats.compare).
            for entry in history["evaluations"]:
                if (records := self.output_dir / entry["records"]).is_file():
                    (folder / entry["records"]).parent.mkdir(parents=True, exist_ok=True)
                    copy_file_atomically(records, folder / entry["records"])

    def _reward_since(self, log_history: list[dict]) -> float | None:
        """The mean training reward since the previous evaluation: the logged steps, and the steps not logged yet.

        The Trainer logs a step after ``on_step_end``, so this step's reward is still in TRL's pending metrics
        (averaged into the next log); without them, a run logging at its evaluation steps had no reward here, and
        the reward-hacking alarm nothing to compare.
        """
        previous = self.history["evaluations"][-1]["step"] if self.history["evaluations"] else 0
        # Finite values only: a step no reward function applied to is logged as None, and pending as NaN.
        rewards = [r for step, r in metric_series(log_history, "reward").items() if step > previous]
        pending = getattr(self.trainer, "_metrics", {}).get("train", {}).get("reward", [])
        pending = [r for r in pending if math.isfinite(r)]
        if pending:
            rewards.append(sum(pending) / len(pending))
        return sum(rewards) / len(rewards) if rewards else None

    def _log(self, entry: dict, control, main: bool) -> None:
        metrics = {"heldout/unparseable": entry["unparseable"]}
        # Nothing graded: no accuracy to log (a 0.0 there would read as a collapse); the step is a gap in the curves.
        if entry["accuracy"] is not None:
            metrics["heldout/accuracy"] = entry["accuracy"]
        if entry["low"] is not None:
            metrics |= {"heldout/accuracy_low": entry["low"], "heldout/accuracy_high": entry["high"]}
        # Trainer.log, not GRPOTrainer.log: TRL's would flush its half-accumulated step metrics into this entry.
        # Logging clears control.should_log, which would cancel this step's own training log: keep it.
        should_log = control.should_log
        Trainer.log(self.trainer, metrics)
        control.should_log = should_log
        interval = f" [{entry['low']:.1%}, {entry['high']:.1%}]" if entry["low"] is not None else ""
        if not main:  # every process evaluated and logged the metrics; one says it
            return
        # Histories written before it was recorded have no unsettled count.
        unsettled = f", {entry['unsettled']} unsettled (left out)" if entry.get("unsettled") else ""
        logger.info(
            "held-out step %d: accuracy %s%s (%s%s, %.1f s), no answer %.1f%%; %s",
            entry["step"], accuracy_text(entry["accuracy"]), interval,
            questions_by_samples(entry["questions"], entry["samples"]), unsettled,
            entry["seconds"], 100 * entry["unparseable"],
            best_text(self.history["evaluations"]) if entry["step"] else "the model before training",
        )  # fmt: skip

    def _mark_best(self, state, entry: dict) -> None:
        """A new best evaluation on a checkpoint: the Trainer keeps that checkpoint through rotation (one without an
        accuracy, nothing graded, never is)."""
        if entry["accuracy"] is None:
            return
        if state.best_metric is None or entry["accuracy"] > state.best_metric:
            state.best_metric = entry["accuracy"]
            state.best_global_step = entry["step"]
            state.best_model_checkpoint = str(self.output_dir / f"checkpoint-{entry['step']}")

    def _plateau(self) -> list[str]:
        reason = plateaued(self.history, self.patience) if self.patience else None
        return [reason] if reason else []
