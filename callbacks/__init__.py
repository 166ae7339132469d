"""Trainer callbacks: the ones a recipe names in ``callbacks:``, and checkpoint sync (checkpoint_sync.py).

from callbacks import build_callbacks
build_callbacks([{"name": "reward_table", "every_steps": 25}])
build_callbacks([{"path": "my_pkg.my_module:MyCallback", "threshold": 0.5}])   # a plug-in
"""

from __future__ import annotations

from common.specs import SpecError, build_specs


def registered() -> dict:
    """Registered name -> TrainerCallback class; recipe entries are {name: ..., <constructor arguments>}.

    Imported when asked for: the callbacks need transformers, which `--help`, `--list` and `stats` do not.
    """
    from callbacks.reward_table import RewardTableCallback

    return {"reward_table": RewardTableCallback}


class CallbackSpecError(SpecError):
    """A recipe's ``callbacks:`` entry names an unknown callback or passes bad parameters."""


def _check_callback(callback, spec) -> None:
    from transformers import TrainerCallback

    if not isinstance(callback, TrainerCallback):
        raise CallbackSpecError(
            f"built a {type(callback).__name__}, not a transformers.TrainerCallback: point `path` at a "
            "TrainerCallback subclass, or at a function returning an instance of one."
        )


def build_callbacks(specs: list[dict]) -> list:
    """Instantiate the callbacks a recipe lists.

    Args:
        specs: The recipe's ``callbacks:`` list: ``{name: <registered>, <params>}`` or
            ``{path: "package.module:Class", <params>}`` (a TrainerCallback class, or a function returning one).

    Returns:
        One TrainerCallback per spec, in order.

    Raises:
        CallbackSpecError: Every bad entry at once, each naming ``callbacks[i]``, what is wrong, and the
            closest valid choice.
    """
    built = build_specs(
        "callbacks",
        specs,
        registered(),
        example="{name: reward_table, every_steps: 25}",
        call_functions=True,
        check=_check_callback,
        error=CallbackSpecError,
    )
    return [callback for callback, _ in built]
