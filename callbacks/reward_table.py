"""A compact console table of GRPO training signals every N steps (shows in notebooks too).

Recipe entry: ``callbacks: [{name: reward_table, every_steps: 25}]``, checked by ``callbacks.RewardTable``.
"""

from __future__ import annotations

import re
import sys

from tqdm.auto import tqdm
from transformers import TrainerCallback

_REWARD_MEAN = re.compile(r"^rewards/(.+)/mean$")
# (log key, label, format) for the rows after the per-reward ones, in TRL's metric names.
_SIGNALS = (
    ("reward", "reward (weighted sum)", "{:.3f}"),
    ("kl", "KL to reference", "{:.4g}"),
    ("completions/mean_length", "completion length (tokens)", "{:.1f}"),
    ("completions/clipped_ratio", "clipped at max length", "{:.1%}"),
)


def render_table(window: list[dict], step: int, max_steps: int) -> str:
    """Mean over the window and latest value of each reward function's mean reward, KL, length and clipping.

    Args:
        window: The logged metric dictionaries since the previous table, oldest first.
        step: Current global step.
        max_steps: Planned total steps (0 if unknown).
    """
    names = sorted({m.group(1) for logs in window for key in logs if (m := _REWARD_MEAN.match(key))})
    rows = [(f"rewards/{n}/mean", f"rewards/{n}", "{:.3f}") for n in names] + list(_SIGNALS)
    total = f"/{max_steps}" if max_steps else ""
    lines = [f"GRPO step {step}{total}: mean of {len(window)} logged steps, and the latest"]
    width = max(len(label) for _, label, _ in rows)
    lines.append(f"  {'metric':<{width}}  {'mean':>10}  {'latest':>10}")
    for key, label, fmt in rows:
        values = [logs[key] for logs in window if isinstance(logs.get(key), (int, float))]
        if values:
            mean, latest = fmt.format(sum(values) / len(values)), fmt.format(values[-1])
            lines.append(f"  {label:<{width}}  {mean:>10}  {latest:>10}")
    return "\n".join(lines)


class RewardTableCallback(TrainerCallback):
    """Print :func:`render_table` every ``every_steps`` optimizer steps, on the main process only.

    Args:
        every_steps: Steps between tables (a positive integer: ``callbacks.RewardTable`` checks a recipe's); a last
            table is printed at the end of training if steps remain.
    """

    def __init__(self, every_steps: int):
        self.every_steps = every_steps
        self._window: list[dict] = []
        self._printed_at = 0

    def on_train_begin(self, args, state, control, **kwargs):
        # A resumed run starts counting from its checkpoint's step: from 0, the first step after it printed a table
        # at once (step 9 of a run resumed at 8 with every_steps 4) and the next table missed that step.
        self._window, self._printed_at = [], state.global_step

    def on_log(self, args, state, control, logs=None, **kwargs):
        # Training logs carry the reward; evaluation and end-of-training summaries do not.
        if not state.is_world_process_zero or not logs or "reward" not in logs:
            return
        self._window.append(dict(logs))
        if state.global_step // self.every_steps > self._printed_at // self.every_steps:
            self._print(state)

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self._window:
            self._print(state)

    def _print(self, state) -> None:
        # tqdm.write clears a running progress bar and redraws it below: a blank line, then the table, off the bar.
        tqdm.write("\n" + render_table(self._window, state.global_step, state.max_steps))
        sys.stdout.flush()
        self._window, self._printed_at = [], state.global_step
