"""The training log a person reads: a progress bar and one short line per logged step.

The Trainer prints every log as a 30-key dict; this prints ``step 12/400  reward 1.84  correct 31%  length 22
left 2m10s`` instead. The full metrics still go to ``trainer_state.json`` (log_history, what ``stats.curves``
plots) and to the trackers in ``trainer.report_to``.
"""

from __future__ import annotations

from transformers import PrinterCallback, ProgressCallback


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def short_line(logs: dict, step: int, max_steps: int, left: float | None) -> str | None:
    """One line for a training log (None for logs without a reward, e.g. the final summary).

    >>> short_line({"reward": 1.84, "answers/correct": 0.3125, "completions/mean_length": 21.6}, 12, 400, 130)
    'step 12/400  reward 1.840  correct 31%  length 22  left 2m10s'
    >>> short_line({"reward": None, "answers/correct": None, "completions/mean_length": 21.6}, 3, 4, None)
    'step 3/4  reward n/a (no reward applied)  length 22'
    """
    if "reward" not in logs:
        return None
    # TRL logs None for a metric with no value in the step: a reward no function applied to (each returned None).
    reward = "n/a (no reward applied)" if logs["reward"] is None else f"{logs['reward']:.3f}"
    parts = [f"step {step}/{max_steps}", f"reward {reward}"]
    if logs.get("answers/correct") is not None:
        parts.append(f"correct {100 * logs['answers/correct']:.0f}%")
    if logs.get("completions/mean_length") is not None:
        parts.append(f"length {logs['completions/mean_length']:.0f}")
    if left is not None:
        parts.append(f"left {_duration(left)}")
    return "  ".join(parts)


class ShortProgress(ProgressCallback):
    """ProgressCallback's bar (none with ``disable_tqdm``), with ``short_line`` in place of the metrics dict."""

    def on_train_begin(self, args, state, control, **kwargs):
        if not args.disable_tqdm:
            super().on_train_begin(args, state, control, **kwargs)
            if state.global_step and self.training_bar is not None:  # a resumed run: its steps before are not
                # this launch's, so neither tqdm's rate nor the time left may count them as done in no time
                self.training_bar.n = self.training_bar.initial = self.current_step = state.global_step
                self.training_bar.refresh()

    def on_step_end(self, args, state, control, **kwargs):
        if self.training_bar is not None:
            super().on_step_end(args, state, control, **kwargs)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        left = None
        if self.training_bar is not None:
            bar = self.training_bar
            done, elapsed = bar.n - bar.initial, bar.format_dict["elapsed"]  # steps of this launch
            left = (state.max_steps - bar.n) * elapsed / done if done else None
        line = short_line(logs, state.global_step, state.max_steps, left)
        if line:
            (self.training_bar.write if self.training_bar is not None else print)(line)

    def on_train_end(self, args, state, control, **kwargs):
        if self.training_bar is not None:
            super().on_train_end(args, state, control, **kwargs)


def use_short_progress(trainer) -> None:
    """Swap the Trainer's console logger (bar or printer) for ShortProgress; a notebook's table stays."""
    for default in (ProgressCallback, PrinterCallback):
        if any(type(c) is default for c in trainer.callback_handler.callbacks):
            trainer.remove_callback(default)
            trainer.add_callback(ShortProgress)
