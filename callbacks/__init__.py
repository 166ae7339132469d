"""Trainer callbacks: the ones a recipe names in ``callbacks:``, and checkpoint sync (checkpoint_sync.py).

from callbacks import build_callbacks
build_callbacks([{"name": "reward_table", "every_steps": 25}])
build_callbacks([{"path": "my_pkg.my_module:MyCallback", "threshold": 0.5}])   # a plug-in
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from common.specs import SpecError, build_specs


@dataclass(frozen=True)
class RewardTable:
    """``{name: reward_table, every_steps: 25}``: print a table of the reward signals every N steps (reward_table.py).

    Args:
        every_steps: Optimizer steps between tables; a last table is printed at the end of training if steps remain.
    """

    every_steps: int = 25

    def __post_init__(self):
        every = self.every_steps
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every_steps must be a positive integer, got {every!r}")

    def build(self):
        from callbacks.reward_table import RewardTableCallback

        return RewardTableCallback(self.every_steps)


def registered() -> dict:
    """Registered name -> its settings class: built from the recipe entry, which it checks, and ``build()`` makes
    the TrainerCallback. Checking a recipe builds only the settings: transformers' trainer module, which every
    TrainerCallback needs, takes ~10 s to import, and `--print` and `--plan` need none of it."""
    return {"reward_table": RewardTable}


class CallbackSpecError(SpecError):
    """A recipe's ``callbacks:`` entry names an unknown callback or passes bad parameters."""


def _check_callback(callback, spec) -> None:
    if "name" in spec:  # a registered callback's settings, which build() turns into its TrainerCallback
        return
    # A TrainerCallback's class was imported with its module; if that module is not loaded, it is none.
    module = sys.modules.get("transformers.trainer_callback")
    if module is None or not isinstance(callback, module.TrainerCallback):
        raise CallbackSpecError(
            f"built a {type(callback).__name__}, not a transformers.TrainerCallback: point `path` at a "
            "TrainerCallback subclass, or at a function returning an instance of one."
        )


def _build_specs(specs) -> list[tuple]:
    return build_specs(
        "callbacks",
        specs,
        registered(),
        example="{name: reward_table, every_steps: 25}",
        call_functions=True,
        check=_check_callback,
        error=CallbackSpecError,
    )


def check_callbacks(specs: list[dict]) -> None:
    """Check a recipe's ``callbacks:`` list as :func:`build_callbacks` would, building plug-ins (their constructors
    may refuse) but only the settings of registered callbacks.

    Raises:
        CallbackSpecError: As :func:`build_callbacks`.
    """
    _build_specs(specs)


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
    return [built.build() if "name" in spec else built for built, spec in _build_specs(specs)]
