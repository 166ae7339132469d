"""Reward-specific rules on top of ``common.specs``: weights, picklability, and what rewards declare.

A reward declares two properties (plug-ins may too, as attributes of their function or class):
``max_reward`` (the most it pays one completion) and ``is_correctness`` (it pays for a correct answer). The
registry checks with them, not with isinstance, that no other reward can pay as much as a correct answer.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import pickle
from collections.abc import Callable, Mapping
from itertools import product

from common.specs import SpecError

# Arguments TRL passes to every reward: a spec may not bind them.
TRL_ARGUMENTS = frozenset(
    {"prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric", "environments"}
)


class RewardSpecError(SpecError):
    """A bad entry in a ``rewards:`` list; the message names the entry and key, and suggests a fix."""


def _unwrap(func: Callable) -> Callable:
    while isinstance(func, functools.partial):
        func = func.func
    return func


def reward_name(func: Callable) -> str:
    """The name TRL logs a reward under (``rewards/<name>/mean``), as ``trl``'s ``get_callable_name`` does."""
    func = _unwrap(func)
    return getattr(func, "__name__", type(func).__name__)


def max_reward(func: Callable) -> float | None:
    """What the reward declares it pays one completion at most (None: not declared)."""
    value = getattr(_unwrap(func), "max_reward", None)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def is_correctness(func: Callable) -> bool:
    """Whether the reward declares that it pays for a correct answer."""
    return getattr(_unwrap(func), "is_correctness", False) is True


def weight_of(spec: Mapping) -> float:
    """A spec's ``weight`` (default 1.0), which must be a finite number."""
    weight = spec.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
        raise RewardSpecError(f"weight must be a finite number, got {weight!r}.")
    return float(weight)


# One completion as TRL hands it to every reward: the chat prompt and completion, its token ids, one keyword per
# data column (docs/CONTRACTS.md) and TRL's extras. A reward is called once on it at load.
ROW_COLUMNS = ("id", "question", "solution", "gold")
_PROBE = {
    "prompts": [
        [{"role": "system", "content": "Answer after ####."}, {"role": "user", "content": "What is 2 + 3?"}]
    ],
    "completions": [[{"role": "assistant", "content": "2 + 3 = 5, so <answer>5</answer>\n#### 5"}]],
    "completion_ids": [[17, 4, 9, 30]],
    "id": ["probe-0"],
    "question": ["What is 2 + 3?"],
    "solution": ["2 + 3 = 5\n#### 5"],
    "gold": ["5"],
    "trainer_state": None,
    "log_extra": lambda column, values: None,
    "log_metric": lambda name, value: None,
}


# The same row with a second, wrong completion: a reward that returns one value whatever it gets (a list of
# one, a score of the first completion only) passes the one-completion probe and fails TRL's tensor at step 1.
_PROBE_PAIR = {
    **{key: value * 2 if isinstance(value, list) else value for key, value in _PROBE.items()},
    "completions": [*_PROBE["completions"], [{"role": "assistant", "content": "2 + 3 = 6\n#### 6"}]],
    "completion_ids": [*_PROBE["completion_ids"], [17, 4, 8]],
    "id": ["probe-0", "probe-1"],
}


def probe_reward(reward: Callable) -> None:
    """Call a reward as TRL will (on one completion, then two), so a wrong signature, a crash or a wrong number
    of values shows at load."""
    try:
        inspect.signature(reward).bind(**_PROBE)
    except ValueError:  # no introspectable signature (a C function): the call below still checks it
        pass
    except TypeError as e:
        raise RewardSpecError(
            f"cannot take the arguments TRL passes ({e}). TRL calls reward(prompts=, completions=, "
            f"completion_ids=, trainer_state=, log_extra=, log_metric=, and one keyword per data column: "
            f"{', '.join(ROW_COLUMNS)} and any of your own); take the ones you do not use as **kwargs, and give "
            "a parameter for a column of your own data a default."
        ) from None
    try:
        values = reward(**_PROBE)
    except Exception as e:  # noqa: BLE001 - whatever it raises, it would raise at step 1
        raise RewardSpecError(
            f"raised {type(e).__name__}: {e} when called on one completion as TRL calls it "
            "(prompts and completions are chat messages: lists of {role, content} dicts)."
        ) from None
    # What TRL turns into its float32 tensor: a list (or array) of numbers (numpy's and bools too) or None.
    good = hasattr(values, "__len__") and not isinstance(values, (str, bytes, Mapping)) and len(values) == 1
    value = values[0] if good else None
    if not good or not (value is None or isinstance(value, numbers.Real)):
        raise RewardSpecError(
            f"returned {values!r} for one completion; a reward returns a list with one float (or None) per "
            "completion."
        )
    if value is not None and not math.isfinite(value):
        raise RewardSpecError(
            f"returned {value!r} for one completion; a reward must be finite: GRPO normalises rewards within "
            "each group, and inf or nan leaves nothing to learn from. Return None where it does not apply."
        )
    try:
        values = reward(**_PROBE_PAIR)
    except Exception as e:  # noqa: BLE001 - whatever it raises, it would raise at step 1
        raise RewardSpecError(f"raised {type(e).__name__}: {e} when called on two completions.") from None
    if not hasattr(values, "__len__") or isinstance(values, (str, bytes, Mapping)) or len(values) != 2:
        raise RewardSpecError(
            f"returned {values!r} for two completions; a reward returns one float (or None) per completion, "
            "len(completions) values in their order."
        )


def check_reward(reward: Callable, spec: Mapping) -> None:
    """A built reward must have a valid weight, be picklable (TRL pickles rewards for rollout workers), and take
    one completion as TRL passes it."""
    weight_of(spec)
    try:
        pickle.dumps(reward)
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        raise RewardSpecError(
            f"not picklable ({e}); TRL pickles rewards for its async rollout workers: "
            "define it at module level (no lambda or closure), or as a callable class."
        ) from e
    probe_reward(reward)


def check_correctness_pays_most(funcs: list[Callable], weights: list[float]) -> None:
    """No other reward may pay as much as a correct answer, or GRPO learns to collect it instead."""
    pays = [(i, max_reward(f), w) for i, (f, w) in enumerate(zip(funcs, weights))]
    others = [(i, m * w) for i, m, w in pays if m is not None and not is_correctness(funcs[i])]
    corrects = [(i, m * w) for i, m, w in pays if m is not None and is_correctness(funcs[i])]
    for (oi, other_pay), (ci, correct_pay) in product(others, corrects):
        if correct_pay > 0 and other_pay >= correct_pay:
            other, correct = reward_name(funcs[oi]), reward_name(funcs[ci])
            raise RewardSpecError(
                f"rewards[{oi}] ({other}): can pay {other_pay:g} (max_reward x weight) but a correct answer "
                f"pays {correct_pay:g} (rewards[{ci}] {correct}: max_reward x weight): {other} without a "
                f"correct answer must earn less. Lower {other}'s max_reward or weight, or raise {correct}'s reward."
            )
