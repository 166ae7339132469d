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
from typing import Any

from common.specs import build_specs
from rewards._specs import (
    TRL_ARGUMENTS,
    RewardSpecError,
    check_correctness_pays_most,
    check_reward,
    reward_name,
    weight_of,
)
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


def build_rewards(
    specs: list[Mapping[str, Any]], *, defaults: Mapping[str, Any] | None = None
) -> tuple[list[Callable], list[float]]:
    """Reward callables and weights for ``GRPOTrainer(reward_funcs=...)`` and ``GRPOConfig(reward_weights=...)``.

    Args:
        specs: The recipe's ``rewards:`` list: ``{name: ..., weight: ..., <params>}`` or
            ``{path: "package.module:function", weight: ..., <params>}`` (or ``path: "file.py:function"``);
            ``weight`` defaults to 1.0.
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
    built = build_specs(
        "rewards",
        specs,
        REWARDS,
        example="{name: correctness, weight: 1.0}",
        meta_keys=("weight",),
        reserved=TRL_ARGUMENTS,
        defaults=defaults,
        required=True,
        check=check_reward,
        error=RewardSpecError,
    )
    funcs = [func for func, _ in built]
    weights = [weight_of(spec) for _, spec in built]
    seen: dict[str, int] = {}
    for index, (func, (_, spec)) in enumerate(zip(funcs, built)):
        name = reward_name(func)
        if name in seen:
            # A plug-in's function can be given a second name; a registered reward's cannot.
            rename = (
                f"; for a plug-in function used twice (or two of one name), give one a name of its own (def "
                f"{name}_2(**kwargs): return {name}(**kwargs), beside it in its file)"
                if "path" in spec
                else ""
            )
            raise RewardSpecError(
                f"rewards[{index}] ({name}): repeats rewards[{seen[name]}]: TRL logs rewards by name "
                f"(rewards/{name}/mean), so each may appear once. Keep one entry with the parameters you want"
                f"{rename}."
            )
        seen[name] = index
    check_correctness_pays_most(funcs, weights)
    return funcs, weights
