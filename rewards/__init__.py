"""GRPO rewards by name, for TRL's ``GRPOTrainer``; a leaf package any TRL script can use.

    python -m rewards        # list the rewards, their parameters and one-line docs

A recipe's ``rewards:`` list names them (``{name: correctness, weight: 1.0, min_tokens: 50}``) or points
at a plug-in (``{path: my_pkg.my_module:my_reward, weight: 0.5, <params>}``). Every reward takes TRL's
arguments (``prompts``, ``completions``, ``completion_ids``, dataset columns, ``**kwargs``) and returns
one float (or None: not applicable) per completion. Its ``__name__`` is its registered name, which TRL
logs as ``rewards/<name>/mean``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import product
from typing import Any

from rewards._specs import RewardSpecError, build_one, reward_name
from rewards.correctness import Correctness
from rewards.format import Format
from rewards.trl_builtins import Repetition, SoftOverlong

__all__ = ["REWARDS", "RewardSpecError", "build_rewards", "reward_name"]

REWARDS: dict[str, type] = {
    "correctness": Correctness,
    "format": Format,
    "soft_overlong": SoftOverlong,
    "repetition": Repetition,
}


def _check_format_pays_less(funcs: list[Callable], weights: list[float]) -> None:
    """Format without a correct answer must earn less than a correct answer, or GRPO learns format only."""
    formats = [(i, f.max_reward * w) for i, (f, w) in enumerate(zip(funcs, weights)) if isinstance(f, Format)]
    corrects = [
        (i, f.reward * w) for i, (f, w) in enumerate(zip(funcs, weights)) if isinstance(f, Correctness)
    ]
    for (fi, format_pay), (ci, correct_pay) in product(formats, corrects):
        if correct_pay > 0 and format_pay >= correct_pay:
            raise RewardSpecError(
                f"rewards[{fi}] (format): can pay {format_pay:g} (max_reward x weight) but a correct answer "
                f"pays {correct_pay:g} (rewards[{ci}] correctness: reward x weight): format without a correct "
                "answer must earn less. Lower format's max_reward or weight, or raise correctness's reward."
            )


def build_rewards(
    specs: list[Mapping[str, Any]], *, defaults: Mapping[str, Any] | None = None
) -> tuple[list[Callable], list[float]]:
    """Reward callables and weights for ``GRPOTrainer(reward_funcs=...)`` and ``GRPOConfig(reward_weights=...)``.

    Args:
        specs: The recipe's ``rewards:`` list: ``{name: ..., weight: ..., <params>}`` or
            ``{path: "package.module:function", weight: ..., <params>}``; ``weight`` defaults to 1.0.
        defaults: Values filled into every reward that takes a parameter of that name and whose spec
            does not set it, e.g. ``{"max_completion_length": 512}`` from the trainer's config.

    Returns:
        ``(funcs, weights)``: picklable callables, each with ``__name__`` = its registered name (a
        plug-in keeps its own name), and their weights.

    Raises:
        RewardSpecError: Every bad spec, each named by index and key, with suggestions.

    >>> funcs, weights = build_rewards([{"name": "correctness", "weight": 1.0, "min_tokens": 40},
    ...                                 {"name": "format", "style": "hash", "weight": 0.5}])
    >>> [reward_name(f) for f in funcs], weights
    (['correctness', 'format'], [1.0, 0.5])
    """
    if not isinstance(specs, (list, tuple)) or not specs:
        raise RewardSpecError(
            f"rewards must be a non-empty list of specs like [{{name: correctness, weight: 1.0}}], got {specs!r}."
        )
    funcs, weights, errors, seen = [], [], [], {}
    for index, spec in enumerate(specs):
        try:
            func, weight = build_one(f"rewards[{index}]", spec, REWARDS, defaults or {})
        except RewardSpecError as e:
            errors.append(str(e))
            continue
        name = reward_name(func)
        if name in seen:
            errors.append(
                f"rewards[{index}] ({name}): repeats rewards[{seen[name]}]: TRL logs rewards by name "
                f"(rewards/{name}/mean), so each may appear once."
            )
        seen.setdefault(name, index)
        funcs.append(func)
        weights.append(weight)
    if errors:
        raise RewardSpecError("\n".join(errors))
    _check_format_pays_less(funcs, weights)
    return funcs, weights
